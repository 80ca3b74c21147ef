# nginx (one worker) serving a 1 KB file to wrk, with keep-alive and with a connection per request.
# NGINX_WORKERS, set by a workload that reads this one (nginx_prefork), runs a master with that
# many workers instead. A workload that reads it may also have wrk fetch another page
# (_nginx_page) and give nginx_serve more of the server's configuration (fastcgi).
_nginx_workers=${NGINX_WORKERS:-1}
_nginx_page=1k.html
unset NGINX_WORKERS
WL_TITLE="nginx + wrk, 1 worker, 1 KB file"
WL_UNIT="requests/s"
WL_BETTER=higher
WL_MODES="tcp usmc usmc-bp usmc-allshort"    # wrk has no Unix domain sockets
WL_NEEDS="nginx:nginx-light wrk:wrk"
WL_CASES=(keepalive-100 keepalive-1000 close-100 close-1000)
WL_TARGETS=("keepalive-100 usmc >= 1.5" "keepalive-1000 usmc >= 1.5" "close-100 usmc >= 1.0" "close-1000 usmc >= 1.0")

wl_label() {
    local how=${1%-*}
    [ "$how" = close ] && how="Connection: close"
    echo "$how, ${1##*-} connections"
}

# nginx_serve [CONFIG]: nginx for the current mode, CONFIG added to its server block
nginx_serve() { nginx_serve_as server 127.0.0.1 "$PORT" "$_nginx_workers" "${1-}"; }

wl_server() { nginx_serve; }

# A run whose responses were not all 2xx measured errors, not nginx: it fails.
wl_client() {
    local header=()
    [ "${2%-*}" = close ] && header=(-H 'Connection: close')
    client wrk -t1 -c "${2##*-}" -d "${SECS}s" "${header[@]}" "http://127.0.0.1:$PORT/$_nginx_page" ||
        return 1
    grep -q 'Non-2xx' "$CLIENT_OUT" && return 1
    sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$CLIENT_OUT"
}
