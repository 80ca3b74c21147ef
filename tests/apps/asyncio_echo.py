"""An asyncio echo server and 50 concurrent clients in one interpreter, each sending
200 000 random bytes and checking the echo, then two subprocesses run from the event
loop (Python starts them with vfork and exec). Prints one line per check."""
import asyncio
import os
import sys


async def handle(reader, writer):
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


async def client(port):
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    data = os.urandom(200000)
    writer.write(data)
    await writer.drain()
    got = bytearray()
    while len(got) < len(data):
        chunk = await reader.read(65536)
        if not chunk:
            break
        got += chunk
    writer.close()
    return bytes(got) == data


async def main():
    server = await asyncio.start_server(handle, '127.0.0.1', 0)
    port = server.sockets[0].getsockname()[1]
    results = await asyncio.gather(*(client(port) for _ in range(50)))
    print(f'echoes: {sum(results)} of {len(results)} right')
    for word in ('one', 'two'):
        proc = await asyncio.create_subprocess_exec('echo', word, stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        print(f'subprocess: {out.decode().strip()}')
    server.close()
    await server.wait_closed()
    return all(results)


sys.exit(0 if asyncio.run(main()) else 1)
