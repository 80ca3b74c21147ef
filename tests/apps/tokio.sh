#!/usr/bin/env bash
# tokio: an echo server and 20 concurrent clients on tokio's multi-threaded runtime (built from
# tests/apps/tokio with cargo), 2 MB each way per connection. Tokio registers every socket
# through a copy of its epoll descriptor and waits on the original.
. "$(dirname "$0")/lib.sh"
app_begin tokio
command -v cargo >/dev/null || skip "cargo is not installed (rustup or Debian's cargo)"

target=$USMC_BUILD/tokio
CARGO_TARGET_DIR=$target cargo build --release --locked -q --manifest-path "$APPS_DIR/tokio/Cargo.toml" ||
    fail "building the tokio program failed"
prog=$target/release/tokio-echo
port=$(pick_port)
conns=20 bytes=2000000

serve echo "$port" acc "$prog" serve "$port"
out=$WORK/tokio.log
client acc "$prog" clients "$port" $conns $bytes >"$out" 2>&1 || { cat "$out"; fail "the tokio clients failed"; }
cat "$out"
grep -qx "echoes: $conns of $conns right" "$out" || fail "echoes were wrong"
expect_accelerated $((conns * bytes))
log "tokio: ok"
