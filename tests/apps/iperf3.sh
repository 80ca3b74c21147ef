#!/usr/bin/env bash
# iperf3: one stream and four parallel streams, each against a fresh one-shot server.
. "$(dirname "$0")/lib.sh"
app_begin iperf3
need iperf3 python3

total=0
# run_iperf3 NAME ARGS...: iperf3's verdict is its exit status and a JSON report whose summed
# received bytes are positive and match the per-stream reports, with the expected stream count.
run_iperf3() {
    local name=$1 streams=$2 port out received
    shift 2
    port=$(pick_port)
    out=$WORK/$name.json
    serve "srv-$name" "$port" acc iperf3 -s -1 -p "$port"
    client acc iperf3 -c 127.0.0.1 -p "$port" -t 3 -J "$@" >"$out" ||
        { cat "$out"; fail "iperf3 $name exited with an error"; }
    server_done "srv-$name" || fail "iperf3 server for $name exited with an error"
    received=$(python3 - "$out" "$streams" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
if "error" in report:
    sys.exit("iperf3 error: " + report["error"])
end = report["end"]
streams = end["streams"]
if len(streams) != int(sys.argv[2]):
    sys.exit("expected %s streams, got %d" % (sys.argv[2], len(streams)))
received = end["sum_received"]["bytes"]
if received <= 0 or end["sum_sent"]["bytes"] <= 0:
    sys.exit("nothing transferred")
if received != sum(s["receiver"]["bytes"] for s in streams):
    sys.exit("stream byte counts do not add up to the sum")
print(received)
PY
    ) || fail "iperf3 $name: bad report"
    log "iperf3 $name: $received bytes received over $streams stream(s)"
    total=$((total + received))
}

run_iperf3 single 1
run_iperf3 parallel 4 -P 4

expect_accelerated "$total"
log "iperf3: ok"
