/* TCP endpoint addresses, normalised so that an IPv4-mapped IPv6 address and its
 * IPv4 form compare equal: a dual-stack listener sees IPv4 peers that way. */
#ifndef USMC_ADDR_H
#define USMC_ADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct addr {
	int family;          /* AF_INET or AF_INET6 */
	uint8_t ip[16];      /* 4 or 16 bytes used */
	uint16_t port;       /* host order */
};

void addr_from_sockaddr(struct addr *a, const struct sockaddr *sa);
int addr_equal(const struct addr *a, const struct addr *b); /* ip and port */
int addr_is_any(const struct addr *a);
int addr_is_loopback(const struct addr *a);
/* A connect() to the wildcard address reaches this host over loopback (Linux
 * takes 0.0.0.0 for 127.0.0.1 and :: for ::1): the address it really reaches. */
void addr_reached(struct addr *a);
unsigned addr_port(const struct sockaddr *sa);
void addr_format(const struct addr *a, char *buf, size_t len);  /* ip only */
int addr_parse(struct addr *a, const char *s);                  /* ip only */
int addr_is_inet(const struct sockaddr *sa, socklen_t len);
/* The addresses a listener bound to bound accepts on: its own, or, bound to the
 * wildcard, every address of its network namespace (IPv4 ones too unless
 * v6only), at most max. prefix[i] is how many bits of out[i] count: all of
 * them, but 8 for IPv4 loopback from the wildcard (every 127.x.y.z reaches
 * loopback's 127.0.0.1/8, and the listener). Returns how many. */
#define ADDR_LOCAL_MAX 64
int addr_local_list(const struct sockaddr *bound, int v6only, struct addr *out, uint8_t *prefix,
		    int max);

/* A connected socket's own name and its peer's (peer may be NULL); -1 when it
 * has none yet (no port: not bound, or its connect() has not got that far). */
int addr_sock_names(int fd, struct addr *local, struct addr *peer);

#endif
