/* The discovery log page: one entry, the NVM subsystem at the port its
 * target listens on, at the address the host reached the discovery controller
 * through when the target listens on every address. */
#include "target.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define ENTRIES 1

static void entry(const struct tconn *c, uint8_t *e)
{
	const struct target *t = c->t;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char addr[INET6_ADDRSTRLEN] = "";
	int v6 = 0;

	if (getsockname(c->q.fd, (struct sockaddr *)&ss, &sl) == 0) {
		v6 = ss.ss_family == AF_INET6;
		inet_ntop(ss.ss_family,
			  v6 ? (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
			     : (void *)&((struct sockaddr_in *)&ss)->sin_addr,
			  addr, sizeof(addr));
	}
	e[DISCE_TRTYPE] = NVMF_TRTYPE_TCP;
	e[DISCE_ADRFAM] = v6 ? NVMF_ADRFAM_IPV6 : NVMF_ADRFAM_IPV4;
	e[DISCE_SUBTYPE] = NVMF_SUBTYPE_NVME;
	e[DISCE_TREQ] = NVMF_TREQ_DISABLE_SQFLOW;
	put_le16(e + DISCE_PORTID, 1);
	put_le16(e + DISCE_CNTLID, NVMF_CNTLID_DYNAMIC);
	put_le16(e + DISCE_ASQSZ, TGT_AQ_MAX);
	snprintf((char *)e + DISCE_TRSVCID, 32, "%u", t->o.port);
	snprintf((char *)e + DISCE_TRADDR, 256, "%s", addr);
	snprintf((char *)e + DISCE_SUBNQN, NVMF_NQN_SIZE, "%s", t->nqn);
	/* TCP's transport specific address subtype: no security. */
	e[DISCE_TSAS] = 0;
}

void discovery_log(const struct tconn *c, uint8_t *buf, uint64_t off, uint32_t len)
{
	size_t size = NVMF_DISC_ENTRY_SIZE * (1 + ENTRIES);
	uint8_t *page = calloc(1, size);

	if (!page)
		return;
	put_le64(page + DISC_GENCTR, 1);
	put_le64(page + DISC_NUMREC, ENTRIES);
	entry(c, page + NVMF_DISC_ENTRY_SIZE);
	if (off < size)
		memcpy(buf, page + off, size - off < len ? size - off : len);
	free(page);
}
