# A proxy chain: haproxy (2 threads) in front of two nginx, wrk keeping its connections to the
# proxy alive and the proxy opening a connection per request to the backends (http-server-close),
# on a quiet machine and beside CPU hogs: one busy loop per core, at the same priority, for as
# long as each run lasts, so that every core has more runnable threads than it can run. A
# transport whose waiters spin must give way there: spinning then only takes time from the
# thread it waits for. All servers on the server core, wrk on the other.
WL_TITLE="haproxy (2 threads) before two nginx, a backend connection per request, 1 KB file"
WL_UNIT="requests/s"
WL_BETTER=higher
WL_MODES="tcp usmc usmc-allshort"
WL_NEEDS="haproxy:haproxy nginx:nginx-light wrk:wrk"
WL_CASES=(quiet hogs)
WL_TARGETS=("quiet usmc >= 1.2" "hogs usmc >= 1.0")

wl_label() {
    case $1 in
        quiet) echo "quiet machine, 50 connections" ;;
        hogs) echo "a CPU hog on each core, 50 connections" ;;
    esac
}

# _backend NAME: one nginx serving the file on a port of its own, that port in PORT
_backend() {
    local front=$PORT
    pick_port
    nginx_serve_as "$1" 127.0.0.1 "$PORT" 1 || return 1
    _backend_port=$PORT PORT=$front
}

wl_server() {
    local b1 b2
    _backend nginx1 || return 1
    b1=$_backend_port
    _backend nginx2 || return 1
    b2=$_backend_port
    cat >"$MODE_DIR/haproxy.cfg" <<CONF
global
    nbthread 2
    maxconn 8000
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    option http-server-close
frontend front
    bind 127.0.0.1:$PORT
    default_backend nginx
backend nginx
    balance roundrobin
    server n1 127.0.0.1:$b1
    server n2 127.0.0.1:$b2
CONF
    serve haproxy -db -f "$MODE_DIR/haproxy.cfg"
}

# _hogs_start: one busy loop pinned to each online core, their pids in _hogs; each ends by itself
# after the longest a client may take, should the driver die without stopping them
_hogs_start() {
    local cpu
    _hogs=()
    for cpu in $(seq 0 $(($(nproc) - 1))); do
        timeout $((SECS * 4 + 60)) taskset -c "$cpu" sh -c 'while :; do :; done' &
        _hogs+=($!)
    done
}

_hogs_stop() {
    kill "${_hogs[@]}" 2>/dev/null
    wait "${_hogs[@]}" 2>/dev/null
    _hogs=()
}

# A run whose responses were not all 2xx measured errors, not the chain: it fails.
wl_client() {
    local rc=0
    [ "$2" = hogs ] && _hogs_start
    client wrk -t1 -c 50 -d "${SECS}s" "http://127.0.0.1:$PORT/1k.html" || rc=1
    [ "$2" = hogs ] && _hogs_stop
    [ "$rc" = 0 ] || return 1
    grep -q 'Non-2xx' "$CLIENT_OUT" && return 1
    sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$CLIENT_OUT"
}
