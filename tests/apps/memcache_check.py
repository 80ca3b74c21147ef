"""Memcached text protocol over 8 connections at once: each thread stores 1 500 values of
random sizes and bytes, reads back its neighbour's with multi-key gets, and checks every
byte. Usage: memcache_check.py PORT. Prints one summary line; exits 1 on any mismatch."""
import os
import random
import socket
import sys
import threading

PORT = int(sys.argv[1])
THREADS, KEYS = 8, 1500


def recv_until(sock, buf, marker):
    while marker not in buf:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise EOFError('server closed the connection')
        buf += chunk
    return buf


def values_of(t):
    rnd = random.Random(t)
    return {f't{t}-k{i}': rnd.randbytes(rnd.randint(1, 8000)) for i in range(KEYS)}


def worker(t, results):
    sock = socket.create_connection(('127.0.0.1', PORT))
    mine = values_of(t)
    buf = b''
    for key, value in mine.items():
        sock.sendall(b'set %s 0 0 %d\r\n%s\r\n' % (key.encode(), len(value), value))
        buf = recv_until(sock, buf, b'\r\n')
        line, buf = buf.split(b'\r\n', 1)
        if line != b'STORED':
            results[t] = f'set {key}: {line!r}'
            return
    barrier.wait()
    theirs = values_of((t + 1) % THREADS)
    keys = list(theirs)
    for i in range(0, len(keys), 50):
        batch = keys[i:i + 50]
        sock.sendall(b'get ' + ' '.join(batch).encode() + b'\r\n')
        got = {}
        while True:
            buf = recv_until(sock, buf, b'\r\n')
            line, rest = buf.split(b'\r\n', 1)
            if line == b'END':
                buf = rest
                break
            _, key, _, size = line.split()
            size = int(size)
            while len(rest) < size + 2:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    raise EOFError('server closed the connection')
                rest += chunk
            got[key.decode()] = rest[:size]
            buf = rest[size + 2:]
        for key in batch:
            if got.get(key) != theirs[key]:
                results[t] = f'get {key}: wrong value'
                return
    sock.close()
    results[t] = 'ok'


barrier = threading.Barrier(THREADS)
results = [None] * THREADS
threads = [threading.Thread(target=worker, args=(t, results)) for t in range(THREADS)]
for th in threads:
    th.start()
for th in threads:
    th.join()
bad = [r for r in results if r != 'ok']
print(f'{THREADS} connections, {THREADS * KEYS} values checked: '
      f'{"all right" if not bad else "; ".join(map(str, bad))}')
sys.exit(1 if bad else 0)
