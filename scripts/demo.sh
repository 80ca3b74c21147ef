#!/usr/bin/env bash
# The main job, shown in under two minutes: the same sockperf (and redis) client and server over
# plain TCP loopback and under usmc, side by side, pinned to different cores, with the figures,
# their ratio, and usmc's counters proving that shared memory carried the bytes. Each figure is
# the median of REPS runs (3) of SECS seconds (3), the modes taking turns; bench/run.sh measures
# more, and more carefully. Installs what it needs first (scripts/install-deps.sh).
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
BENCH_SECONDS=${SECS:-3}
. bench/lib.sh
REPS=${REPS:-3}
QUICK=1 # the redis workload's short form

scripts/install-deps.sh make gcc libc6-dev iproute2 sockperf redis-server redis-tools >/dev/null || exit 1
make -j"$(nproc)" >/dev/null || { say "demo: make failed"; exit 1; }
# the build just made, whatever USMC_BUILD says
USMC_BUILD=$ROOT/build USMC=$ROOT/build/bin/usmc

bench_begin
# all accelerated runs share one runtime directory, so its counters add up to the whole demo
SHARED_RUNDIR=$WORK/rundir
mkdir -m 700 "$SHARED_RUNDIR"

# row LABEL WORKLOAD CASE: the workload's case over TCP and under usmc, one line of the table
row() {
    local label=$1 mode rep
    declare -A runs=() median=()
    shift
    load_workload "$1"
    start_servers tcp usmc
    for rep in $(seq "$REPS"); do
        for mode in tcp usmc; do
            measure "$mode" "$2"
            runs[$mode]+=$FIGURE$'\n'
        done
    done
    stop_servers
    for mode in tcp usmc; do
        read -r median["$mode"] _ < <(printf '%s' "${runs[$mode]}" | summarize)
    done
    printf '%-32s %10s %10s %10s   %s\n' "$label" "$(fmt "${median[tcp]}")" \
        "$(fmt "${median[usmc]}")" "$(ratio "${median[usmc]}" "${median[tcp]}")" "$WL_UNIT, $(better)"
}

echo "usmc demo: plain TCP loopback beside usmc; server on CPU $SERVER_CPU, client on CPU $CLIENT_CPU;"
echo "median of $REPS runs of ${SECS} s each; ratio = usmc / TCP"
echo
printf '%-32s %10s %10s %10s\n' workload TCP usmc ratio
row "sockperf ping-pong 14 B" sockperf_pp 14
row "sockperf throughput 64000 B" sockperf_tp 64000
row "redis SET 1 KB, 200 connections" redis set
row "redis GET 1 KB, 200 connections" redis get
echo
echo "usmc stats for the accelerated runs (each end of a connection counts):"
"$USMC" stats --rundir "$SHARED_RUNDIR" | sed 's/^/  /'
