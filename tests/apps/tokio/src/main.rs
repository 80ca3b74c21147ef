//! An echo server and its clients on tokio's multi-threaded runtime, which registers every
//! socket through a copy of its epoll descriptor and waits on the original.
//!
//!   tokio-echo serve PORT
//!   tokio-echo clients PORT CONNECTIONS BYTES    (prints "echoes: N of N right")

use std::env;
use std::process::exit;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn pattern(conn: usize, off: usize) -> u8 {
    ((conn * 131 + off * 7 + off / 251) % 256) as u8
}

async fn serve(port: u16) {
    let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    loop {
        let (mut sock, _) = listener.accept().await.expect("accept");
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            loop {
                let n = match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                if sock.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// One connection: writes `bytes` of its pattern while reading the echo back, checks it.
async fn client(port: u16, conn: usize, bytes: usize) -> bool {
    let sock = match TcpStream::connect(("127.0.0.1", port)).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("connect: {e}");
            return false;
        }
    };
    let (mut rd, mut wr) = sock.into_split();
    let writer = tokio::spawn(async move {
        let mut off = 0;
        let mut chunk = vec![0u8; 16384];
        while off < bytes {
            let n = chunk.len().min(bytes - off);
            for (i, b) in chunk[..n].iter_mut().enumerate() {
                *b = pattern(conn, off + i);
            }
            if wr.write_all(&chunk[..n]).await.is_err() {
                return false;
            }
            off += n;
        }
        wr.shutdown().await.is_ok()
    });
    let mut got = 0;
    let mut buf = vec![0u8; 65536];
    let mut right = true;
    loop {
        match rd.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => {
                right &= buf[..n].iter().enumerate().all(|(i, &b)| b == pattern(conn, got + i));
                got += n;
            }
            Err(e) => {
                eprintln!("read: {e}");
                return false;
            }
        }
    }
    writer.await.unwrap_or(false) && right && got == bytes
}

fn main() {
    let args: Vec<String> = env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    match args.get(1).map(String::as_str) {
        Some("serve") if args.len() == 3 => rt.block_on(serve(args[2].parse().expect("port"))),
        Some("clients") if args.len() == 5 => {
            let port: u16 = args[2].parse().expect("port");
            let conns: usize = args[3].parse().expect("connections");
            let bytes: usize = args[4].parse().expect("bytes");
            let right = rt.block_on(async move {
                let tasks: Vec<_> =
                    (0..conns).map(|c| tokio::spawn(client(port, c, bytes))).collect();
                let mut right = 0;
                for t in tasks {
                    if t.await.unwrap_or(false) {
                        right += 1;
                    }
                }
                right
            });
            println!("echoes: {right} of {conns} right");
            exit(if right == conns { 0 } else { 1 });
        }
        _ => {
            eprintln!("usage: tokio-echo serve PORT | clients PORT CONNECTIONS BYTES");
            exit(2);
        }
    }
}
