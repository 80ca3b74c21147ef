"""Both ends of the doorbell scenario's connection.

  echo.py serve ADDR PORT          accepts one connection and echoes it, sleeping in recv
  echo.py talk ADDR PORT ROUNDS S  sends ROUNDS messages, each after S seconds of quiet (the
                                   server sleeps meanwhile), checking every echo; prints "ok"
  echo.py idle ADDR PORT PID S     one exchange, then counts the context switches of PID while
                                   the connection is idle for S seconds; prints the count
"""
import socket
import sys
import time


def switches(pid):
    total = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if "ctxt_switches" in line:
                total += int(line.split()[1])
    return total


def exchange(c, payload):
    c.sendall(payload)
    got = b""
    while len(got) < len(payload):
        d = c.recv(len(payload) - len(got))
        assert d, "the server hung up"
        got += d
    assert got == payload, f"echo {got!r} for {payload!r}"


mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "serve":
    lsn = socket.socket()
    lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsn.bind((addr, port))
    lsn.listen()
    print("listening", flush=True)
    while True:
        conn, _ = lsn.accept()
        while True:
            data = conn.recv(65536)
            if not data:
                break
            conn.sendall(data)
        conn.close()
conn = socket.create_connection((addr, port))
if mode == "talk":
    for i in range(int(sys.argv[4])):
        time.sleep(float(sys.argv[5]))
        exchange(conn, b"round %d " % i * 50)
    print("ok")
elif mode == "idle":
    exchange(conn, b"first")
    time.sleep(0.5)
    before = switches(sys.argv[4])
    time.sleep(float(sys.argv[5]))
    print(switches(sys.argv[4]) - before)
    exchange(conn, b"last")
