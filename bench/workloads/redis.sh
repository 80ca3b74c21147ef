# redis-benchmark: SET and GET of 1 KB values from 200 connections.
WL_TITLE="redis-benchmark, 200 connections, 1024 B values"
WL_UNIT="requests/s"
WL_BETTER=higher
WL_MODES="tcp unix usmc usmc-bp"
WL_NEEDS="redis-server:redis-server redis-benchmark:redis-tools"
WL_CASES=(set get)
WL_TARGETS=("set usmc >= 1.8" "get usmc >= 1.8" "set usmc >= 1.0 unix" "get usmc >= 1.0 unix")

wl_label() { echo "${1^^}"; }

wl_server() {
    local listen=(--port "$PORT" --bind 127.0.0.1)
    [ "$1" = unix ] && listen=(--port 0 --unixsocket "$SOCK")
    serve redis-server "${listen[@]}" --save '' --appendonly no --protected-mode no \
        --maxclients 1000 --dir "$MODE_DIR" --daemonize no
}

# GET runs after SET against the same server, so it reads keys that exist.
wl_client() {
    local to=(-h 127.0.0.1 -p "$PORT") requests=400000
    [ "$1" = unix ] && to=(-s "$SOCK")
    [ "$QUICK" = 1 ] && requests=100000
    client redis-benchmark "${to[@]}" -t "$2" -n "$requests" -c 200 -d 1024 --csv || return 1
    awk -F'"' -v t="${2^^}" '$2 == t { print $4 }' "$CLIENT_OUT"
}
