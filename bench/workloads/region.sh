# Kernels sharing an ivshmem region ("host mode"), stood in for by two network namespaces joined
# by a veth pair, each side with a runtime directory of its own (the local device cannot pair
# them), both mapping one region file in /dev/shm: plain TCP over the veth (the stand-in for
# virtio-net between two virtual machines on one host) against usmc through the region, with
# default settings and busy-polling. sockperf ping-pong (14 B) and throughput (64000 B),
# redis-benchmark SET and GET (200 connections, 1024 B values), nginx with wrk (100 keep-alive
# connections, 1 KB file), and the CPU that 1000 idle connections cost client and server
# together (and the same with none). The namespaces, the veth and the region are made once for the workload and removed
# on every way out; the region's mapping kind (`usmc region status --json`) is listed under the
# table. Needs root.
WL_TITLE="kernels sharing a region: namespaces over veth against usmc through an ivshmem region"
WL_UNIT="usec for latency, MBps for throughput, requests/s for redis and nginx, % of one core for idle connections"
WL_BETTER="lower latency and CPU, higher rates are better"
WL_MODES="veth region region-bp"
WL_REF=veth
WL_NEEDS="ip:iproute2 sockperf:sockperf redis-server:redis-server redis-benchmark:redis-tools nginx:nginx-light wrk:wrk"
_region_idle=1000
# idle-0: what the client and the server cost with no connection, beside 1000 idle ones
WL_CASES=(pp14 tp64000 redis-set redis-get nginx-100 idle-0 "idle-$_region_idle")
WL_TARGETS=("pp14 region-bp <= 0.1" "pp14 region <= 0.7" "tp64000 region >= 3.5"
    "redis-set region >= 2" "redis-get region >= 2" "nginx-100 region >= 1.5"
    "idle-$_region_idle region <= 2 abs")

_region_server=10.79.0.1
_region_client=10.79.0.2

wl_label() {
    case $1 in
        pp14) echo "sockperf ping-pong 14 B, usec" ;;
        tp64000) echo "sockperf throughput 64000 B, MBps" ;;
        redis-set) echo "redis SET -c200 -d1024, requests/s" ;;
        redis-get) echo "redis GET -c200 -d1024, requests/s" ;;
        nginx-*) echo "nginx + wrk keep-alive -c${1#nginx-}, requests/s" ;;
        idle-*) echo "${1#idle-} idle connections, % of a core" ;;
    esac
}

wl_lower() { [[ $1 = pp* || $1 = idle-* ]]; }

# wl_setup: the two namespaces, the veth between them, and the region, with its mapping kind
# among the notes.
wl_setup() {
    local ns=usmcb$$ kind
    HOST_NS_SERVER= HOST_NS_CLIENT= HOST_REGION=
    if [ "$(id -u)" -ne 0 ]; then
        SKIP_REASON="network namespaces need root"
        return 1
    fi
    ip netns add "$ns-s" || { SKIP_REASON="cannot create network namespace $ns-s"; return 1; }
    HOST_NS_SERVER=$ns-s
    ip netns add "$ns-c" || { SKIP_REASON="cannot create network namespace $ns-c"; return 1; }
    HOST_NS_CLIENT=$ns-c
    if ! { ip -n "$ns-s" link set lo up && ip -n "$ns-c" link set lo up &&
        ip link add eth0 netns "$ns-s" type veth peer name eth0 netns "$ns-c" &&
        ip -n "$ns-s" addr add "$_region_server/24" dev eth0 && ip -n "$ns-s" link set eth0 up &&
        ip -n "$ns-c" addr add "$_region_client/24" dev eth0 && ip -n "$ns-c" link set eth0 up; }; then
        SKIP_REASON="cannot join the namespaces with a veth pair"
        return 1
    fi
    HOST_REGION=$(mktemp /dev/shm/usmc-bench-region.XXXXXX) || { SKIP_REASON="no file in /dev/shm"; return 1; }
    if ! "$USMC" region create "$HOST_REGION" --size 4G --force >/dev/null; then
        SKIP_REASON="usmc region create failed"
        return 1
    fi
    kind=$("$USMC" region status "$HOST_REGION" --json |
        python3 -c 'import json, sys; m = json.load(sys.stdin)["mapping"]; print(m["kind"] + (", cached" if m.get("cached") else ", not cached") + (", %s ns a load" % m["load_ns"] if "load_ns" in m else ""))' 2>/dev/null) ||
        kind="not reported"
    WL_NOTES+=("region: a file of 4 GiB in /dev/shm (room for both usmc modes' idle connections at once: a closed connection's memory comes back a while later), mapping kind $kind (usmc region status --json)")
}

wl_teardown() {
    [ -z "$HOST_NS_SERVER" ] || ip netns del "$HOST_NS_SERVER" 2>/dev/null
    [ -z "$HOST_NS_CLIENT" ] || ip netns del "$HOST_NS_CLIENT" 2>/dev/null
    [ -z "$HOST_REGION" ] || rm -f "$HOST_REGION"
    HOST_NS_SERVER= HOST_NS_CLIENT= HOST_REGION=
}

# Each mode's servers, in the server's namespace, on its port and the three after it (the
# namespace is this workload's own: nobody else listens there).
wl_server() {
    serve_as sockperf "$PORT" sockperf server --tcp -i "$_region_server" -p "$PORT" || return 1
    serve_as redis $((PORT + 1)) redis-server --port $((PORT + 1)) --bind "$_region_server" \
        --save '' --appendonly no --protected-mode no --maxclients 1000 --dir "$MODE_DIR" \
        --daemonize no || return 1
    nginx_serve_as nginx "$_region_server" $((PORT + 2)) 1 || return 1
    serve_as idle $((PORT + 3)) "$BIN/idle" server "tcp:$_region_server:$((PORT + 3))"
}

wl_client() {
    local requests=400000 op=${2#redis-}
    case $2 in
        pp14)
            # the rate is capped far above any figure (see sockperf_pp)
            client sockperf ping-pong --tcp -i "$_region_server" -p "$PORT" --msg-size=14 -t "$SECS" \
                --mps=10000000 || return 1
            sed -n 's/.*avg-latency=\([0-9.]*\).*/\1/p' "$CLIENT_OUT"
            ;;
        tp64000)
            client sockperf throughput --tcp -i "$_region_server" -p "$PORT" --msg-size=64000 -t "$SECS" ||
                return 1
            sed -n 's/.*BandWidth is \([0-9.]*\) MBps.*/\1/p' "$CLIENT_OUT"
            ;;
        redis-*)
            # GET runs after SET against the same server, so it reads keys that exist
            [ "$QUICK" = 1 ] && requests=100000
            client redis-benchmark -h "$_region_server" -p $((PORT + 1)) -t "$op" \
                -n "$requests" -c 200 -d 1024 --csv || return 1
            awk -F'"' -v t="${op^^}" '$2 == t { print $4 }' "$CLIENT_OUT"
            ;;
        nginx-*)
            # a run whose responses were not all 2xx measured errors, not nginx: it fails
            client wrk -t1 -c "${2#nginx-}" -d "${SECS}s" "http://$_region_server:$((PORT + 2))/1k.html" ||
                return 1
            grep -q 'Non-2xx' "$CLIENT_OUT" && return 1
            sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$CLIENT_OUT"
            ;;
        idle-*)
            client "$BIN/idle" hold "tcp:$_region_server:$((PORT + 3))" "${2#idle-}" "$SECS" \
                "${_server_pid[$MODE/idle]}" || return 1
            cat "$CLIENT_OUT"
            ;;
    esac
}
