#!/usr/bin/env bash
# NVMe/TCP on this host: usmc's host (usmc nvme perf, identify, discover) against usmc's target,
# over plain TCP and through shared memory (both ends under `usmc run`, proven by `usmc stats`),
# with and without digests, placing reads or copying them; then bad peers: a host that breaks
# the transport binding, a proxy that spoils one PDU (digests in each direction, a truncated
# PDU, a wrong data offset, an oversized length, an unknown type), and peers killed mid-command.
# Every case ends with the process that met the fault alive and serving.
#
# usage: run.sh [CASE...]   (the case_ functions below; all by default)
# USMC_BUILD selects the build (default build). Prints `N passed, N failed` last.
set -uo pipefail

. "$(dirname "$0")/../lib/suite.sh"
. "$root/tests/lib/check.sh"
. "$root/tests/lib/ports.sh"
. "$root/tests/lib/sanitizer.sh"

NVME=$build/bin/usmc-nvme
USMC=$build/bin/usmc
WORK=$(mktemp -d "${TMPDIR:-/tmp}/usmc-nvme-test.XXXXXX") || exit 1
export USMC_RUNDIR=$WORK/rundir
mkdir -m 700 "$USMC_RUNDIR"
pids=()

cleanup() {
    local p
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$out"
if ! cc -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -pthread -o "$out/hostile" \
    "$here/hostile.c" src/nvme/pdu.c src/nvme/digest.c src/util/crc32c.c; then
    echo "0 passed, 1 failed"
    exit 1
fi
HOSTILE=$out/hostile

listening() { [ -n "$(ss -Htln "( sport = :$1 )")" ]; }

# start NAME PORT CMD...: a server in the background, its output in $WORK/NAME.log; waits until
# it listens on PORT.
start() {
    local name=$1 port=$2
    shift 2
    "$@" >"$WORK/$name.log" 2>&1 &
    pids+=($!)
    eval "${name}_pid=$!"
    for _ in $(seq 100); do
        listening "$port" && return 0
        kill -0 "${pids[-1]}" 2>/dev/null || break
        sleep 0.05
    done
    echo "$name did not start: $(tail -n 3 "$WORK/$name.log")"
    return 1
}

# target NAME [--usmc] ARGS...: a target on a port of its own (TPORT, NAME's), memory namespace.
target() {
    local name=$1 pre=()
    shift
    [ "${1-}" = --usmc ] && { pre=("$USMC" run --); shift; }
    TPORT=$(pick_port)
    start "$name" "$TPORT" "${pre[@]}" "$NVME" target --mem 128M -p "$TPORT" --discovery-port 0 "$@"
}

trid() { echo "trtype:tcp traddr:127.0.0.1 trsvcid:$1"; }

# perf NAME PORT [--usmc] ARGS...: usmc nvme perf, its output in $WORK/NAME.out, status in rc.
perf() {
    local name=$1 port=$2 pre=()
    shift 2
    [ "${1-}" = --usmc ] && { pre=("$USMC" run --); shift; }
    timeout 120 "${pre[@]}" "$NVME" perf -r "$(trid "$port")" "$@" >"$WORK/$name.out" 2>&1
    rc=$?
}

# value NAME KEY: a `key value` line of a perf output
value() { awk -v k="$2" '$1 == k { print $2 }' "$WORK/$1.out"; }
stat() { "$USMC" stats | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'; }
alive() { timeout 20 "$NVME" identify -r "$(trid "$1")" >/dev/null 2>&1; }

# verified NAME: perf finished cleanly with every I/O checked
verified() {
    [ "$rc" -eq 0 ] && [ "$(value "$1" errors)" = 0 ] && [ "$(value "$1" verify_errors)" = 0 ] &&
        [ "$(value "$1" ios)" -gt 0 ]
}

case_identify_discover() {
    target t1 || return 1
    timeout 20 "$NVME" identify -r "$(trid "$TPORT")" >"$WORK/id.out" 2>&1
    check "identify: the subsystem and its namespace" \
        'grep -q "^subnqn *: nqn.2024-11.io.usmc:nvme" "$WORK/id.out" &&
         grep -q "^ns 1 *: 262144 blocks of 512 bytes" "$WORK/id.out"' "$WORK/id.out"
    "$USMC" nvme discover -r "$(trid "$TPORT")" >"$WORK/disc.out" 2>&1
    check "discover: one record, the subsystem at this port" \
        'grep -q "Number of Records 1" "$WORK/disc.out" && grep -q "^trsvcid *: $TPORT" "$WORK/disc.out" &&
         grep -q "^subnqn *: nqn.2024-11.io.usmc:nvme" "$WORK/disc.out"' "$WORK/disc.out"
    kill "$t1_pid"
}

# write_read NAME PORT [--usmc] ARGS...: 64 MiB written with verification data, read back and
# checked, with ARGS on both.
write_read() {
    local name=$1 port=$2
    shift 2
    perf "$name-w" "$port" "$@" -w write -o 65536 -q 32 --span 64M --once --verify 11 -t 60
    check "$name: 64 MiB written" 'verified "$name-w" && [ "$(value "$name-w" ios)" = 1024 ]' \
        "$WORK/$name-w.out"
    perf "$name-r" "$port" "$@" -w read -o 65536 -q 32 --span 64M --once --verify 11 -t 60
    check "$name: 64 MiB read back, every byte as written" \
        'verified "$name-r" && [ "$(value "$name-r" ios)" = 1024 ]' "$WORK/$name-r.out"
}

case_plain() {
    target t2 || return 1
    write_read plain "$TPORT"
    write_read digests "$TPORT" --digest
    perf copy "$TPORT" --digest --ddp off -w read -o 65536 --span 64M --once --verify 11
    check "reads copied through the staging buffer, digest after: as written" \
        'verified copy && [ "$(value copy placed_bytes)" = 0 ]' "$WORK/copy.out"
    perf aligned "$TPORT" --digest --hpda 3 -w read -o 131072 --span 64M --once --verify 11
    check "data aligned to 16 bytes (HPDA 3): padding skipped, data as written" 'verified aligned' \
        "$WORK/aligned.out"
    perf big "$TPORT" --digest -w write -o 1M -q 8 --span 32M --once --verify 12
    perf big-r "$TPORT" --digest -w read -o 1M -q 8 --span 32M --once --verify 12
    check "1 MiB writes (R2T, eight H2CData PDUs each), read back" 'verified big && verified big-r' \
        "$WORK/big-r.out"
    perf small "$TPORT" -w write -o 4096 -q 64 --span 4M --once --verify 13
    perf small-r "$TPORT" -w read -o 4096 -q 64 --span 4M --once --verify 13
    check "4 KiB writes (in-capsule data), read back" 'verified small && verified small-r' \
        "$WORK/small-r.out"
    perf sqflow "$TPORT" --sqflow -w read -o 65536 --span 4M --once --verify 13
    check "SQ flow control kept: reads complete by their responses" 'verified sqflow' "$WORK/sqflow.out"
    perf rand "$TPORT" -w randread -o 4096 -q 128 --jobs 2 -t 2
    check "random 4 KiB reads, two queues of depth 128" \
        '[ "$rc" -eq 0 ] && [ "$(value rand errors)" = 0 ] && [ "$(value rand ios)" -gt 1000 ]' \
        "$WORK/rand.out"
    # (writes data nobody checks: last)
    perf mix "$TPORT" --digest -w randrw -o 16384 -q 64 -t 1
    check "random reads and writes with digests" '[ "$rc" -eq 0 ] && [ "$(value mix errors)" = 0 ]' \
        "$WORK/mix.out"
    kill "$t2_pid"
}

case_digest_required() {
    target t3 --digest || return 1
    timeout 20 "$NVME" identify -r "$(trid "$TPORT")" >"$WORK/nodgst.out" 2>&1
    local nodgst=$?
    timeout 20 "$NVME" identify --digest -r "$(trid "$TPORT")" >"$WORK/dgst.out" 2>&1
    local dgst=$?
    check "a target requiring digests refuses a host without, with a reason" \
        '[ $nodgst -eq 1 ] && grep -q "fatal error status 6" "$WORK/nodgst.out" && [ $dgst -eq 0 ]' \
        "$WORK/nodgst.out"
    kill "$t3_pid"
}

case_accelerated() {
    "$USMC" stats reset
    target t4 --usmc || return 1
    write_read shm "$TPORT" --usmc --digest
    check "through shared memory: every connection accelerated, the bytes in the rings" \
        '[ "$(stat conn_accelerated)" -ge 8 ] && [ "$(stat conn_fallback)" = 0 ] &&
         [ "$(stat bytes_recv_shm)" -gt $((128 << 20)) ]' "$WORK/shm-r.out"
    check "reads placed straight from the ring, digest fused" \
        'grep -q "placement: ring" "$WORK/shm-r.out" &&
         [ "$(value shm-r placed_bytes)" = $((64 << 20)) ] && [ "$(value shm-r staged_bytes)" = 0 ] &&
         [ "$(stat rx_nvme_tcp_bytes)" -ge $((64 << 20)) ] &&
         [ "$(stat rx_nvme_tcp_setup)" = "$(stat rx_nvme_tcp_teardown)" ] &&
         [ "$(stat rx_nvme_tcp_sk_add)" -ge 2 ] && [ "$(stat rx_nvme_tcp_sk_add)" = "$(stat rx_nvme_tcp_sk_del)" ]' \
        "$WORK/shm-r.out"
    perf shm-rand "$TPORT" --usmc -w randread -o 4096 -q 128 --jobs 2 -t 2
    check "through shared memory: random 4 KiB reads, two queues" \
        '[ "$rc" -eq 0 ] && [ "$(value shm-rand errors)" = 0 ]' "$WORK/shm-rand.out"
    perf shm-plainhost "$TPORT" -w read -o 65536 --span 8M --once --verify 11 --digest
    check "a plain host against the target under usmc: plain TCP, data as written" \
        'verified shm-plainhost && grep -q "placement: readv" "$WORK/shm-plainhost.out"' \
        "$WORK/shm-plainhost.out"
    kill "$t4_pid"
}

case_hostile_host() {
    local c
    target t5 -v || return 1
    for c in bad-pfv before-icreq unknown-type wrong-pdo wrong-hlen oversized-capsule huge-plen \
        bad-hdgst unasked-h2c truncated huge-transfer; do
        timeout 30 "$HOSTILE" host "$TPORT" "$c" >"$WORK/h-$c.out" 2>&1
        local hrc=$?
        check "a host sending $c: the answer due (a termination request and the close, or an error status); the target serves on" \
            '[ $hrc -eq 0 ] && alive "$TPORT"' "$WORK/h-$c.out"
    done
    kill "$t5_pid"
}

case_spoiled() {
    local c args pport
    # start's NAME_pid: the names are identifiers. The digests only where the case spoils one:
    # elsewhere the header digest would catch the fault first.
    for c in c2h-data-digest c2h-header-digest c2h-unknown-type c2h-wrong-pdo c2h-truncated \
        c2h-oversized; do
        case $c in *digest) args=(--digest) ;; *) args=() ;; esac
        target "t_${c//-/_}" || return 1
        perf "w-$c" "$TPORT" -w write -o 65536 --span 16M --once --verify 3
        verified "w-$c" || check "$c: written first" false "$WORK/w-$c.out"
        pport=$(pick_port)
        start "p_${c//-/_}" "$pport" "$HOSTILE" proxy "$pport" "$TPORT" "$c" || return 1
        perf "x-$c" "$pport" "${args[@]}" -w read -o 65536 -q 16 --span 16M --once --verify 3
        check "$c: the read fails as a transport error, the queue connects again, no bad data returned" \
            '[ "$(value "x-$c" verify_errors)" = 0 ] &&
             [ "$(value "x-$c" reconnects)" = 1 ] && [ "$(value "x-$c" errors)" -ge 1 ] &&
             [ "$(value "x-$c" ios)" = 256 ]' "$WORK/x-$c.out"
        case $c in
        c2h-data-digest) check "$c: counted, and only that read failed" \
            '[ "$(value "x-$c" ddgst_errors)" = 1 ] && [ "$(value "x-$c" errors)" -le 16 ] &&
             grep -q "transient transport error" "$WORK/x-$c.out"' "$WORK/x-$c.out" ;;
        c2h-header-digest) check "$c: counted" '[ "$(value "x-$c" hdgst_errors)" = 1 ]' "$WORK/x-$c.out" ;;
        esac
        eval "kill \$p_${c//-/_}_pid \$t_${c//-/_}_pid"
    done
    c=h2c-data-digest
    target t_h2c || return 1
    pport=$(pick_port)
    start p_h2c "$pport" "$HOSTILE" proxy "$pport" "$TPORT" "$c" || return 1
    perf "x-$c" "$pport" --digest -w write -o 1M -q 4 --span 16M --once --verify 0
    check "h2c-data-digest: that write fails (transient transport error), the queue goes on" \
        '[ "$(value "x-$c" errors)" = 1 ] && [ "$(value "x-$c" reconnects)" = 0 ] &&
         grep -q "transient transport error" "$WORK/x-$c.out" && alive "$TPORT"' "$WORK/x-$c.out"
    kill "$p_h2c_pid" "$t_h2c_pid"
}

case_killed() {
    target t6 || return 1
    perf warm "$TPORT" -w randread -o 4096 -q 32 -t 1
    timeout 60 "$NVME" perf -r "$(trid "$TPORT")" -w randread -o 65536 -q 128 -t 30 \
        >"$WORK/killed-t.out" 2>&1 &
    local perf_pid=$!
    sleep 1
    kill -9 "$t6_pid"
    local start=$SECONDS
    wait "$perf_pid"
    local prc=$?
    check "the target killed mid-command: the host fails its I/O, reports and ends" \
        '[ $prc -eq 1 ] && [ $((SECONDS - start)) -lt 20 ] && grep -q "^iops" "$WORK/killed-t.out"' \
        "$WORK/killed-t.out"
    target t7 || return 1
    "$NVME" perf -r "$(trid "$TPORT")" -w randwrite -o 1M -q 16 -t 30 >/dev/null 2>&1 &
    perf_pid=$!
    sleep 1
    kill -9 "$perf_pid"
    wait "$perf_pid" 2>/dev/null
    check "the host killed mid-command: the target serves the next one" 'alive "$TPORT"' "$WORK/t7.log"
    kill "$t7_pid"
}

cases=("$@")
[ ${#cases[@]} -gt 0 ] || mapfile -t cases < <(sed -n 's/^case_\([a-z0-9_]*\)() {$/\1/p' "$0")
for c in "${cases[@]}"; do
    echo "--- $c"
    "case_$c" || check "$c: set-up" false
done
# The targets' logs and the hosts' outputs of a sanitizer build say nothing of their own.
for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null
check "no sanitizer report" '! san_reports "$WORK"/*.log "$WORK"/*.out' \
    "$(grep -lE "Sanitizer|runtime error" "$WORK"/*.log "$WORK"/*.out 2>/dev/null | head -n 1)"
check_end
