# The bare limit alone (bench/bare_ring.c): two processes spinning on one memfd ring, with
# sockperf's message sizes, measured the way sockperf reports them. sockperf_pp and sockperf_tp
# run it too, interleaved with the transports it bounds, since this machine's speed drifts.
WL_TITLE="bare limit: two processes, one memfd ring, spinning"
WL_UNIT="usec for latency, MBps for throughput"
WL_BETTER="lower latency and higher throughput are better"
WL_MODES="bare"
WL_CASES=(latency-14 throughput-64000)

wl_label() {
    if [ "${1%-*}" = latency ]; then echo "ping-pong ${1##*-} B, usec"; else echo "throughput ${1##*-} B, MBps"; fi
}

wl_client() { bare_client bare "${2%-*}" "${2##*-}"; }
