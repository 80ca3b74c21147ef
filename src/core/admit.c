#include "admit.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

#include "conn.h"
#include "policy.h"
#include "sys.h"

static struct policy pol;
static enum policy_default dflt;
static int uses_local;
static char comm[17];

int admit_load(int preloaded)
{
	const char *v = getenv("USMC_POLICY");
	char err[2048];

	dflt = preloaded ? POLICY_ALL : POLICY_SMC_ONLY;
	if (v && *v && policy_parse_setting(&pol, v, err, sizeof(err)) < 0) {
		fprintf(stderr, "usmc: %s\n", err);
		return -1;
	}
	uses_local = policy_uses_local(&pol);
	if (prctl(PR_GET_NAME, comm) < 0)
		comm[0] = 0;
	return 0;
}

static struct policy_sock sock_of(int smc, int server, unsigned known)
{
	return (struct policy_sock){
		.known = known,
		.smc = smc,
		.server = server,
		.comm = comm,
		.prog = program_invocation_short_name,
	};
}

/* The local address fd has or, for an unbound client, the one the kernel will
 * give it when it connects to peer (what a UDP socket connected there gets). */
static void learn_local(struct policy_sock *q, int fd, const struct sockaddr *peer)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return;
	addr_from_sockaddr(&q->local, (struct sockaddr *)&ss);
	if (q->local.port)
		q->known |= POLICY_K_LOCAL_PORT;
	if (!addr_is_any(&q->local)) {
		q->known |= POLICY_K_LOCAL_IP;
		return;
	}
	if (!peer)
		return;
	socklen_t plen = peer->sa_family == AF_INET ? sizeof(struct sockaddr_in)
						    : sizeof(struct sockaddr_in6);
	int u = real.socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	len = sizeof(ss);
	if (u >= 0 && real.connect(u, peer, plen) == 0 &&
	    getsockname(u, (struct sockaddr *)&ss, &len) == 0) {
		uint16_t port = q->local.port;
		addr_from_sockaddr(&q->local, (struct sockaddr *)&ss);
		q->local.port = port;
		q->known |= POLICY_K_LOCAL_IP;
	}
	if (u >= 0)
		real.close(u);
}

int admit_socket(int smc)
{
	/* Even the process name is left unknown here: a socket that a rule on it
	 * excludes is still followed, so that its fallback is counted. */
	if (smc)
		return 1;
	if (!pol.nrules)
		return policy_default_admits(&pol, 0, dflt);
	struct policy_sock q = sock_of(0, 0, 0);

	return policy_admits(&pol, &q, dflt);
}

int admit_connect(int smc, int fd, const struct sockaddr *peer)
{
	/* Without rules the default decides alone: where it goes does not matter. */
	if (!pol.nrules)
		return policy_default_admits(&pol, smc, dflt);
	struct policy_sock q = sock_of(smc, 0, POLICY_K_PEER | POLICY_K_COMM);
	int e = errno;
	addr_from_sockaddr(&q.peer, peer);
	addr_reached(&q.peer);
	if (uses_local)
		learn_local(&q, fd, peer);
	errno = e;
	return policy_admits(&pol, &q, dflt);
}

int admit_listen(struct usock *s, const struct sockaddr *bound)
{
	struct policy_sock q = sock_of(s->smc, 1, POLICY_K_LOCAL_PORT | POLICY_K_COMM);

	addr_from_sockaddr(&q.local, bound);
	if (!addr_is_any(&q.local))
		q.known |= POLICY_K_LOCAL_IP;
	return policy_admits(&pol, &q, dflt);
}

int admit_accepted(struct usock *l, int fd, const struct sockaddr *peer)
{
	struct policy_sock q = sock_of(l->smc, 1, POLICY_K_PEER | POLICY_K_LOCAL_PORT | POLICY_K_COMM);
	int e = errno;

	addr_from_sockaddr(&q.peer, peer);
	addr_from_sockaddr(&q.local, (const struct sockaddr *)&l->bound);
	if (!addr_is_any(&q.local))
		q.known |= POLICY_K_LOCAL_IP;
	else if (uses_local)
		learn_local(&q, fd, NULL);
	errno = e;
	return policy_admits(&pol, &q, dflt);
}
