/* The run directory is removed, or made unwritable, while accelerated connections exist.
 * Those connections carry on through shared memory; every new connection carries its bytes
 * exactly, accelerated or fallen back with a reason counted (in the counters' mapping,
 * which outlives a removed file); a new listener still listens, and connections to it fall
 * back.
 *
 * usage: rundir_lost removed|unwritable
 *   removed     the directory and everything in it is deleted
 *   unwritable  its mode becomes 0500 (a process running as root drops CAP_DAC_OVERRIDE
 *               first, so that the mode binds it too); it is given back 0700 at the end */
#include "faults.h"

#include <linux/capability.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ROUND 100000u
enum { A_SEED = 1, NEW_SEED = 2 };

static void drop_dac_override(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];

    if (syscall(SYS_capget, &h, d) < 0)
        FAIL("capget: %s", fl_errname(errno));
    d[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
    if (syscall(SYS_capset, &h, d) < 0)
        FAIL("capset: %s", fl_errname(errno));
}

static void lose_rundir(bool removed)
{
    if (removed) {
        fl_remove_tree(fl_rundir());
        return;
    }
    if (chmod(fl_rundir(), 0500) < 0)
        FAIL("chmod: %s", fl_errname(errno));
    char probe[4200];
    snprintf(probe, sizeof(probe), "%s/probe", fl_rundir());
    if (mkdir(probe, 0700) == 0 || errno != EACCES)
        FAIL("the run directory is still writable (%s)", fl_errname(errno));
}

/* The existing connection A: a round both ways, through its segment. */
static void round_on_a(int fd, uint64_t *off)
{
    struct fl_arena a;

    fl_send_stream(fd, false, *off, ROUND, A_SEED);
    fl_recv_stream(fd, false, *off, ROUND, A_SEED);
    *off += ROUND;
    fl_arena_find(&a);
    fl_seg_of(&a, fd, *off, *off);
}

/* A new connection with an exact echo; returns whether it was accelerated, and fails
 * unless it was either that or counted as a fallback. */
static bool new_connection(uint16_t port, const char *what)
{
    struct fl_tally t;

    fl_tally(&t);
    int fd = fl_connect(port);
    fl_send_stream(fd, false, 0, ROUND, NEW_SEED);
    fl_recv_stream(fd, false, 0, ROUND, NEW_SEED);
    CHECK(close(fd) == 0);
    const char *how = fl_outcome(&t);
    printf("%s: exact, %s\n", what, how);
    if (!strcmp(how, "nothing"))
        FAIL("%s: counted neither as accelerated nor as a fallback", what);
    return !strcmp(how, "accelerated");
}

/* An echo server listening from the moment it is told to. */
static pid_t echo_server(struct fl_chan *ch)
{
    fl_chan_init(ch);
    pid_t pid = fl_fork();
    if (pid == 0) {
        uint16_t port;
        fl_chan_side(ch, 1);
        fl_wait(ch);
        int l = fl_listen(&port);
        fl_post(ch, port);
        fl_echo_server(l);
    }
    fl_chan_side(ch, 0);
    return pid;
}

int main(int argc, char **argv)
{
    struct fl_chan ch1, ch2;
    uint64_t off = 0;
    bool removed;

    fl_start(50);
    if (argc != 2 || (strcmp(argv[1], "removed") && strcmp(argv[1], "unwritable"))) {
        fprintf(stderr, "usage: rundir_lost removed|unwritable\n");
        return 2;
    }
    removed = !strcmp(argv[1], "removed");
    if (!removed && geteuid() == 0)
        drop_dac_override();
    pid_t before = echo_server(&ch1), after = echo_server(&ch2);
    fl_post(&ch1, 1);
    uint16_t port = (uint16_t)fl_wait(&ch1);

    int a = fl_connect(port);
    round_on_a(a, &off);
    lose_rundir(removed);
    fl_post(&ch2, 1);
    uint16_t port2 = (uint16_t)fl_wait(&ch2);

    round_on_a(a, &off);
    new_connection(port, "new connection to the old listener");
    if (new_connection(port2, "connection to a listener made afterwards"))
        FAIL("a listener made after the loss was accelerated");
    round_on_a(a, &off);
    CHECK(close(a) == 0);

    kill(before, SIGKILL);
    kill(after, SIGKILL);
    fl_reap(before);
    fl_reap(after);
    if (!removed && chmod(fl_rundir(), 0700) < 0)
        FAIL("chmod back: %s", fl_errname(errno));
    printf("%s: the existing connection carried on, new ones were exact\n", argv[1]);
    return 0;
}
