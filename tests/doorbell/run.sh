#!/usr/bin/env bash
# Interrupts between the peers of a region (usmc region serve, USMC_DEVICE=ivshmem:unix:SOCKET):
#   server_*   the server's errors, its stop, a stale socket
#   protocol   a client written from QEMU's spec (client.c) checks the welcome, the
#              announcements, a ring and a departure, with 1 and 3 vectors
#   garbage    clients that send bytes or descriptors, or hang up early, are dropped and the
#              server serves on
#   qemu       two real QEMUs with ivshmem-doorbell join and leave (skipped without
#              qemu-system-x86_64)
#   host_*     two processes in two network namespaces joined by veth, each with its own
#              runtime directory, both peers of the server: a reader sleeping in recv() is woken
#              by interrupts (the counters say so), an idle one costs a few wake-ups a second
#              (its context switches say so), a polling peer talks to a doorbell peer, and peer
#              IDs a hostile peer wrote into the region cost nothing but speed, and the peers go
#              on when the server stops (needs root)
# Prints PASS, FAIL or SKIP per check, then `N passed, N failed, N skipped`.
set -uo pipefail

. "$(dirname "$0")/../lib/suite.sh"
. "$root/tests/lib/check.sh"
usmc=$build/bin/usmc
skipped=0
work=$(mktemp -d /tmp/doorbell-test.XXXXXX)
pids=() netns=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    for n in "${netns[@]}"; do ip netns del "$n" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
skip() {
    echo "SKIP $1: $2"
    skipped=$((skipped + 1))
}
mkdir -p "$out"
cc -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -o "$out/client" "$here/client.c" || {
    echo "0 passed, 1 failed"
    exit 1
}

region=$work/region
"$usmc" region create "$region" --size 64M >/dev/null || { echo "0 passed, 1 failed"; exit 1; }

# serve NAME SOCKET [OPTION...]: a server in the background, its log in $work/NAME.log.
serve() {
    local name=$1 sock=$2
    shift 2
    "$usmc" region serve "$sock" "$region" "$@" 2>"$work/$name.log" &
    pids+=($!)
    # Its first line says it listens (a stale socket may be there before).
    for _ in $(seq 100); do
        grep -q " on $sock," "$work/$name.log" && return 0
        sleep 0.05
    done
    return 1
}

# ---- the server's errors, stop and stale socket
truncate -s 6M "$work/odd"
"$usmc" region create "$work/odd" >/dev/null 2>&1
"$usmc" region serve "$work/s0" "$work/odd" 2>"$work/odd.log"
check server_not_power_of_two '[ $? -eq 1 ] && grep -q "power of two" "$work/odd.log"' "$work/odd.log"
head -c $((16 << 20)) /dev/urandom >"$work/junk"
"$usmc" region serve "$work/s0" "$work/junk" 2>"$work/junk.log"
check server_not_a_region '[ $? -eq 1 ] && grep -q "not a usmc region" "$work/junk.log"' "$work/junk.log"
"$usmc" region serve "$work/s0" "$region" --vectors 65 2>"$work/vec.log"
check server_bad_vectors '[ $? -eq 2 ] && grep -q "1 to 64" "$work/vec.log"' "$work/vec.log"
serve first "$work/s1"
first=${pids[-1]}
"$usmc" region serve "$work/s1" "$region" 2>"$work/twice.log"
check server_answers_already '[ $? -eq 1 ] && grep -q "answers there already" "$work/twice.log"' \
    "$work/twice.log"
kill -KILL "$first"
wait "$first" 2>/dev/null
serve stale "$work/s1"
check server_replaces_stale_socket '[ $? -eq 0 ]' "$work/stale.log"
kill -TERM "${pids[-1]}"
wait "${pids[-1]}"
check server_stops_on_sigterm '[ $? -eq 0 ] && [ ! -e "$work/s1" ] && grep -q stopped "$work/stale.log"' \
    "$work/stale.log"

# ---- protocol and garbage, against a client of our own
for v in 1 3; do
    serve "proto$v" "$work/p$v" --vectors $v
    timeout 30 "$out/client" "$work/p$v" conformance $v >"$work/proto$v.out" 2>&1
    check "protocol_${v}_vectors" '[ $? -eq 0 ]' "$work/proto$v.out"
done
timeout 60 "$out/client" "$work/p1" garbage 1 >"$work/garbage.out" 2>&1
check garbage '[ $? -eq 0 ] && grep -q "served on" "$work/garbage.out"' "$work/garbage.out"

# ---- real QEMU: two ivshmem-doorbell devices join, then leave
if command -v qemu-system-x86_64 >/dev/null; then
    serve qemu "$work/q" --vectors 2
    timeout 90 "$out/client" "$work/q" watch 2 2 >"$work/watch.out" 2>&1 &
    watcher=$!
    for _ in $(seq 100); do grep -q ready "$work/watch.out" && break; sleep 0.05; done
    qemus=()
    for i in 1 2; do
        # -S: the devices are made, and join, but no guest runs.
        timeout 60 qemu-system-x86_64 -machine q35 -accel tcg -S -display none -nodefaults \
            -chardev socket,path="$work/q",id=c -device ivshmem-doorbell,chardev=c,vectors=2 \
            -monitor none -serial none >"$work/qemu$i.log" 2>&1 &
        qemus+=($!)
    done
    for _ in $(seq 400); do
        [ "$(grep -c joined "$work/qemu.log")" -ge 3 ] && break
        sleep 0.05
    done
    kill -TERM "${qemus[@]}" 2>/dev/null
    wait "${qemus[@]}" 2>/dev/null
    wait "$watcher"
    check qemu_joins_and_leaves '[ $? -eq 0 ]' "$work/watch.out"
    cat "$work/qemu1.log" "$work/qemu.log" >>"$work/watch.out"
else
    skip qemu_joins_and_leaves "qemu-system-x86_64 is not installed"
fi

# ---- host processes in two network namespaces, peers of one server
host_checks=(host_accelerated host_reader_woken host_idle_quiet host_mixed host_hostile_ids
    host_server_gone)
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v python3 >/dev/null ||
    ! ip netns add "usmcdb$$s" 2>/dev/null; then
    for c in "${host_checks[@]}"; do skip "$c" "network namespaces need root, ip and python3"; done
else
    ns=usmcdb$$
    netns+=("${ns}s")
    ip netns add "${ns}c" && netns+=("${ns}c")
    ip -n "${ns}s" link set lo up
    ip -n "${ns}c" link set lo up
    ip link add eth0 netns "${ns}s" type veth peer name eth0 netns "${ns}c"
    ip -n "${ns}s" addr add 10.79.0.1/24 dev eth0
    ip -n "${ns}s" link set eth0 up
    ip -n "${ns}c" addr add 10.79.0.2/24 dev eth0
    ip -n "${ns}c" link set eth0 up
    serve host "$work/h"
    host_server=${pids[-1]}
    rd_s=$work/rd-s rd_c=$work/rd-c rd_p=$work/rd-p
    mkdir -m 700 "$rd_s" "$rd_c" "$rd_p"
    bell=ivshmem:unix:$work/h
    # under NS RUNDIR DEVICE CMD...: a program under usmc in namespace NS, for a minute at most.
    under() {
        local n=$1 rd=$2 dev=$3
        shift 3
        timeout 60 ip netns exec "$n" "$usmc" run --rundir "$rd" --device "$dev" -- "$@"
    }
    stat_of() { "$usmc" stats --rundir "$1" | awk -v k="$2" '$1 == k { print $2 }'; }
    ip netns exec "${ns}s" "$usmc" run --rundir "$rd_s" --device "$bell" -- \
        python3 "$here/echo.py" serve 10.79.0.1 7000 >"$work/echo-serve.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do grep -q listening "$work/echo-serve.log" && break; sleep 0.05; done
    reader=$(pgrep -nf "echo.py serve 10.79.0.1 7000")

    under "${ns}c" "$rd_c" "$bell" python3 "$here/echo.py" talk 10.79.0.1 7000 4 0.3 \
        >"$work/talk.out" 2>&1
    check host_accelerated '[ $? -eq 0 ] && grep -q ok "$work/talk.out" &&
        [ "$(stat_of "$rd_s" ivshmem_conn_accelerated)" -ge 1 ] &&
        [ "$(stat_of "$rd_c" ivshmem_conn_accelerated)" -ge 1 ]' "$work/talk.out"
    # Four rounds after a quiet spell each: the reader slept in recv() and an interrupt woke it.
    "$usmc" stats --rundir "$rd_s" >"$work/stats-s" 2>&1
    "$usmc" stats --rundir "$rd_c" >"$work/stats-c" 2>&1
    check host_reader_woken '[ "$(stat_of "$rd_s" ivshmem_interrupts_received)" -ge 4 ] &&
        [ "$(stat_of "$rd_c" ivshmem_interrupts_sent)" -ge 4 ]' "$work/stats-s"

    # Idle for two seconds: the reader's timer fires for its lease only (a tenth of it apart),
    # where polling would wake it hundreds of times.
    under "${ns}c" "$rd_c" "$bell" python3 "$here/echo.py" idle 10.79.0.1 7000 \
        "$reader" 2 >"$work/idle.out" 2>&1
    check host_idle_quiet '[ $? -eq 0 ] && [ "$(head -n 1 "$work/idle.out")" -lt 60 ]' "$work/idle.out"

    # A peer that polls (it maps the file, no server) and one that takes interrupts.
    under "${ns}c" "$rd_p" "ivshmem:$region" python3 "$here/echo.py" talk 10.79.0.1 7000 \
        3 0.2 >"$work/mixed.out" 2>&1
    check host_mixed '[ $? -eq 0 ] && grep -q ok "$work/mixed.out" &&
        [ "$(stat_of "$rd_p" ivshmem_conn_accelerated)" -ge 1 ]' "$work/mixed.out"

    # Peer IDs nobody announced, or out of range, written into every live slot while a
    # connection talks: the peers poll each other instead, and it still completes.
    under "${ns}c" "$rd_c" "$bell" python3 "$here/echo.py" talk 10.79.0.1 7000 6 0.3 \
        >"$work/hostile.out" 2>&1 &
    talker=$!
    sleep 0.6
    python3 - "$region" <<'PY' >>"$work/hostile.out" 2>&1
import mmap, struct, sys
with open(sys.argv[1], "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    nslots, = struct.unpack_from("<I", m, 48)
    slots_off, = struct.unpack_from("<Q", m, 64)
    for i in range(nslots):
        s = slots_off + i * 256
        if struct.unpack_from("<Q", m, s)[0] & 0xff == 1:
            struct.pack_into("<I", m, s + 20, 0xFFFFFFFF if i % 2 else 4243)
            print("slot", i, "given a hostile peer ID")
PY
    wait "$talker"
    check host_hostile_ids '[ $? -eq 0 ] && grep -q ok "$work/hostile.out" && kill -0 "$reader"' \
        "$work/hostile.out"

    # The server stops while two peers talk: they hold each other's eventfds, and go on.
    under "${ns}c" "$rd_c" "$bell" python3 "$here/echo.py" talk 10.79.0.1 7000 5 0.3 \
        >"$work/gone.out" 2>&1 &
    talker=$!
    sleep 0.6
    kill -TERM "$host_server"
    wait "$talker"
    check host_server_gone '[ $? -eq 0 ] && grep -q ok "$work/gone.out" && kill -0 "$reader"' \
        "$work/gone.out"
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
