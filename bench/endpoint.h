/* Endpoints of the benchmark programs: "tcp:HOST:PORT" or "unix:PATH", so that one client and
 * one server measure TCP and Unix domain sockets with the same code. */
#ifndef BENCH_ENDPOINT_H
#define BENCH_ENDPOINT_H

#include <stddef.h>

/* A listening socket on the endpoint; exits with a message on failure. */
int endpoint_listen(const char *spec);
/* Accepts connections one after the other for ever, handing each to handle, which closes it. */
void endpoint_serve(const char *spec, void (*handle)(int fd));
/* A connected socket (TCP_NODELAY on TCP); -1 with errno on failure. */
int endpoint_connect(const char *spec);

/* Whole-buffer transfers: 0 when done, -1 on error or end of stream. */
int write_all(int fd, const void *buf, size_t len);
int read_all(int fd, void *buf, size_t len);

#endif
