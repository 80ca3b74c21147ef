"""A gRPC server and its clients (Debian's grpcio, whose poller threads wait in epoll while
other threads add connections): unary and streaming echoes over several channels at once,
each payload checked.

  grpc_echo.py serve PORT
  grpc_echo.py clients PORT CHANNELS CALLS   (prints "calls: N of N right")
"""
import hashlib
import sys
import threading
from concurrent import futures

import grpc

IDENT = lambda b: b


def payload(channel, call):
    seed = f"{channel}:{call}".encode()
    return hashlib.sha256(seed).digest() * (1 + (channel * 37 + call) % 400)


def echo(request, context):
    return request


def echo_stream(requests, context):
    for request in requests:
        yield request


def serve(port):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(echo, IDENT, IDENT),
        "EchoStream": grpc.stream_stream_rpc_method_handler(echo_stream, IDENT, IDENT),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Echo", handlers),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


def run_channel(port, channel, calls, results):
    right = 0
    # A channel of its own per thread: each is a connection made while other threads' pollers
    # wait in the completion queue's epoll set.
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
        unary = ch.unary_unary("/test.Echo/Echo", IDENT, IDENT)
        stream = ch.stream_stream("/test.Echo/EchoStream", IDENT, IDENT)
        for call in range(calls):
            data = payload(channel, call)
            if unary(data, timeout=30) == data:
                right += 1
        sent = [payload(channel, calls + i) for i in range(20)]
        if list(stream(iter(sent), timeout=30)) == sent:
            right += 1
    results[channel] = right


def clients(port, channels, calls):
    results = [0] * channels
    threads = [threading.Thread(target=run_channel, args=(port, c, calls, results))
               for c in range(channels)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = channels * (calls + 1)
    right = sum(results)
    print(f"calls: {right} of {total} right")
    return 0 if right == total else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    elif len(sys.argv) == 5 and sys.argv[1] == "clients":
        sys.exit(clients(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
    else:
        sys.exit(__doc__)
