# Idle connections: the ping-pong latency of one connection while thousands of others stay
# open and idle, beside the same with none (bench/idle.c). The memory each idle connection costs
# the client is listed under the table. An accelerated connection holds two descriptors in each
# process (the socket and its doorbell end): IDLE_CONNECTIONS (default 5000) must fit the hard
# RLIMIT_NOFILE twice over; 10 000 needs it above 20 256.
WL_TITLE="active connection beside idle ones, 14 B ping-pong latency"
WL_UNIT="usec"
WL_BETTER=lower
WL_MODES="tcp usmc"
WL_CASES=(0 "${IDLE_CONNECTIONS:-5000}")
# The active connection beside the idle ones against itself alone: at most 5 % slower.
WL_TARGETS=("${IDLE_CONNECTIONS:-5000} usmc <= 1.05 usmc 0")

wl_label() { echo "$1 idle connections"; }

wl_server() { serve "$BIN/idle" server "$(endpoint)"; }

wl_client() {
    client "$BIN/idle" client "$(endpoint)" "$2" "$SECS" || return 1
    grep -v '^memory' "$CLIENT_OUT"
    grep '^memory' "$CLIENT_OUT"
}
