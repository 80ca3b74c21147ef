#include "proctcp.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_ulong(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	return x < y ? -1 : x > y;
}

static int cmp_entry(const void *a, const void *b)
{
	return cmp_ulong(&((const struct tcp_entry *)a)->inode, &((const struct tcp_entry *)b)->inode);
}

/* "0100007F:1F90" (IPv4) or 32 hex digits (IPv6): the kernel prints each 32-bit
 * word of the address as it lies in memory. */
static int parse_addr(const char *s, int v6, struct sockaddr_storage *ss)
{
	unsigned words = v6 ? 4 : 1, port;
	uint32_t w[4];
	char hex[9];

	for (unsigned i = 0; i < words; i++) {
		memcpy(hex, s + 8 * i, 8);
		hex[8] = 0;
		if (strspn(hex, "0123456789abcdefABCDEF") != 8)
			return -1;
		w[i] = (uint32_t)strtoul(hex, NULL, 16);
	}
	if (sscanf(s + 8 * words, ":%x", &port) != 1 || port > 65535)
		return -1;
	memset(ss, 0, sizeof(*ss));
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		memcpy(&a->sin6_addr, w, 16);
		a->sin6_port = htons((uint16_t)port);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = w[0];
		a->sin_port = htons((uint16_t)port);
	}
	return 0;
}

static void read_one(const char *path, int v6, struct tcp_table *t, size_t *cap)
{
	char line[512], la[64], ra[64];
	FILE *f = fopen(path, "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		struct tcp_entry e;
		unsigned st;
		/* sl local rem st tx:rx tr:when retr uid timeout inode */
		if (sscanf(line, "%*s %63s %63s %x %*s %*s %*s %u %*s %lu", la, ra, &st, &e.uid,
			   &e.inode) != 5 ||
		    strlen(la) != (v6 ? 37u : 13u) || strlen(ra) != strlen(la) || !e.inode ||
		    parse_addr(la, v6, &e.local) < 0 || parse_addr(ra, v6, &e.peer) < 0)
			continue;
		e.state = (int)st;
		if (t->n == *cap) {
			size_t nc = *cap ? *cap * 2 : 256;
			struct tcp_entry *ne = realloc(t->e, nc * sizeof(*ne));
			if (!ne)
				break;
			t->e = ne;
			*cap = nc;
		}
		t->e[t->n++] = e;
	}
	fclose(f);
}

int tcp_table_read(pid_t pid, struct tcp_table *t)
{
	char p4[64], p6[64];
	size_t cap = 0;

	t->e = NULL;
	t->n = 0;
	if (pid)
		snprintf(p4, sizeof(p4), "/proc/%d/net/tcp", (int)pid);
	else
		snprintf(p4, sizeof(p4), "/proc/self/net/tcp");
	snprintf(p6, sizeof(p6), "%s6", p4);
	if (access(p4, R_OK) < 0 && access(p6, R_OK) < 0)
		return -1;
	read_one(p4, 0, t, &cap);
	read_one(p6, 1, t, &cap);
	if (t->n)
		qsort(t->e, t->n, sizeof(*t->e), cmp_entry);
	return 0;
}

const struct tcp_entry *tcp_table_find(const struct tcp_table *t, unsigned long inode)
{
	struct tcp_entry key = {.inode = inode};
	return t->n ? bsearch(&key, t->e, t->n, sizeof(key), cmp_entry) : NULL;
}

void tcp_table_free(struct tcp_table *t)
{
	free(t->e);
	t->e = NULL;
	t->n = 0;
}

const char *tcp_state_name(int state)
{
	static const char *const names[] = {
		[TCP_ESTABLISHED] = "ESTAB",     [TCP_SYN_SENT] = "SYN-SENT",
		[TCP_SYN_RECV] = "SYN-RECV",     [TCP_FIN_WAIT1] = "FIN-WAIT-1",
		[TCP_FIN_WAIT2] = "FIN-WAIT-2",  [TCP_TIME_WAIT] = "TIME-WAIT",
		[TCP_CLOSE] = "CLOSE",           [TCP_CLOSE_WAIT] = "CLOSE-WAIT",
		[TCP_LAST_ACK] = "LAST-ACK",     [TCP_LISTEN] = "LISTEN",
		[TCP_CLOSING] = "CLOSING",
	};
	if (state > 0 && state < (int)(sizeof(names) / sizeof(names[0])) && names[state])
		return names[state];
	return "UNKNOWN";
}

void tcp_addr_format(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(a->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(a->sin6_port));
	} else {
		snprintf(buf, len, "*");
	}
}

unsigned long proc_fd_socket(pid_t pid, int fd)
{
	char path[64], link[64];
	unsigned long ino;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
	ssize_t l = readlink(path, link, sizeof(link) - 1);
	if (l <= 0)
		return 0;
	link[l] = 0;
	return sscanf(link, "socket:[%lu]", &ino) == 1 ? ino : 0;
}
