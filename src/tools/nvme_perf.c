/* usmc nvme perf: jobs, each a thread with an I/O queue of its own, keep
 * queue-depth commands in flight for a time and report what spdk_nvme_perf
 * and fio report: IOPS, throughput, latency percentiles, and the processor time
 * each I/O cost the host. With --verify, writes carry data made from a seed and
 * offset, and reads check it. */
#include "nvme.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../nvme/digest.h"
#include "../nvme/pattern.h"

enum workload { W_RANDREAD, W_RANDWRITE, W_READ, W_WRITE, W_RANDRW };
static const char *const wl_names[] = {"randread", "randwrite", "read", "write", "randrw"};

/* Latency histogram: exact below 64 ns, then 32 buckets a power of two. */
#define HBUCKETS 1920
#define VERIFY_REPORTS 5

struct perf {
	struct host_args a;
	unsigned qd, jobs, mix;
	uint32_t io;
	enum workload wl;
	double secs;
	uint64_t span;
	int once, verify;
	uint64_t seed;
	unsigned shift;
	_Atomic unsigned reports;
};

struct job;

struct slot {
	struct job *j;
	uint8_t *buf;
	struct iovec iov;
	uint64_t t0, off;
	int write;
};

struct job {
	struct perf *p;
	struct nvme_ioq *q;
	struct slot *slots;
	uint64_t rng, lo, hi, next;
	uint64_t ios, bytes, errors, bad;
	uint64_t hist[HBUCKETS], lat_sum, lat_max;
	uint64_t end_ns;
	int stop, down;
	double cpu;
	pthread_t th;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned bucket(uint64_t v)
{
	unsigned e;

	if (v < 64)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	return 64 + (e - 6) * 32 + (unsigned)((v >> (e - 5)) - 32);
}

static double bucket_ns(unsigned b)
{
	unsigned e, m;

	if (b < 64)
		return b;
	e = (b - 64) / 32 + 6;
	m = (b - 64) % 32 + 32;
	return (double)((uint64_t)m << (e - 5)) + (double)(1ull << (e - 6));
}

static void submit_next(struct slot *s);

static void done(void *arg, uint16_t status, const struct nvme_cqe *cqe)
{
	struct slot *s = arg;
	struct job *j = s->j;
	struct perf *p = j->p;
	uint64_t now = now_ns(), lat = now - s->t0;
	long bad;

	(void)cqe;
	j->ios++;
	j->hist[bucket(lat)]++;
	j->lat_sum += lat;
	if (lat > j->lat_max)
		j->lat_max = lat;
	if (status) {
		j->errors++;
		if (atomic_fetch_add(&p->reports, 1) < VERIFY_REPORTS)
			fprintf(stderr, "usmc nvme perf: %s at byte %llu: %s\n", s->write ? "write" : "read",
				(unsigned long long)s->off, nvme_status_str(status));
	} else {
		j->bytes += p->io;
		if (p->verify && !s->write &&
		    (bad = pattern_check(p->seed, s->off, s->buf, p->io)) >= 0) {
			j->bad++;
			if (atomic_fetch_add(&p->reports, 1) < VERIFY_REPORTS)
				fprintf(stderr, "usmc nvme perf: verify: byte %llu differs\n",
					(unsigned long long)(s->off + (uint64_t)bad));
		}
	}
	if (now >= j->end_ns)
		j->stop = 1;
	if (!j->stop)
		submit_next(s);
}

static void submit_next(struct slot *s)
{
	struct job *j = s->j;
	struct perf *p = j->p;
	struct nvme_sqe sqe;
	uint64_t blocks = (j->hi - j->lo) / p->io;

	switch (p->wl) {
	case W_READ:
	case W_WRITE:
		if (j->next >= j->hi) {
			if (p->once) {
				j->stop = 1;
				return;
			}
			j->next = j->lo;
		}
		s->off = j->next;
		j->next += p->io;
		s->write = p->wl == W_WRITE;
		break;
	default:
		j->rng = pattern_mix(j->rng);
		s->off = j->lo + j->rng % blocks * p->io;
		s->write = p->wl == W_RANDWRITE ||
			   (p->wl == W_RANDRW && (pattern_mix(j->rng) % 100) >= p->mix);
	}
	if (s->write && p->verify)
		pattern_fill(p->seed, s->off, s->buf, p->io);
	nvme_rw_sqe(&sqe, s->write ? NVME_CMD_WRITE : NVME_CMD_READ, p->a.nsid, s->off >> p->shift,
		    p->io >> p->shift);
	s->t0 = now_ns();
	if (nvme_submit(j->q, &sqe, &s->iov, 1, p->io, s->write, done, s) < 0) {
		j->errors++;
		j->stop = 1;
	}
}

static double thread_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

static void *job_main(void *arg)
{
	struct job *j = arg;
	double cpu0 = thread_cpu();

	j->end_ns = now_ns() + (uint64_t)(j->p->secs * 1e9);
	for (unsigned i = 0; i < j->p->qd && !j->stop; i++)
		submit_next(&j->slots[i]);
	while (nvme_ioq_inflight(j->q)) {
		if (nvme_ioq_poll(j->q, 100) < 0) {
			j->down = 1;
			break;
		}
		if (now_ns() >= j->end_ns + 5000000000ull && !j->down) {
			/* Commands outlived the run by far: their queue's timeout
			 * will fail them. */
			j->stop = 1;
		}
	}
	j->cpu = thread_cpu() - cpu0;
	return NULL;
}

static void parse(struct perf *p, int argc, char **argv)
{
	host_args_init(&p->a);
	p->qd = 128;
	p->io = 4096;
	p->wl = W_RANDREAD;
	p->secs = 10;
	p->jobs = 1;
	p->mix = 50;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (host_arg(&p->a, argc, argv, &i))
			continue;
		if (!strcmp(o, "--once")) {
			p->once = 1;
			continue;
		}
		if (!v)
			nvme_usage();
		i++;
		if (!strcmp(o, "-q") || !strcmp(o, "--queue-depth")) {
			p->qd = (unsigned)nvme_num_arg(v, 1, 65535);
		} else if (!strcmp(o, "-o") || !strcmp(o, "--io-size")) {
			uint64_t n = nvme_size_arg(v);

			if (!n || n > (64u << 20))
				nvme_usage();
			p->io = (uint32_t)n;
		} else if (!strcmp(o, "-w") || !strcmp(o, "--workload")) {
			unsigned k;

			for (k = 0; k < sizeof(wl_names) / sizeof(wl_names[0]); k++)
				if (!strcmp(v, wl_names[k]))
					break;
			if (k == sizeof(wl_names) / sizeof(wl_names[0]))
				nvme_usage();
			p->wl = (enum workload)k;
		} else if (!strcmp(o, "-M") || !strcmp(o, "--rwmixread")) {
			p->mix = (unsigned)nvme_num_arg(v, 0, 100);
		} else if (!strcmp(o, "-t") || !strcmp(o, "--time")) {
			p->secs = (double)nvme_num_arg(v, 1, 86400);
		} else if (!strcmp(o, "--jobs")) {
			p->jobs = (unsigned)nvme_num_arg(v, 1, 64);
		} else if (!strcmp(o, "--span")) {
			p->span = nvme_size_arg(v);
		} else if (!strcmp(o, "--verify")) {
			p->verify = 1;
			p->seed = nvme_num_arg(v, 0, ~0ul);
		} else {
			nvme_usage();
		}
	}
	p->a.o.nr_io_queues = p->jobs;
	p->a.o.queue_size = p->qd + 1;
}

static double percentile(const uint64_t *hist, uint64_t total, double pct)
{
	uint64_t want = (uint64_t)((double)total * pct / 100.0), seen = 0;

	for (unsigned b = 0; b < HBUCKETS; b++) {
		seen += hist[b];
		if (seen > want)
			return bucket_ns(b) / 1000.0;
	}
	return 0;
}

static const char *placement_name(int placement, int ddp)
{
	if (!ddp)
		return "off (staging buffer, digest after)";
	return placement == 2 ? "ring (copy and digest in one pass)"
	       : placement == 1 ? "readv (placed by the kernel, digest after)"
				: "none offered";
}

static int report(struct perf *p, struct job *jobs, double secs)
{
	static uint64_t hist[HBUCKETS];
	uint64_t ios = 0, bytes = 0, errors = 0, bad = 0, lat_sum = 0, lat_max = 0;
	struct nvme_ioq_stats st, sum = {0};
	double cpu = 0;
	int down = 0;

	for (unsigned k = 0; k < p->jobs; k++) {
		struct job *j = &jobs[k];

		ios += j->ios;
		bytes += j->bytes;
		errors += j->errors;
		bad += j->bad;
		lat_sum += j->lat_sum;
		lat_max = j->lat_max > lat_max ? j->lat_max : lat_max;
		cpu += j->cpu;
		down |= j->down;
		for (unsigned b = 0; b < HBUCKETS; b++)
			hist[b] += j->hist[b];
		nvme_ioq_stats(j->q, &st);
		sum.reconnects += st.reconnects;
		sum.ddgst_errors += st.ddgst_errors;
		sum.hdgst_errors += st.hdgst_errors;
		sum.placed += st.placed;
		sum.staged += st.staged;
		sum.placement = st.placement;
	}
	printf("usmc nvme perf: %s, %u B, queue depth %u, %u job%s, %.1f s; digests: header %s, data %s"
	       "; placement: %s; CRC32C: %s\n",
	       wl_names[p->wl], p->io, p->qd, p->jobs, p->jobs > 1 ? "s" : "", secs,
	       p->a.o.hdgst ? "on" : "off", p->a.o.ddgst ? "on" : "off",
	       placement_name(sum.placement, p->a.o.ddp), digest_impl());
	printf("iops %.0f\n", (double)ios / secs);
	printf("mbps %.1f\n", (double)bytes / secs / 1e6);
	printf("mibps %.1f\n", (double)bytes / secs / 1048576.0);
	printf("lat_avg_us %.2f\n", ios ? (double)lat_sum / (double)ios / 1000.0 : 0.0);
	printf("lat_p50_us %.2f\n", percentile(hist, ios, 50));
	printf("lat_p90_us %.2f\n", percentile(hist, ios, 90));
	printf("lat_p99_us %.2f\n", percentile(hist, ios, 99));
	printf("lat_p99.9_us %.2f\n", percentile(hist, ios, 99.9));
	printf("lat_max_us %.2f\n", (double)lat_max / 1000.0);
	printf("cpu_us_per_io %.3f\n", ios ? cpu * 1e6 / (double)ios : 0.0);
	printf("ios %llu\n", (unsigned long long)ios);
	printf("errors %llu\n", (unsigned long long)errors);
	printf("verify_errors %llu\n", (unsigned long long)bad);
	printf("reconnects %llu\n", (unsigned long long)sum.reconnects);
	printf("ddgst_errors %llu\n", (unsigned long long)sum.ddgst_errors);
	printf("hdgst_errors %llu\n", (unsigned long long)sum.hdgst_errors);
	printf("placed_bytes %llu\n", (unsigned long long)sum.placed);
	printf("staged_bytes %llu\n", (unsigned long long)sum.staged);
	return errors || bad || down || !ios ? 1 : 0;
}

_Noreturn static void out_of_memory(void)
{
	fprintf(stderr, "usmc nvme perf: out of memory\n");
	exit(1);
}

int cmd_nvme_perf(int argc, char **argv)
{
	struct perf p = {0};
	struct nvme_host *h;
	struct job *jobs;
	uint64_t blocks, t0;
	const struct nvme_host_info *info;
	int st, rc;

	parse(&p, argc, argv);
	h = host_connect(&p.a);
	info = nvme_host_info(h);
	st = nvme_ns_geometry(h, p.a.nsid, &blocks, &p.shift);
	if (st) {
		fprintf(stderr, "usmc nvme perf: namespace %u: %s\n", p.a.nsid,
			st < 0 ? "the admin queue failed" : nvme_status_str((uint16_t)st));
		return 1;
	}
	if (p.io % (1u << p.shift) || (info->max_xfer && p.io > info->max_xfer) ||
	    p.io >> p.shift > 65536) {
		fprintf(stderr, "usmc nvme perf: %u bytes is no whole number of %u-byte blocks the "
				"controller takes in one command (at most %u bytes)\n",
			p.io, 1u << p.shift, info->max_xfer);
		return 2;
	}
	if (!p.span || p.span > blocks << p.shift)
		p.span = blocks << p.shift;
	if (p.span / p.io < p.jobs) {
		fprintf(stderr, "usmc nvme perf: the span holds fewer I/Os than there are jobs\n");
		return 2;
	}
	if (p.qd > info->queue_size - 1)
		p.qd = info->queue_size - 1;
	if (info->nr_io_queues < p.jobs) {
		fprintf(stderr, "usmc nvme perf: the controller gave %u I/O queues for %u jobs\n",
			info->nr_io_queues, p.jobs);
		return 1;
	}
	jobs = calloc(p.jobs, sizeof(*jobs));
	if (!jobs)
		out_of_memory();
	for (unsigned k = 0; k < p.jobs; k++) {
		struct job *j = &jobs[k];
		uint64_t slice = p.span / p.io / p.jobs * p.io;

		j->p = &p;
		j->q = nvme_host_ioq(h, k);
		j->rng = pattern_mix(p.seed + k + (uint64_t)now_ns());
		j->lo = j->next = k * slice;
		j->hi = j->lo + slice;
		j->slots = calloc(p.qd, sizeof(*j->slots));
		if (!j->slots)
			out_of_memory();
		for (unsigned i = 0; i < p.qd; i++) {
			struct slot *s = &j->slots[i];

			s->j = j;
			s->buf = aligned_alloc(4096, (p.io + 4095) & ~4095u);
			if (!s->buf)
				out_of_memory();
			memset(s->buf, 0, p.io);
			s->iov.iov_base = s->buf;
			s->iov.iov_len = p.io;
		}
	}
	t0 = now_ns();
	for (unsigned k = 0; k < p.jobs; k++)
		pthread_create(&jobs[k].th, NULL, job_main, &jobs[k]);
	for (unsigned k = 0; k < p.jobs; k++)
		pthread_join(jobs[k].th, NULL);
	rc = report(&p, jobs, (double)(now_ns() - t0) / 1e9);
	nvme_host_disconnect(h);
	for (unsigned k = 0; k < p.jobs; k++) {
		for (unsigned i = 0; i < p.qd; i++)
			free(jobs[k].slots[i].buf);
		free(jobs[k].slots);
	}
	free(jobs);
	return rc;
}
