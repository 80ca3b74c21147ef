/* A client's proposal that the server never matches (its connection waits in a backlog
 * nobody accepts from) ends in a fallback on the client's side and, once it is stale, a
 * drop on the server's. The server must then give the segment back: the client's next
 * connections to the same process reuse it instead of keeping it aside for good (its
 * arena space, and the pages its pending bytes touched).
 *
 * usage: abandoned_segment      (run with USMC_HANDSHAKE_TIMEOUT_MS small) */
#include "faults.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define TRIES 200

int main(void)
{
    struct fl_chan ch;
    char c;

    fl_start(50);
    fl_chan_init(&ch);
    pid_t s = fl_fork();
    if (s == 0) {
        uint16_t never, served;
        fl_chan_side(&ch, 1);
        int l1 = fl_listen(&never), l2 = fl_listen(&served);
        (void)l1; /* never accepted from */
        fl_post(&ch, never);
        fl_post(&ch, served);
        fl_echo_server(l2);
    }
    fl_chan_side(&ch, 0);
    uint16_t never = (uint16_t)fl_wait(&ch), served = (uint16_t)fl_wait(&ch);

    /* Proposed, never attached: after the handshake timeout its bytes go on TCP. */
    int a = fl_connect(never);
    fl_send_stream(a, false, 0, 1000, 1);
    const char *t = getenv("USMC_HANDSHAKE_TIMEOUT_MS");
    fl_sleep_ms((unsigned)(t ? atoi(t) : 10000) + 100);
    CHECK(recv(a, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN);
    CHECK(close(a) == 0);

    /* Each accept on the other listener sweeps stale proposals; the segment the first
     * connection used (at the start of the arena) must come back. */
    for (int i = 0; i < TRIES; i++) {
        struct fl_arena ar;
        int b = fl_connect(served);
        fl_send_stream(b, false, 0, 100, 2);
        fl_recv_stream(b, false, 0, 100, 2);
        fl_arena_find(&ar);
        size_t off = (size_t)((unsigned char *)fl_seg_of(&ar, b, 100, 100) - ar.base);
        CHECK(shutdown(b, SHUT_WR) == 0);
        fl_expect_eof(b, false);
        CHECK(close(b) == 0);
        if (off == 0) {
            printf("the abandoned segment was given back and reused\n");
            kill(s, SIGKILL);
            fl_reap(s);
            return 0;
        }
        fl_sleep_ms(20);
    }
    FAIL("the abandoned segment stayed aside through %d connections", TRIES);
}
