# Connection setup rate: connect, one 1-byte round trip, close, as fast as possible
# (bench/connrate.c). Setup cost is all there is, including the fallback path's. The client's
# connections come from eight loopback addresses (bench/endpoint.c), or the kernel's reuse of
# local ports would cap every mode near 14 000 connections a second.
WL_TITLE="connection setup rate"
WL_UNIT="connections/s"
WL_BETTER=higher
WL_MODES="tcp unix usmc usmc-bp fallback"
WL_CASES=(1)
WL_TARGETS=("1 usmc >= 1.0" "1 usmc >= 1.0 unix")

wl_label() { echo "connect, $1 B round trip, close"; }

wl_server() { serve "$BIN/connrate" server "$(endpoint)"; }

wl_client() {
    client "$BIN/connrate" client "$(endpoint)" "$SECS" && cat "$CLIENT_OUT"
}
