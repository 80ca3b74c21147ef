/* What the kernel says about a process's TCP sockets: its descriptors (which
 * socket inodes it holds) and the TCP table of its network namespace. */
#ifndef USMC_TOOL_PROCTCP_H
#define USMC_TOOL_PROCTCP_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

struct tcp_entry {
	unsigned long inode;
	int state;                        /* TCP_ESTABLISHED... as in <netinet/tcp.h> */
	unsigned uid;
	struct sockaddr_storage local, peer;
};

struct tcp_table {
	struct tcp_entry *e;              /* sorted by inode */
	size_t n;
};

/* Reads /proc/PID/net/tcp and tcp6 (PID 0: our own). -1 if neither is readable. */
int tcp_table_read(pid_t pid, struct tcp_table *t);
const struct tcp_entry *tcp_table_find(const struct tcp_table *t, unsigned long inode);
void tcp_table_free(struct tcp_table *t);

/* ss's name of a TCP state (ESTAB, LISTEN...). */
const char *tcp_state_name(int state);
/* ADDR:PORT, [ADDR6]:PORT, or * when unknown. */
void tcp_addr_format(const struct sockaddr_storage *ss, char *buf, size_t len);

/* The inode of the socket PID holds as descriptor fd; 0 if it holds none there. */
unsigned long proc_fd_socket(pid_t pid, int fd);

#endif
