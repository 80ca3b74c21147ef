# Message rate: 100-byte ping-pong round trips per second (bench/msgrate.c), the IPC benchmarks'
# figure.
WL_TITLE="message rate, 100 B ping-pong"
WL_UNIT="round trips/s"
WL_BETTER=higher
WL_MODES="tcp unix usmc usmc-sleep usmc-bp"
WL_CASES=(100)
WL_TARGETS=("100 usmc-sleep >= 2.5" "100 usmc-bp >= 8")

wl_label() { echo "$1 B"; }

wl_server() { serve "$BIN/msgrate" server "$(endpoint)"; }

wl_client() {
    client "$BIN/msgrate" client "$(endpoint)" "$SECS" "$2" && cat "$CLIENT_OUT"
}
