/* Users are the trust boundary, and the run directory's permissions draw it.
 *
 * usage: other_user nobody|squatted|worker     (as root; otherwise it exits 77: skipped)
 *   nobody    while root's processes hold an accelerated connection, a fresh program runs
 *             as nobody, under usmc, with the same USMC_RUNDIR. It can neither list, read
 *             nor write the run directory (mode 0700), nor reach a control socket, nor
 *             reach the connection's arena through /proc (fd, map_files, mem),
 *             process_vm_readv or pidfd_getfd. Its own library cannot register or
 *             attach: its listener and its connections are plain TCP, and exact.
 *   squatted  nobody made the run directory first, world-writable (as anyone can under
 *             /tmp): root's library must not use it (nobody could replace a listener's
 *             entry and receive root's sockets): root's connections fall back, exact,
 *             and nothing of root's appears in it.
 *   worker    a prefork server: root listens, then forks a worker that becomes nobody
 *             before its first connection, as nginx's do. Nobody can no longer create
 *             anything in the run directory, yet the worker's connections are accelerated,
 *             run.sh requires the worker's side to have counted them, and the worker
 *             publishes its sockets for `usmc ss` (its table was made at the fork). */
#include "faults.h"

#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <dirent.h>
#include <unistd.h>

#define NOBODY 65534
#define ROUND 10000u
#define SKIP 77

static char self[4096];

static void become_nobody(void)
{
    if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
        setresuid(NOBODY, NOBODY, NOBODY) < 0)
        FAIL("becoming nobody: %s", fl_errname(errno));
}

/* Runs this program again (a fresh process image, library and all), as nobody or not,
 * with its end of the channel kept open and named in args[2]; returns its pid. */
static pid_t exec_stage(struct fl_chan *ch, char **args, bool as_nobody)
{
    char fd[16];

    fl_chan_init(ch);
    pid_t pid = fl_fork();
    if (pid == 0) {
        fl_chan_side(ch, 1);
        if (fcntl(ch->fd[1], F_SETFD, 0) < 0)
            FAIL("fcntl: %s", fl_errname(errno));
        snprintf(fd, sizeof(fd), "%d", ch->fd[1]);
        args[2] = fd;
        if (as_nobody)
            become_nobody();
        execv(self, args);
        FAIL("exec %s: %s", self, fl_errname(errno));
    }
    fl_chan_side(ch, 0);
    return pid;
}

static void chan_of(struct fl_chan *ch, const char *fd)
{
    ch->fd[1] = atoi(fd);
    ch->fd[0] = -1;
    ch->side = 1;
}

static void round_trip(int fd, unsigned seed)
{
    fl_send_stream(fd, false, 0, ROUND, seed);
    fl_recv_stream(fd, false, 0, ROUND, seed);
}

static int arenas_mapped(void)
{
    struct fl_footprint f;

    fl_footprint(getpid(), &f);
    return f.arenas;
}

/* expr must fail with EACCES or EPERM (which one depends on the path the kernel takes). */
#define DENIED(what, expr)                                                                  \
    do {                                                                                    \
        long r_ = (long)(expr);                                                             \
        if (r_ >= 0 || (errno != EACCES && errno != EPERM))                                 \
            FAIL("%s: got %ld %s, expected EACCES or EPERM", what, r_,                      \
                 r_ < 0 ? fl_errname(errno) : "");                                          \
        printf("nobody: %s: %s\n", what, fl_errname(errno));                               \
    } while (0)

static int unix_connect(const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    int r = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

/* The stage that runs as nobody. args: CHAN VICTIM_PID PORT MAP_FILE ARENA_FD CTL ADDR */
static int as_nobody(char **a)
{
    struct fl_chan ch;
    char path[4400], buf[64];
    pid_t victim = atoi(a[1]);
    uint16_t port = (uint16_t)atoi(a[2]), mine;

    chan_of(&ch, a[0]);
    /* Its own listener and connections: the library can register nothing. */
    int l = fl_listen(&mine);
    fl_post(&ch, mine);
    int s = fl_accept(l);
    fl_recv_stream(s, false, 0, ROUND, 3);
    fl_send_stream(s, false, 0, ROUND, 3);
    close(s);
    int c = fl_connect(port);
    round_trip(c, 4);
    close(c);
    if (arenas_mapped())
        FAIL("nobody's library mapped an arena");
    printf("nobody: its listener and its connection are plain and exact\n");

    DENIED("list the run directory", opendir(fl_rundir()) ? 0 : -1);
    snprintf(path, sizeof(path), "%s/ports", fl_rundir());
    DENIED("open the ports file", open(path, O_RDWR));
    snprintf(path, sizeof(path), "%s/l-%u", fl_rundir(), port);
    DENIED("read a listener's entry", readlink(path, buf, sizeof(buf)));
    snprintf(path, sizeof(path), "%s/l-%u", fl_rundir(), mine);
    DENIED("register a listener", symlink("c-1-0.sock 0 127.0.0.1", path));
    DENIED("connect to the listener's control socket", unix_connect(a[5]));
    snprintf(path, sizeof(path), "/proc/%d/fd/%s", (int)victim, a[4]);
    DENIED("open the arena through /proc/PID/fd", open(path, O_RDWR));
    snprintf(path, sizeof(path), "/proc/%d/map_files/%s", (int)victim, a[3]);
    DENIED("open the arena through /proc/PID/map_files", open(path, O_RDWR));
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)victim);
    DENIED("open /proc/PID/mem", open(path, O_RDONLY));
    struct iovec local = {buf, sizeof(buf)}, remote = {(void *)strtoul(a[6], NULL, 16), 64};
    DENIED("process_vm_readv the arena", syscall(SYS_process_vm_readv, victim, &local, 1UL,
                                                 &remote, 1UL, 0UL));
    int pidfd = (int)syscall(SYS_pidfd_open, victim, 0);
    if (pidfd < 0)
        FAIL("pidfd_open: %s", fl_errname(errno));
    DENIED("pidfd_getfd the arena", syscall(SYS_pidfd_getfd, pidfd, atoi(a[4]), 0));
    fl_post(&ch, 1);
    return 0;
}

/* The descriptor of this process that is its arena. */
static int arena_fd(void)
{
    char link[300], target[256];
    struct dirent *e;
    int fd = -1;
    DIR *d = opendir("/proc/self/fd");

    while (d && (e = readdir(d))) {
        snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n > 0 && (target[n] = 0, strstr(target, "memfd:usmc-arena")))
            fd = atoi(e->d_name);
    }
    if (d)
        closedir(d);
    if (fd < 0)
        FAIL("no arena descriptor");
    return fd;
}

static void nobody(void)
{
    struct fl_chan sch, xch;
    struct fl_arena arena;
    struct stat st;
    char pid[16], port[16], fd[16], ctl[4400], addr[32];

    if (stat(fl_rundir(), &st) < 0 || (st.st_mode & 077))
        FAIL("the run directory is open to others: mode %o", (unsigned)(st.st_mode & 0777));
    fl_chan_init(&sch);
    pid_t s = fl_fork();
    if (s == 0) {
        uint16_t p;
        fl_chan_side(&sch, 1);
        int l = fl_listen(&p);
        fl_post(&sch, p);
        fl_echo_server(l);
    }
    fl_chan_side(&sch, 0);
    uint16_t sport = (uint16_t)fl_wait(&sch);
    int a = fl_connect(sport);
    round_trip(a, 1);
    fl_arena_find(&arena);
    fl_ctl_path(s, ctl, sizeof(ctl));
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    snprintf(port, sizeof(port), "%u", sport);
    snprintf(fd, sizeof(fd), "%d", arena_fd());
    snprintf(addr, sizeof(addr), "%lx", (unsigned long)arena.base);
    char *stage[] = {self, "as_nobody", NULL, pid, port, strrchr(arena.file, '/') + 1,
                     fd, ctl, addr, NULL};
    pid_t x = exec_stage(&xch, stage, true);

    /* Our connection to nobody's listener: plain. */
    struct fl_tally t;
    fl_tally(&t);
    int c = fl_connect((uint16_t)fl_wait(&xch));
    round_trip(c, 3);
    close(c);
    if (strcmp(fl_outcome(&t), "peer_not_usmc"))
        FAIL("the connection to nobody's listener: %s", fl_outcome(&t));
    fl_wait(&xch);
    if (fl_reap(x) != 0)
        FAIL("the stage as nobody failed");
    fl_send_stream(a, false, ROUND, ROUND, 1);
    fl_recv_stream(a, false, ROUND, ROUND, 1);
    fl_seg_of(&arena, a, 2 * ROUND, 2 * ROUND);
    close(a);
    kill(s, SIGKILL);
    fl_reap(s);
    printf("root's connection went on untouched\n");
}

/* The stage that runs as root with the squatted directory as its USMC_RUNDIR. */
static int squat_victim(char **a)
{
    struct fl_chan ch, sch;

    chan_of(&ch, a[0]);
    fl_chan_init(&sch);
    pid_t s = fl_fork();
    if (s == 0) {
        uint16_t p;
        fl_chan_side(&sch, 1);
        int l = fl_listen(&p);
        fl_post(&sch, p);
        fl_echo_server(l);
    }
    fl_chan_side(&sch, 0);
    int c = fl_connect((uint16_t)fl_wait(&sch));
    round_trip(c, 5);
    close(c);
    if (arenas_mapped())
        FAIL("root's library accelerated through a run directory nobody controls");
    kill(s, SIGKILL);
    fl_reap(s);
    fl_post(&ch, 1);
    return 0;
}

static void squatted(void)
{
    char dir[] = "/tmp/usmc-squat.XXXXXX", *old = getenv("USMC_RUNDIR");
    struct fl_chan ch;
    struct dirent *e;
    int left = 0;

    if (!mkdtemp(dir) || chown(dir, NOBODY, NOBODY) < 0 || chmod(dir, 0777) < 0)
        FAIL("%s: %s", dir, fl_errname(errno));
    char *stage[] = {self, "squat_victim", NULL, NULL};
    old = old ? strdup(old) : NULL;
    setenv("USMC_RUNDIR", dir, 1);
    pid_t y = exec_stage(&ch, stage, false);
    setenv("USMC_RUNDIR", old ? old : "", 1);
    free(old);
    int st = fl_reap(y);
    DIR *d = opendir(dir);
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            printf("root's library left %s in the squatted directory\n", e->d_name);
            left++;
        }
    if (d)
        closedir(d);
    fl_remove_tree(dir);
    if (st != 0)
        FAIL("the stage in the squatted directory failed");
    if (left)
        FAIL("root's library used a run directory nobody controls");
    printf("squatted: root's connection fell back, exact, and left nothing there\n");
}

static void worker(void)
{
    struct fl_chan ch, wch;

    fl_chan_init(&ch);
    pid_t master = fl_fork();
    if (master == 0) {
        uint16_t port;
        fl_chan_side(&ch, 1);
        int l = fl_listen(&port);
        fl_chan_init(&wch);
        pid_t w = fl_fork();
        if (w == 0) {
            fl_chan_side(&wch, 1);
            become_nobody();
            fl_post(&wch, 1);
            fl_echo_server(l);
        }
        fl_chan_side(&wch, 0);
        fl_wait(&wch);
        fl_post(&ch, port);
        fl_post(&ch, (uint64_t)w);
        /* The master keeps its listener and accepts nothing, until the test is over. */
        fl_wait(&ch);
        kill(w, SIGKILL);
        fl_reap(w);
        _exit(0);
    }
    fl_chan_side(&ch, 0);
    uint16_t port = (uint16_t)fl_wait(&ch);
    pid_t w = (pid_t)fl_wait(&ch);
    fl_probe_accelerated(port, 3 * ROUND);
    char dir[4200], prefix[32];
    snprintf(dir, sizeof(dir), "%s/socks", fl_rundir());
    snprintf(prefix, sizeof(prefix), "%d-", (int)w);
    DIR *d = opendir(dir);
    struct dirent *e;
    bool table = false;
    while (d && (e = readdir(d)))
        table |= !strncmp(e->d_name, prefix, strlen(prefix));
    if (d)
        closedir(d);
    if (!table)
        FAIL("the worker running as nobody has no socket table in %s", dir);
    fl_post(&ch, 1);
    if (fl_reap(master) != 0)
        FAIL("the master failed");
    printf("worker: the connection to the worker running as nobody was accelerated\n");
}

int main(int argc, char **argv)
{
    fl_start(50);
    if (argc >= 3 && !strcmp(argv[1], "as_nobody"))
        return as_nobody(argv + 2);
    if (argc >= 3 && !strcmp(argv[1], "squat_victim"))
        return squat_victim(argv + 2);
    if (argc != 2 ||
        (strcmp(argv[1], "nobody") && strcmp(argv[1], "squatted") && strcmp(argv[1], "worker"))) {
        fprintf(stderr, "usage: other_user nobody|squatted|worker\n");
        return 2;
    }
    if (geteuid() != 0) {
        printf("needs root to run a process as another user: skipped\n");
        return SKIP;
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        FAIL("/proc/self/exe: %s", fl_errname(errno));
    self[n] = 0;
    if (!strcmp(argv[1], "nobody"))
        nobody();
    else if (!strcmp(argv[1], "squatted"))
        squatted();
    else
        worker();
    return 0;
}
