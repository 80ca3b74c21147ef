#!/usr/bin/env bash
# memcached with 4 worker threads: 8 client connections at once store values of random
# sizes and bytes, then each reads its neighbour's back with multi-key gets, byte for byte.
. "$(dirname "$0")/lib.sh"
app_begin memcached
need memcached python3

port=$(pick_port)
serve memcached "$port" acc memcached -u root -t 4 -l 127.0.0.1 -p "$port" -U 0 -m 256

out=$WORK/check.log
client acc python3 "$(dirname "$0")/memcache_check.py" "$port" >"$out" 2>&1 ||
    { cat "$out"; fail "the memcached check failed"; }
cat "$out"
grep -q 'values checked: all right$' "$out" || fail "values came back wrong"

# 12 000 values of 4 000 bytes on average went in and came out.
expect_accelerated $((12000 * 4000 * 2 / 2))
stop memcached
log "memcached: ok"
