#!/usr/bin/env bash
# sockperf: 14-byte ping-pong and 64000-byte throughput over one accelerated server.
. "$(dirname "$0")/lib.sh"
app_begin sockperf
need sockperf

port=$(pick_port)
serve sr "$port" acc sockperf sr --tcp -i 127.0.0.1 -p "$port"

# run_sockperf SUMMARY MODE ARGS...: sockperf's own verdict is a clean exit, its summary line
# (it exits 0 even on a usage error, so the summary is what proves a test ran) and no error.
run_sockperf() {
    local summary=$1 mode=$2 out=$WORK/$2.log
    shift
    client acc sockperf "$@" --tcp -i 127.0.0.1 -p "$port" -t 3 >"$out" 2>&1 ||
        { cat "$out"; fail "sockperf $mode exited with an error"; }
    if grep -qiE 'error|fail' "$out"; then
        cat "$out"
        fail "sockperf $mode reported an error"
    fi
    grep -q "Summary: $summary" "$out" || { cat "$out"; fail "sockperf $mode printed no summary"; }
    grep "Summary:" "$out"
}

# --data-integrity makes the client check every echoed payload. sockperf sizes its sequence
# table for a bounded message rate, which busy-polling round trips exceed: cap the rate.
run_sockperf "Latency is" pp --msg-size=14 --data-integrity --mps=200000
grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$WORK/pp.log" ||
    fail "ping-pong lost, duplicated or reordered messages"
pp_bytes=$(sed -n 's/.*\[Total Run\].*ReceivedMessages=\([0-9]*\).*/\1/p' "$WORK/pp.log")
[ "${pp_bytes:-0}" -gt 0 ] || fail "ping-pong received no replies"
pp_bytes=$((pp_bytes * 14))

run_sockperf "BandWidth is" tp --msg-size=64000
tp_msgs=$(sed -n 's/.*Total of \([0-9]*\) messages sent.*/\1/p' "$WORK/tp.log")
[ "${tp_msgs:-0}" -gt 0 ] || fail "throughput test sent no messages"

expect_accelerated $((pp_bytes + tp_msgs * 64000))
stop sr
log "sockperf: ok"
