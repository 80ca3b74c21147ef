#!/usr/bin/env bash
# The main job, shown: the same client and server (sockperf, redis) run over plain TCP and
# under usmc, side by side, pinned to different cores, with the figures and their ratio, and
# usmc's counters proving that shared memory carried the bytes. Figures are medians of
# REPS runs (default 3); this machine's noise decides how far to trust them.
set -uo pipefail

cd "$(dirname "$0")/.."
reps=${REPS:-3}
secs=${SECS:-3}

if [ "$(id -u)" -eq 0 ]; then
    scripts/install-deps.sh || exit 1
fi
make -j"$(nproc)" >/dev/null || exit 1

usmc=$PWD/build/bin/usmc
work=$(mktemp -d)
rundir=$work/rundir
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# pick two cores when there are two; one core cannot show anything but contention
if [ "$(nproc)" -ge 2 ]; then srv_cpu=0 cli_cpu=1; else srv_cpu=0 cli_cpu=0; fi
port=$((20000 + RANDOM % 20000))

# launch MODE CPU CMD...: MODE is tcp or usmc. Always called in a subshell (background or
# pipeline), which it replaces, so $! names the program itself.
launch() {
    local mode=$1 cpu=$2
    shift 2
    if [ "$mode" = usmc ]; then
        exec taskset -c "$cpu" "$usmc" run --rundir "$rundir" -- "$@"
    fi
    exec taskset -c "$cpu" "$@"
}

# start_server MODE CMD...: in the background, returning once it listens on $port
start_server() {
    local mode=$1
    shift
    launch "$mode" "$srv_cpu" "$@" >"$work/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do
        ss -Htln "( sport = :$port )" | grep -q . && return
        sleep 0.05
    done
    echo "server did not start: $*" >&2
    cat "$work/server.log" >&2
    exit 1
}

stop_server() {
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# measure MODE WORKLOAD: one figure on stdout. sockperf sizes its sequence table for a bounded
# message rate, which busy-polling round trips exceed: the ping-pong rate is capped.
measure() {
    local mode=$1 what=$2
    case $what in
    latency)
        launch "$mode" "$cli_cpu" sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" \
            --msg-size=14 -t "$secs" --mps=200000 2>&1 |
            sed -n 's/.*avg-latency=\([0-9.]*\).*/\1/p'
        ;;
    throughput)
        launch "$mode" "$cli_cpu" sockperf throughput --tcp -i 127.0.0.1 -p "$port" \
            --msg-size=64000 -t "$secs" 2>&1 |
            sed -n 's/.*BandWidth is \([0-9.]*\) MBps.*/\1/p'
        ;;
    redis)
        launch "$mode" "$cli_cpu" redis-benchmark -p "$port" -q -t get -n 100000 -c 50 \
            -d 1024 2>&1 | tr '\r' '\n' | sed -n 's/^GET: \([0-9.]*\) requests per second.*/\1/p'
        ;;
    esac
}

# row LABEL UNIT BETTER WORKLOAD SERVER...: the workload against each mode's server
row() {
    local label=$1 unit=$2 better=$3 what=$4 mode
    shift 4
    declare -A fig
    for mode in tcp usmc; do
        start_server "$mode" "$@"
        local runs=()
        for _ in $(seq "$reps"); do
            runs+=("$(measure "$mode" "$what")")
        done
        stop_server
        # a run that failed leaves no figure; the median is of those that finished
        fig[$mode]=$(printf '%s\n' "${runs[@]}" | grep . | median)
    done
    awk -v l="$label" -v u="$unit" -v b="$better" -v t="${fig[tcp]}" -v s="${fig[usmc]}" 'BEGIN {
        r = (t > 0 && s > 0) ? s / t : 0
        printf "%-34s %12.2f %12.2f   %5.2f x  (%s is better)\n", l " (" u ")", t, s, r, b
    }'
}

echo "usmc demo: plain TCP loopback vs usmc, server on CPU $srv_cpu, client on CPU $cli_cpu,"
echo "median of $reps runs of ${secs}s; ratio = usmc / TCP"
echo
printf '%-34s %12s %12s   %s\n' workload TCP usmc ratio
row "sockperf ping-pong 14 B latency" usec lower latency sockperf server --tcp -i 127.0.0.1 -p "$port"
row "sockperf throughput 64000 B" MB/s higher throughput sockperf server --tcp -i 127.0.0.1 -p "$port"
row "redis-benchmark GET 1 KB, 50 conns" req/s higher redis redis-server --port "$port" --save '' --appendonly no
echo
echo "usmc stats for the accelerated runs (both ends count a connection):"
"$usmc" stats --rundir "$rundir" | sed 's/^/  /'
