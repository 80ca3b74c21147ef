#!/usr/bin/env bash
# Kernels sharing a region, as virtual machines attached to one ivshmem device do, stood in for
# by two network namespaces joined by a veth pair, each with a runtime directory of its own (so
# that the local device cannot pair them), both mapping one region file. sockperf (every
# payload checked), iperf3 with four streams, redis-benchmark, nginx with wrk, and curl fetching
# 100 MB checked by sha256 run once on plain TCP and once under usmc through the region: every
# connection is accelerated by the ivshmem device, and the veth carries less than 1 % of the
# bytes plain TCP put on it (its own counters say so, not usmc's).
. "$(dirname "$0")/lib.sh"
app_begin region
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
need ip sockperf iperf3 redis-server redis-benchmark nginx wrk curl python3

ns=usmcr$$
new_netns "${ns}s"
new_netns "${ns}c"
veth "${ns}s" eth0 10.78.0.1/24 "${ns}c" eth0 10.78.0.2/24
srv=10.78.0.1
REGION=$(mktemp /dev/shm/usmc-app-region.XXXXXX)
"$USMC" region create "$REGION" --size 512M --force >/dev/null || fail "cannot make the region"
export USMC_DEVICE=ivshmem:$REGION
RD_SRV=$WORK/rundir-server RD_CLI=$WORK/rundir-client
mkdir -m 700 "$RD_SRV" "$RD_CLI"
_region_cleanup() {
    local rc=$?
    rm -f "$REGION"
    (exit "$rc")
    _cleanup
}
trap _region_cleanup EXIT

# Bytes the veth carried both ways, as the server's end counts them.
veth_bytes() {
    local d=/sys/class/net/eth0/statistics
    ip netns exec "${ns}s" sh -c "echo \$((\$(cat $d/rx_bytes) + \$(cat $d/tx_bytes)))"
}

# on_server / on_client: where and with which runtime directory a program runs.
on_server() { NETNS=${ns}s RD=$RD_SRV "$@"; }
on_client() { NETNS=${ns}c RD=$RD_CLI "$@"; }

# measure NAME CMD...: runs CMD (a function doing one workload in mode $MODE), and notes how
# many bytes the veth carried meanwhile in $WORK/NAME.$MODE.
measure() {
    local name=$1 before
    shift
    before=$(veth_bytes)
    "$@"
    echo $(($(veth_bytes) - before)) >"$WORK/$name.$MODE"
    log "$name ($MODE): the veth carried $(cat "$WORK/$name.$MODE") bytes"
}

do_sockperf() {
    local port out=$WORK/sockperf-$MODE.log
    port=$(pick_port)
    on_server serve "sp-$MODE" "$port" "$MODE" sockperf sr --tcp -i "$srv" -p "$port"
    on_client client "$MODE" sockperf pp --tcp -i "$srv" -p "$port" -t 2 --msg-size=14 \
        --data-integrity --mps=20000 >"$out" 2>&1 || { cat "$out"; fail "sockperf pp failed"; }
    grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$out" ||
        { cat "$out"; fail "sockperf lost, duplicated or reordered messages"; }
    on_client client "$MODE" sockperf tp --tcp -i "$srv" -p "$port" -t 2 --msg-size=64000 \
        --mps=2000 >>"$out" 2>&1 || { cat "$out"; fail "sockperf tp failed"; }
    grep -q "Summary: BandWidth is" "$out" || { cat "$out"; fail "sockperf tp printed no summary"; }
    stop "sp-$MODE"
}

do_iperf3() {
    local port out=$WORK/iperf3-$MODE.json
    port=$(pick_port)
    on_server serve "ip-$MODE" "$port" "$MODE" iperf3 -s -1 -p "$port"
    on_client client "$MODE" iperf3 -c "$srv" -p "$port" -P 4 -n 256M -J >"$out" ||
        { cat "$out"; fail "iperf3 failed"; }
    on_server server_done "ip-$MODE" || fail "iperf3 server exited with an error"
    python3 - "$out" <<'PY' || fail "iperf3: bad report"
import json, sys
end = json.load(open(sys.argv[1]))["end"]
assert len(end["streams"]) == 4, "four streams"
assert end["sum_sent"]["bytes"] >= 256 << 20, "all of it sent"
assert end["sum_received"]["bytes"] > 0, "received"
PY
}

do_redis() {
    local port out=$WORK/redis-$MODE.log
    port=$(pick_port)
    on_server start_redis "rd-$MODE" "$srv" "$port" "$MODE"
    on_client client "$MODE" redis-benchmark -h "$srv" -p "$port" -n 40000 -c 50 -d 1024 \
        -t set,get -q >"$out" 2>&1 || { cat "$out"; fail "redis-benchmark failed"; }
    grep -q "GET: .* requests per second" "$out" || { cat "$out"; fail "redis-benchmark: no GET"; }
    on_client redis_roundtrip "$MODE" "$srv" "$port" "value-$MODE" $((1024 * 1024))
    stop "rd-$MODE"
}

do_nginx() {
    local port
    port=$(pick_port)
    binary_file "$WORK/page-$MODE" 4096
    random_file "$WORK/big-$MODE" $((100 * 1024 * 1024))
    on_server start_nginx "ng-$MODE" "$srv" "$port" "$MODE"
    mv "$WORK/page-$MODE" "$WORK/big-$MODE" "$WORK/ng-$MODE/www/"
    WRK_MODE=$MODE on_client run_wrk "$MODE" "http://$srv:$port/page-$MODE" \
        "$WORK/ng-$MODE/www/page-$MODE" -d 2 -c 20
    on_client download "$MODE" "http://$srv:$port/big-$MODE" "$WORK/ng-$MODE/www/big-$MODE"
    nginx_clean "ng-$MODE"
    stop "ng-$MODE"
}

for MODE in plain acc; do
    measure sockperf do_sockperf
    measure iperf3 do_iperf3
    measure redis do_redis
    measure nginx do_nginx
done

accelerating || { log "plain mode: acceleration not checked"; exit 0; }
# wrk makes as many requests as it can in its time: its share of what plain TCP put on the veth
# is judged per request, the others' per workload.
for name in sockperf iperf3 redis nginx; do
    plain=$(cat "$WORK/$name.plain") acc=$(cat "$WORK/$name.acc")
    [ $((acc * 100)) -lt "$plain" ] ||
        fail "$name: the veth carried $acc bytes under usmc, against $plain on plain TCP (>= 1 %)"
    log "$name: the veth carried $acc bytes under usmc, $plain on plain TCP"
done
for side in server client; do
    RD=$([ $side = server ] && echo "$RD_SRV" || echo "$RD_CLI")
    acc=$(stat_value ivshmem_conn_accelerated) lo=$(stat_value lo_conn_accelerated)
    fallbacks=$(stat_value conn_fallback)
    log "$side: ivshmem_conn_accelerated=$acc lo_conn_accelerated=$lo conn_fallback=$fallbacks"
    [ "$acc" -gt 0 ] || fail "$side: nothing accelerated through the region"
    [ "$lo" -eq 0 ] || fail "$side: the local device carried connections between namespaces"
    [ "$fallbacks" -eq 0 ] || { stats; fail "$side: connections fell back"; }
done
"$USMC" region status "$REGION"
log "region: ok"
