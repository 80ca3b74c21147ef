# sockperf throughput: a one-way stream of messages, as the sender completes them, in sockperf's
# MBps (2^20 bytes per second).
WL_TITLE="sockperf throughput"
WL_UNIT="MBps"
WL_BETTER=higher
WL_MODES="tcp usmc usmc-bp bare"    # sockperf 3.7 has no Unix domain sockets
WL_NEEDS="sockperf:sockperf"
WL_CASES=(64000 1024 14)
WL_TARGETS=("64000 usmc >= 2.5" "64000 usmc >= 0.7 bare" "14 usmc >= 10")

wl_label() { echo "$1 B"; }

wl_server() { sockperf_server; }

wl_client() {
    [ "$1" != bare ] || { bare_client bare throughput "$2"; return; }
    client sockperf throughput --tcp -i 127.0.0.1 -p "$PORT" --msg-size="$2" -t "$SECS" || return 1
    sed -n 's/.*BandWidth is \([0-9.]*\) MBps.*/\1/p' "$CLIENT_OUT"
}
