# iperf3: bulk TCP streams, one and four in parallel.
WL_TITLE="iperf3"
WL_UNIT="Gbit/s"
WL_BETTER=higher
WL_MODES="tcp usmc usmc-bp"    # iperf3 has no Unix domain sockets
WL_NEEDS="iperf3:iperf3"
WL_CASES=(1 4)

wl_label() { if [ "$1" = 1 ]; then echo "1 stream"; else echo "$1 streams (-P $1)"; fi; }

wl_server() { serve iperf3 --server --bind 127.0.0.1 --port "$PORT"; }

# the receiver's total: the last "receiver" line, the sum when there are several streams
wl_client() {
    client iperf3 --client 127.0.0.1 --port "$PORT" --time "$SECS" --parallel "$2" --format g ||
        return 1
    awk '/receiver/ { for (i = 2; i <= NF; i++) if ($i == "Gbits/sec") v = $(i - 1) } END { if (v != "") print v }' "$CLIENT_OUT"
}
