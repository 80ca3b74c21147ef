#!/usr/bin/env bash
# nginx: one worker serving a small file to wrk (keep-alive and Connection: close) and a 100 MB
# file to curl.
. "$(dirname "$0")/lib.sh"
app_begin nginx
need nginx wrk curl

port=$(pick_port)
www=$WORK/nginx/www
mkdir -p "$www"
big_size=$((100 * 1024 * 1024))
random_file "$www/big.bin" "$big_size"
printf '<html><body>usmc</body></html>\n' >"$www/small.html"
start_nginx nginx 127.0.0.1 "$port" acc

# run_wrk NAME ARGS...: wrk's verdict is requests completed, every one answered 2xx, and no
# socket errors.
run_wrk() {
    local name=$1 out=$WORK/wrk-$1.log requests
    shift
    client acc wrk -t1 -c50 -d3s "$@" "http://127.0.0.1:$port/small.html" >"$out" 2>&1 ||
        { cat "$out"; fail "wrk $name exited with an error"; }
    cat "$out"
    requests=$(sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' "$out")
    [ "${requests:-0}" -gt 0 ] || fail "wrk $name completed no request"
    if grep -q 'Non-2xx or 3xx responses' "$out"; then
        fail "wrk $name got non-2xx responses"
    fi
    if grep -q 'Socket errors' "$out"; then
        fail "wrk $name saw socket errors"
    fi
}
run_wrk keepalive
run_wrk close -H 'Connection: close'

download acc "http://127.0.0.1:$port/big.bin" "$www/big.bin"

expect_accelerated "$big_size"
stop nginx
nginx_clean nginx
log "nginx: ok"
