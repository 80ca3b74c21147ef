/* An attacker holding a TCP connection of its own proposes a segment for it while a victim
 * without usmc connects to the same accelerated echo server. The proposal names the
 * attacker's socket, so it can only bind the connection that socket is: the victim's
 * connection must stay plain TCP and byte-exact, and the forged segment must stay pending
 * (the server never attached it).
 *
 * usage: forged_proposal own_socket|netns_twin
 *   own_socket  the attacker's socket is connected to the server from its own port
 *   netns_twin  the attacker's socket lives in a network namespace of its own, where it has
 *               exactly the victim's 4-tuple (same addresses, same ports): the socket still
 *               is not the victim's connection */
#include "faults.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define RING 4096u

/* The attacker's socket: connected to the server (and accepted there already, as a plain
 * connection, so that no proposal can bind it any more), or to a listener on the server's
 * port in a fresh network namespace from the victim's port. */
struct attack {
    const struct fl_forge *f;
    bool twin;
    uint16_t server_port, victim_port;
};

static void propose(void *arg)
{
    const struct attack *at = arg;
    int a;

    if (at->twin) {
        a = fl_netns_twin(at->server_port, at->victim_port);
    } else {
        a = fl_raw_connect(fl_raw_socket(), at->server_port, 0);
        fl_send_stream(a, true, 0, 100, 4);
        fl_recv_stream(a, true, 0, 100, 4);
    }
    fl_forge_send(at->f, a);
}

int main(int argc, char **argv)
{
    struct fl_chan srv;
    struct fl_actor attacker;
    struct fl_forge f;
    char ctl[4400];
    bool twin;

    fl_start(50);
    if (argc != 2 || (strcmp(argv[1], "own_socket") && strcmp(argv[1], "netns_twin"))) {
        fprintf(stderr, "usage: forged_proposal own_socket|netns_twin\n");
        return 2;
    }
    twin = !strcmp(argv[1], "netns_twin");
    fl_chan_init(&srv);
    pid_t server = fl_fork();
    if (server == 0) {
        uint16_t port;
        fl_chan_side(&srv, 1);
        int l = fl_listen(&port);
        fl_post(&srv, port);
        fl_echo_server(l);
    }
    fl_chan_side(&srv, 0);
    uint16_t port = (uint16_t)fl_wait(&srv);
    uint16_t victim_port = fl_free_port();
    fl_ctl_path(server, ctl, sizeof(ctl));
    /* Made here so that the forged segment stays visible to this process. */
    fl_forge_init(&f, ctl, 1 << 20, 0, RING, 1);

    struct attack at = {&f, twin, port, victim_port};
    fl_actor_start(&attacker, propose, &at); /* the proposal is queued at the server */

    int v = fl_raw_connect(fl_raw_socket(), port, victim_port);
    fl_send_stream(v, true, 0, 100000, 5);
    if (!fl_readable(v, 10000))
        FAIL("no echo for the victim within 10 s");
    fl_forge_expect_pending(&f, "once the victim's echo came");
    fl_recv_stream(v, true, 0, 100000, 5);
    fl_forge_expect_pending(&f, "once the victim's stream came back");
    CHECK(shutdown(v, SHUT_WR) == 0);
    fl_expect_readable(v, 10000, "the victim's EOF");
    fl_expect_eof(v, true);
    close(v);

    fl_actor_end(&attacker);
    if (!fl_alive(server))
        FAIL("the server died");
    fl_probe_accelerated(port, 5000);
    kill(server, SIGKILL);
    fl_reap(server);
    printf("%s: the victim stayed plain and exact, the forged segment pending\n", argv[1]);
    return 0;
}
