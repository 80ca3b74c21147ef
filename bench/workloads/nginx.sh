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
WL_MODES="tcp usmc usmc-bp"    # wrk has no Unix domain sockets
WL_NEEDS="nginx:nginx-light wrk:wrk"
WL_CASES=(keepalive-100 keepalive-1000 close-100 close-1000)
WL_TARGETS=("keepalive-100 usmc >= 1.5" "keepalive-1000 usmc >= 1.5" "close-100 usmc >= 1.0" "close-1000 usmc >= 1.0")

wl_label() {
    local how=${1%-*}
    [ "$how" = close ] && how="Connection: close"
    echo "$how, ${1##*-} connections"
}

# nginx_serve [CONFIG]: nginx for the current mode, CONFIG added to its server block
nginx_serve() {
    mkdir -p "$MODE_DIR/www" "$MODE_DIR/tmp"
    head -c 1024 /dev/zero | tr '\0' u >"$MODE_DIR/www/1k.html"
    cat >"$MODE_DIR/nginx.conf" <<CONF
daemon off;
master_process $([ "$_nginx_workers" -gt 1 ] && echo on || echo off);
worker_processes $_nginx_workers;
user root;
worker_rlimit_nofile 8192;
pid $MODE_DIR/nginx.pid;
error_log $MODE_DIR/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 100000000;
    client_body_temp_path $MODE_DIR/tmp/body;
    proxy_temp_path $MODE_DIR/tmp/proxy;
    fastcgi_temp_path $MODE_DIR/tmp/fastcgi;
    uwsgi_temp_path $MODE_DIR/tmp/uwsgi;
    scgi_temp_path $MODE_DIR/tmp/scgi;
    server {
        listen 127.0.0.1:$PORT backlog=4096;
        root $MODE_DIR/www;
        ${1-}
    }
}
CONF
    serve nginx -p "$MODE_DIR" -c "$MODE_DIR/nginx.conf" -e "$MODE_DIR/error.log"
}

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
