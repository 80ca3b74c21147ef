# Message rate: 100-byte ping-pong round trips per second (bench/msgrate.c), the IPC benchmarks'
# figure.
WL_TITLE="message rate, 100 B ping-pong"
WL_UNIT="round trips/s"
WL_BETTER=higher
WL_MODES="tcp unix usmc usmc-sleep usmc-bp bare-sleep"
WL_CASES=(100)
WL_TARGETS=("100 usmc-sleep >= 2.5" "100 usmc-bp >= 8")

wl_label() { echo "$1 B"; }

wl_server() { serve "$BIN/msgrate" server "$(endpoint)"; }

# bare-sleep: the least a sleeping transport pays per round trip (two wake-ups), as a rate
wl_client() {
    if [ "$1" = bare-sleep ]; then
        bare_client "$1" latency "$2" | awk '$1 > 0 { printf "%.0f\n", 1e6 / (2 * $1) }'
        return
    fi
    client "$BIN/msgrate" client "$(endpoint)" "$SECS" "$2" && cat "$CLIENT_OUT"
}
