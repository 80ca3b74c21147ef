#include "addr.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

void addr_from_sockaddr(struct addr *a, const struct sockaddr *sa)
{
	memset(a, 0, sizeof(*a));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)sa;
		a->family = AF_INET;
		memcpy(a->ip, &s->sin_addr, 4);
		a->port = ntohs(s->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)sa;
		a->port = ntohs(s->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&s->sin6_addr)) {
			a->family = AF_INET;
			memcpy(a->ip, s->sin6_addr.s6_addr + 12, 4);
		} else {
			a->family = AF_INET6;
			memcpy(a->ip, &s->sin6_addr, 16);
		}
	}
}

int addr_equal(const struct addr *a, const struct addr *b)
{
	return a->family == b->family && a->port == b->port &&
	       !memcmp(a->ip, b->ip, a->family == AF_INET ? 4 : 16);
}

int addr_is_any(const struct addr *a)
{
	static const uint8_t zero[16];

	return !memcmp(a->ip, zero, a->family == AF_INET ? 4 : 16);
}

int addr_is_loopback(const struct addr *a)
{
	static const uint8_t lo6[16] = {[15] = 1};

	if (a->family == AF_INET)
		return a->ip[0] == 127;
	return !memcmp(a->ip, lo6, 16);
}

void addr_reached(struct addr *a)
{
	if (!addr_is_any(a))
		return;
	if (a->family == AF_INET)
		a->ip[0] = 127, a->ip[3] = 1;
	else
		a->ip[15] = 1;
}

unsigned addr_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
	return 0;
}

void addr_format(const struct addr *a, char *buf, size_t len)
{
	if (!inet_ntop(a->family, a->ip, buf, (socklen_t)len))
		buf[0] = 0;
}

int addr_parse(struct addr *a, const char *s)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, s, a->ip) == 1) {
		a->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, a->ip) == 1) {
		struct in6_addr x;
		memcpy(&x, a->ip, 16);
		a->family = AF_INET6;
		if (IN6_IS_ADDR_V4MAPPED(&x)) {
			a->family = AF_INET;
			memmove(a->ip, a->ip + 12, 4);
			memset(a->ip + 4, 0, 12);
		}
		return 0;
	}
	return -1;
}

int addr_local_list(const struct sockaddr *bound, int v6only, struct addr *out, uint8_t *prefix,
		    int max)
{
	struct addr a;
	struct ifaddrs *ifa;
	int n = 0;

	addr_from_sockaddr(&a, bound);
	if (!addr_is_any(&a)) {
		out[0] = a;
		prefix[0] = a.family == AF_INET ? 32 : 128;
		return max > 0;
	}
	if (getifaddrs(&ifa) < 0)
		return 0;
	for (struct ifaddrs *i = ifa; i && n < max; i = i->ifa_next) {
		if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
				     i->ifa_addr->sa_family != AF_INET6))
			continue;
		if (a.family == AF_INET && i->ifa_addr->sa_family != AF_INET)
			continue;
		if (v6only && i->ifa_addr->sa_family != AF_INET6)
			continue;
		addr_from_sockaddr(&out[n], i->ifa_addr);
		out[n].port = a.port;
		prefix[n] = out[n].family == AF_INET ? addr_is_loopback(&out[n]) ? 8 : 32 : 128;
		n++;
	}
	freeifaddrs(ifa);
	return n;
}

int addr_sock_names(int fd, struct addr *local, struct addr *peer)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &l) < 0)
		return -1;
	addr_from_sockaddr(local, (struct sockaddr *)&ss);
	if (!local->port)
		return -1;
	l = sizeof(ss);
	if (peer && getpeername(fd, (struct sockaddr *)&ss, &l) < 0)
		return -1;
	if (peer)
		addr_from_sockaddr(peer, (struct sockaddr *)&ss);
	return 0;
}

int addr_is_inet(const struct sockaddr *sa, socklen_t len)
{
	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET)
		return len >= (socklen_t)sizeof(struct sockaddr_in);
	if (sa->sa_family == AF_INET6)
		return len >= (socklen_t)sizeof(struct sockaddr_in6);
	return 0;
}
