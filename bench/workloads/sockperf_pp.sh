# sockperf ping-pong: the average one-way latency (half the round trip) of a message.
WL_TITLE="sockperf ping-pong latency"
WL_UNIT="usec"
WL_BETTER=lower
WL_MODES="tcp usmc usmc-sleep usmc-bp bare bare-sleep"    # sockperf 3.7 has no Unix domain sockets
WL_NEEDS="sockperf:sockperf"
WL_CASES=(14 1024 65507)    # 65507: the largest message sockperf 3.7 takes
# Against TCP, and against the bare ring: the library's whole cost on top of the limit.
WL_TARGETS=("14 usmc-sleep <= 0.5" "14 usmc-bp <= 0.1" "14 usmc <= 1.5 bare" "14 usmc-bp <= 1.3 bare")

wl_label() { echo "$1 B"; }

wl_server() { sockperf_server; }

# sockperf sizes its table of sent messages for a message rate that busy-polled round trips
# exceed (it then stops with "_seqN > m_maxSequenceNo"): the rate is capped far above any figure.
wl_client() {
    ! is_bare "$1" || { bare_client "$1" latency "$2"; return; }
    client sockperf ping-pong --tcp -i 127.0.0.1 -p "$PORT" --msg-size="$2" -t "$SECS" \
        --mps=10000000 || return 1
    sed -n 's/.*avg-latency=\([0-9.]*\).*/\1/p' "$CLIENT_OUT"
}
