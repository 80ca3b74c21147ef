# Idle connections: the ping-pong latency of one connection (the median over batches of round
# trips) while thousands of others stay open and idle, beside the same with none (bench/idle.c).
# The memory each idle connection costs the client is listed under the table. An accelerated
# connection holds two descriptors in each process (the socket and its doorbell end):
# IDLE_CONNECTIONS defaults to 10 000 where the hard RLIMIT_NOFILE allows (above 20 256), else
# to as many as fit.
WL_TITLE="active connection beside idle ones, 14 B ping-pong latency"
WL_UNIT="usec"
WL_BETTER=lower
WL_MODES="tcp usmc"
_idle_fit=$(ulimit -Hn)
[ "$_idle_fit" = unlimited ] && _idle_fit=1048576
_idle_fit=$(((_idle_fit - 256) / 2))
IDLE_CONNECTIONS=${IDLE_CONNECTIONS:-$((_idle_fit < 10000 ? _idle_fit : 10000))}
WL_CASES=(0 "$IDLE_CONNECTIONS")
# The active connection beside the idle ones against itself alone: at most 5 % slower.
WL_TARGETS=("$IDLE_CONNECTIONS usmc <= 1.05 usmc 0")

wl_label() { echo "$1 idle connections"; }

wl_server() { serve "$BIN/idle" server "$(endpoint)"; }

wl_client() {
    client "$BIN/idle" client "$(endpoint)" "$2" "$SECS" || return 1
    grep -v '^memory' "$CLIENT_OUT"
    grep '^memory' "$CLIENT_OUT"
}
