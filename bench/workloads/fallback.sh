# The fallback path's cost: wrk under usmc against a plain nginx (every connection stays TCP after
# usmc found no accelerated peer) beside both plain. Short connections show the per-connection
# cost, keep-alive the per-byte cost.
. "$WL_DIR/nginx.sh"
WL_TITLE="fallback cost: usmc client against plain nginx"
WL_MODES="tcp fallback"
WL_CASES=(close-100 keepalive-100)
WL_TARGETS=("close-100 fallback >= 0.99" "keepalive-100 fallback >= 0.99")
