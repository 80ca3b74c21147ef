/* The SMC-ERM program of the slides, working: a server registers a buffer that
 * its peer may write, tells the client its memory id over the connection, and
 * waits for the write's remote completion; the client registers its own
 * buffer, copies it into the server's with one sendmsg(), and reads its own
 * completion.
 *
 *     cc erm_write.c $(pkg-config --cflags --libs usmc) -o erm_write
 *     usmc run -- ./erm_write server 127.0.0.1 7000 &
 *     usmc run -- ./erm_write client 127.0.0.1 7000
 *
 * Both ends must run under usmc (or create their sockets with IPPROTO_SMC):
 * on a connection that is plain TCP every ERM call fails with EOPNOTSUPP. */
/* MSG_ERRQUEUE, CMSG_* under -std=c11 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <usmc/usmc.h>

#define BUFF_SIZE 4096
#define MESSAGE "hello from the ERM client"

static int fail(const char *what)
{
	perror(what);
	return 1;
}

static int reg_mr(int sock, void *buff, size_t buff_size)
{
	struct smc_erm_cmd_reg_mr regmr = {
		.type = SMC_ERM_CMD_REG_MR,
		.addr = buff,
		.len = buff_size,
		.access_flags = SMC_ACCESS_LOCAL_WRITE | SMC_ACCESS_REMOTE_READ |
				SMC_ACCESS_REMOTE_WRITE,
	};

	return setsockopt(sock, SOL_SMC, SMC_ERM_CMD, &regmr, sizeof(regmr));
}

static int dereg_mr(int sock, int memid)
{
	struct smc_erm_cmd_dereg_mr deregmr = {
		.type = SMC_ERM_CMD_DEREG_MR,
		.memid = memid,
	};

	return setsockopt(sock, SOL_SMC, SMC_ERM_CMD, &deregmr, sizeof(deregmr));
}

/* Waits for completions (poll() reports POLLERR, as for MSG_ZEROCOPY) and
 * handles those of a copy; returns 0 once one came. */
static int wait_completion(int sock, const char *who)
{
	union {
		char buf[CMSG_SPACE(sizeof(struct smc_rmem_compl_event)) * 8];
		struct cmsghdr align;
	} u;
	struct pollfd pf = {sock, 0, 0};

	if (poll(&pf, 1, 10000) != 1 || !(pf.revents & POLLERR))
		return fail("poll");
	struct msghdr msgh = {.msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
	if (recvmsg(sock, &msgh, MSG_ERRQUEUE) < 0)
		return fail("recvmsg");
	for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msgh); cmsg != NULL;
	     cmsg = CMSG_NXTHDR(&msgh, cmsg)) {
		if (cmsg->cmsg_level != SOL_SMC || cmsg->cmsg_type != SMC_ERM_CMD_COMPL)
			continue;
		struct smc_rmem_compl_event *ev = (struct smc_rmem_compl_event *)CMSG_DATA(cmsg);
		char *data;
		size_t recv_len;
		switch (ev->event) {
		case SMC_ERM_CMD_COPY:
			if (ev->status) {
				fprintf(stderr, "%s: copy failed: %s\n", who, strerror(ev->status));
				return 1;
			}
			data = ev->copy.addr;
			recv_len = ev->copy.len;
			printf("%s: %s \"%.*s\"\n", who,
			       ev->flags & SMC_ERM_COMPL_REMOTE ? "received" : "sent", (int)recv_len,
			       data);
			return 0;
		default:
			fprintf(stderr, "%s: uninteresting event: %u\n", who, ev->event);
			break;
		}
	}
	return 1;
}

static int server(int l)
{
	int sock = accept(l, NULL, NULL);
	char *buff = calloc(1, BUFF_SIZE);

	if (sock < 0 || !buff)
		return fail("accept");
	int memid = reg_mr(sock, buff, BUFF_SIZE);
	if (memid < 0)
		return fail("setsockopt(SMC_ERM_CMD_REG_MR)");
	/* The application's own protocol tells the peer which memory to write. */
	if (write(sock, &memid, sizeof(memid)) != sizeof(memid))
		return fail("write");
	if (wait_completion(sock, "server"))
		return 1;
	if (dereg_mr(sock, memid) < 0)
		return fail("setsockopt(SMC_ERM_CMD_DEREG_MR)");
	close(sock);
	free(buff);
	return 0;
}

static int client(int sock)
{
	char *buff = calloc(1, BUFF_SIZE);
	int remote_memid;

	if (!buff)
		return fail("calloc");
	strcpy(buff, MESSAGE);
	int local_memid = reg_mr(sock, buff, BUFF_SIZE);
	if (local_memid < 0)
		return fail("setsockopt(SMC_ERM_CMD_REG_MR)");
	if (read(sock, &remote_memid, sizeof(remote_memid)) != sizeof(remote_memid))
		return fail("read");

	struct smc_erm_cmd_copy copycmd = {
		.hdr.type = SMC_ERM_CMD_COPY,
		.hdr.flags = SMC_ERM_CMD_FLAG_REMOTE_COMPL,
		.len = sizeof(MESSAGE) - 1,
		.src_idx = local_memid,
		.src_offset = 0,
		.dst_idx = remote_memid,
		.dst_offset = 0,
	};
	union {
		char buf[CMSG_SPACE(sizeof(struct smc_erm_cmd_copy))];
		struct cmsghdr align;
	} u;
	struct msghdr msgh = {
		.msg_control = u.buf,
		.msg_controllen = sizeof(u.buf),
	};
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msgh);
	cmsg->cmsg_level = SOL_SMC;
	cmsg->cmsg_type = SMC_ERM_CMD;
	cmsg->cmsg_len = CMSG_LEN(sizeof(struct smc_erm_cmd_copy));
	memcpy(CMSG_DATA(cmsg), &copycmd, sizeof(copycmd));
	if (sendmsg(sock, &msgh, 0) < 0)
		return fail("sendmsg");
	if (wait_completion(sock, "client"))
		return 1;
	close(sock);
	free(buff);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};

	if (argc != 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
	    inet_pton(AF_INET, argv[2], &a.sin_addr) != 1) {
		fprintf(stderr, "usage: %s server|client ADDR PORT\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	a.sin_port = htons((uint16_t)atoi(argv[3]));
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return fail("socket");
	if (!strcmp(argv[1], "server")) {
		int on = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1) < 0)
			return fail("listen");
		return server(fd);
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return fail("connect");
	return client(fd);
}
