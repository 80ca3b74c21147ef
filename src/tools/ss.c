/* usmc ss: the sockets of running processes under usmc, as smcss lists SMC
 * sockets: what usmc made of each (shared memory, or TCP and why), joined with
 * what the kernel says about it (state, owner, addresses). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/config.h"
#include "../core/decline.h"
#include "../core/segment.h"
#include "../core/stats.h"
#include "json.h"
#include "proctcp.h"
#include "socks.h"
#include "usmc.h"

enum which { ONLY_CONNS, ALL, ONLY_LISTEN };

struct opts {
	enum which which;
	int debug, json;
	unsigned shown;
};

/* One direction as its segment shows it: untrusted numbers, printed as found. */
struct ring_view {
	uint64_t prod, cons;
	uint32_t prod_flags, cons_flags;
};

struct seg_view {
	int ok;
	uint32_t state;
	struct ring_view tx, rx;
};

static const char *const seg_states[] = {"unknown", "pending", "attached", "abandoned"};

static void ring_copy(const struct ring_shared *r, struct ring_view *v)
{
	v->prod = atomic_load((_Atomic uint64_t *)&r->prod);
	v->cons = atomic_load((_Atomic uint64_t *)&r->cons);
	v->prod_flags = atomic_load((_Atomic uint32_t *)&r->prod_flags);
	v->cons_flags = atomic_load((_Atomic uint32_t *)&r->cons_flags);
}

/* Maps the segment's header page through the process's arena descriptor, which
 * must be a memfd holding the whole page. */
static void seg_read(pid_t pid, const struct socktab_slot *sl, struct seg_view *v)
{
	char path[64], link[64];
	struct stat st;

	memset(v, 0, sizeof(*v));
	if (sl->arena_fd < 0 || (sl->seg_off & (SEG_HDR_SIZE - 1)))
		return;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, sl->arena_fd);
	ssize_t l = readlink(path, link, sizeof(link) - 1);
	if (l <= 0 || (link[l] = 0, strncmp(link, "/memfd:", 7)))
		return;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && sl->seg_off <= (uint64_t)st.st_size &&
	    (uint64_t)st.st_size - sl->seg_off >= SEG_HDR_SIZE) {
		const struct seg_hdr *h =
			mmap(NULL, SEG_HDR_SIZE, PROT_READ, MAP_SHARED, fd, (off_t)sl->seg_off);
		if (h != MAP_FAILED) {
			if (h->magic == SEG_MAGIC) {
				int tx = sl->server ? 1 : 0;
				v->ok = 1;
				v->state = atomic_load((_Atomic uint32_t *)&h->state);
				ring_copy(&h->ring[tx], &v->tx);
				ring_copy(&h->ring[!tx], &v->rx);
			}
			munmap((void *)h, SEG_HDR_SIZE);
		}
	}
	close(fd);
}

static const char *mode_name(const struct socktab_slot *sl)
{
	switch (sl->state) {
	case SOCKTAB_LISTEN:
	case SOCKTAB_SHM: return "SMCD";
	case SOCKTAB_PENDING: return "PENDING";
	default: return "TCP";
	}
}

/* The device that carries a connection (PENDING, SMCD), NULL for the rest. */
static const char *device_name(const struct socktab_slot *sl)
{
	if (sl->state != SOCKTAB_SHM && sl->state != SOCKTAB_PENDING)
		return NULL;
	return sl->device < STAT_DEVICES ? stat_device_names[sl->device] : "?";
}

static const char *side_name(const struct socktab_slot *sl)
{
	return sl->state == SOCKTAB_LISTEN ? "listener" : sl->server ? "server" : "client";
}

static void print_header(const struct opts *o)
{
	printf("%-11s %-6s %-7s %-15s %-9s %-41s %-41s %s", "State", "UID", "PID", "Process",
	       "Inode", "Local Address", "Peer Address", "Mode");
	if (o->debug)
		printf("  %-8s %-6s %-8s %-8s %-12s %-12s %-12s %-12s %s", "Side", "ConnID",
		       "TxRing", "RxRing", "TxProd", "TxCons", "RxProd", "RxCons", "Flags");
	printf("\n");
}

struct row {
	pid_t pid;
	int fd;
	const char *comm;
	unsigned long inode;
	const struct socktab_slot *sl;
	const struct tcp_entry *tcp;
};

static void print_text(const struct opts *o, const struct row *r)
{
	char la[64], pa[64], mode[64], uid[16];
	const struct socktab_slot *sl = r->sl;

	tcp_addr_format(&r->tcp->local, la, sizeof(la));
	tcp_addr_format(&r->tcp->peer, pa, sizeof(pa));
	snprintf(uid, sizeof(uid), "%u", r->tcp->uid);
	if (sl->state == SOCKTAB_TCP)
		snprintf(mode, sizeof(mode), "TCP 0x%08x %s", decline_code(sl->decline),
			 decline_name(sl->decline));
	else if (device_name(sl) && sl->device)
		/* The local device's is the mode as it always was. */
		snprintf(mode, sizeof(mode), "%s/%s", mode_name(sl), device_name(sl));
	else
		snprintf(mode, sizeof(mode), "%s", mode_name(sl));
	printf("%-11s %-6s %-7d %-15s %-9lu %-41s %-41s %s", tcp_state_name(r->tcp->state),
	       uid, (int)r->pid, r->comm, r->inode, la, pa, mode);
	if (o->debug && (sl->state == SOCKTAB_SHM || sl->state == SOCKTAB_PENDING)) {
		struct seg_view v;
		seg_read(r->pid, sl, &v);
		printf("  %-8s %-6llu %-8u %-8u ", side_name(sl), (unsigned long long)sl->conn_id,
		       sl->ring_size[0], sl->ring_size[1]);
		if (v.ok)
			printf("%-12llu %-12llu %-12llu %-12llu %s tx:%x/%x rx:%x/%x",
			       (unsigned long long)v.tx.prod, (unsigned long long)v.tx.cons,
			       (unsigned long long)v.rx.prod, (unsigned long long)v.rx.cons,
			       seg_states[v.state < 4 ? v.state : 0], v.tx.prod_flags,
			       v.tx.cons_flags, v.rx.prod_flags, v.rx.cons_flags);
		else
			printf("%-12s %-12s %-12s %-12s -", "-", "-", "-", "-");
	} else if (o->debug) {
		printf("  %-8s", side_name(sl));
	}
	printf("\n");
}

static void json_ring(const char *name, uint32_t size, const struct ring_view *r)
{
	printf("\"%s\": {\"size\": %u, \"prod\": %llu, \"cons\": %llu, \"prod_flags\": %u, "
	       "\"cons_flags\": %u}",
	       name, size, (unsigned long long)r->prod, (unsigned long long)r->cons, r->prod_flags,
	       r->cons_flags);
}

static void print_json(const struct opts *o, const struct row *r)
{
	char la[64], pa[64];
	const struct socktab_slot *sl = r->sl;

	tcp_addr_format(&r->tcp->local, la, sizeof(la));
	tcp_addr_format(&r->tcp->peer, pa, sizeof(pa));
	printf("%s\n  {\"state\": \"%s\", \"uid\": %u, \"pid\": %d, \"process\": ",
	       o->shown ? "," : "", tcp_state_name(r->tcp->state), r->tcp->uid, (int)r->pid);
	json_string(stdout, r->comm);
	printf(", \"fd\": %d, \"inode\": %llu, \"local\": \"%s\", \"peer\": \"%s\", "
	       "\"mode\": \"%s\", \"side\": \"%s\", \"decline\": ",
	       r->fd, (unsigned long long)r->inode, la, pa, mode_name(sl), side_name(sl));
	if (sl->state == SOCKTAB_TCP)
		printf("{\"code\": \"0x%08x\", \"name\": \"%s\"}", decline_code(sl->decline),
		       decline_name(sl->decline));
	else
		printf("null");
	if (device_name(sl))
		printf(", \"device\": \"%s\"", device_name(sl));
	else
		printf(", \"device\": null");
	if (o->debug) {
		printf(", \"detail\": ");
		if (sl->state == SOCKTAB_SHM || sl->state == SOCKTAB_PENDING) {
			struct seg_view v;
			seg_read(r->pid, sl, &v);
			printf("{\"conn_id\": %llu, \"tx_ring_size\": %u, \"rx_ring_size\": %u, "
			       "\"segment\": ",
			       (unsigned long long)sl->conn_id, sl->ring_size[0], sl->ring_size[1]);
			if (v.ok) {
				printf("{\"state\": \"%s\", ", seg_states[v.state < 4 ? v.state : 0]);
				json_ring("tx", sl->ring_size[0], &v.tx);
				printf(", ");
				json_ring("rx", sl->ring_size[1], &v.rx);
				printf("}");
			} else {
				printf("null");
			}
			printf("}");
		} else {
			printf("null");
		}
	}
	printf("}");
}

static int wanted(const struct opts *o, const struct socktab_slot *sl)
{
	int listen = sl->state == SOCKTAB_LISTEN;
	return o->which == ALL || (o->which == ONLY_LISTEN) == listen;
}

static void read_comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f || !fgets(buf, (int)len, f))
		snprintf(buf, len, "?");
	else
		buf[strcspn(buf, "\n")] = 0;
	if (f)
		fclose(f);
}

static int show_process(struct procfile *f, void *arg)
{
	struct opts *o = arg;
	const struct socktab_hdr *h = socks_table(f);
	struct tcp_table tcp;
	char comm[64];

	if (!h)
		return 0;
	if (!f->alive) {
		/* Its process exited: nothing it published is true any more. */
		unlink(f->path);
		return 0;
	}
	pid_t pid = socks_pid(h);
	if (!pid || tcp_table_read(pid, &tcp) < 0)
		return 0;
	read_comm(pid, comm, sizeof(comm));
	for (uint32_t i = 0, used = socks_used(h); i < used; i++) {
		struct socktab_slot sl;
		struct row r = {pid, (int)i, comm, proc_fd_socket(pid, (int)i), &sl, NULL};
		if (!r.inode || !socks_slot(h, i, &sl) || !wanted(o, &sl))
			continue;
		/* A descriptor that is no TCP socket now was closed unseen. */
		if (!(r.tcp = tcp_table_find(&tcp, r.inode)))
			continue;
		if (o->json)
			print_json(o, &r);
		else
			print_text(o, &r);
		o->shown++;
	}
	tcp_table_free(&tcp);
	return 0;
}

int cmd_ss(int argc, char **argv)
{
	struct opts o = {ONLY_CONNS, 0, 0, 0};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (opt_rundir(argc, argv, &i))
			continue;
		if (is_help(a))
			help_exit();
		else if (!strcmp(a, "-a") || !strcmp(a, "--all"))
			o.which = ALL;
		else if (!strcmp(a, "-l") || !strcmp(a, "--listening"))
			o.which = ONLY_LISTEN;
		else if (!strcmp(a, "-d") || !strcmp(a, "--debug"))
			o.debug = 1;
		else if (!strcmp(a, "--json"))
			o.json = 1;
		else
			die_usage();
	}
	if (config_load() < 0)
		return 1;
	if (o.json) {
		printf("{\"rundir\": ");
		json_string(stdout, cfg.rundir);
		printf(", \"sockets\": [");
	} else {
		print_header(&o);
	}
	int others = procfile_each("socks", sizeof(struct socktab_hdr), 0, show_process, &o);
	if (o.json)
		printf("%s]}\n", o.shown ? "\n" : "");
	if (others)
		fprintf(stderr, "usmc ss: %s holds the sockets of %d processes of another user, "
				"left out (run as that user)\n", cfg.rundir, others);
	return 0;
}
