#!/usr/bin/env bash
# redis: redis-benchmark SET/GET with 200 connections, then binary values round-tripped by redis-cli.
. "$(dirname "$0")/lib.sh"
app_begin redis
need redis-server redis-benchmark redis-cli

port=$(pick_port)
start_redis redis 127.0.0.1 "$port" acc

requests=100000 size=1024
out=$WORK/benchmark.log
client acc redis-benchmark -q -t set,get -n "$requests" -c 200 -d "$size" -p "$port" >"$out" 2>&1 ||
    { cat "$out"; fail "redis-benchmark exited with an error"; }
# -q redraws a progress line with carriage returns; the final line per test carries the rate.
tr '\r' '\n' <"$out" | grep -E '^(SET|GET): [0-9.]+ requests per second' >"$WORK/rates" || true
cat "$WORK/rates"
for test in SET GET; do
    grep -qE "^$test: [0-9]*[1-9][0-9.]* requests per second" "$WORK/rates" ||
        { cat "$out"; fail "redis-benchmark reported no $test rate"; }
done
if grep -qiE 'error|refused' "$out"; then
    cat "$out"
    fail "redis-benchmark reported errors"
fi

redis_roundtrip acc 127.0.0.1 "$port" blob1k 1024
redis_roundtrip acc 127.0.0.1 "$port" blob1m $((1024 * 1024))

# SET payloads reach the server and GET replies reach the clients: at least this much was received.
expect_accelerated $((2 * requests * size + 2 * (1024 + 1024 * 1024)))
stop redis
log "redis: ok"
