#!/usr/bin/env bash
# nginx: one process serving a small file to wrk (keep-alive and Connection: close) and a 100 MB
# file to curl. Then a master with its workers (dropping privileges to nobody), reloaded twice
# while wrk keeps fetching a 64 KB page: no request may fail and every body must be exact. The
# connections are accelerated and counted by the workers too, with one worker and with two
# accepting from one socket: then a worker that accepts a connection whose proposal reached its
# sibling is handed it (handoffs), and no connection falls back for it.
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

run_wrk keepalive "http://127.0.0.1:$port/small.html" "$www/small.html" -d3s
run_wrk close "http://127.0.0.1:$port/small.html" "$www/small.html" -d3s -H 'Connection: close'

download acc "http://127.0.0.1:$port/big.bin" "$www/big.bin"

expect_accelerated "$big_size"
stop nginx
nginx_clean nginx

page_size=$((64 * 1024))

# workers MASTER: the master's children, one pid a line.
workers() {
    ps -o pid= --ppid "$1" | sort
}

# reload_under_load NAME WORKERS: a master with WORKERS workers, reloaded twice while wrk runs.
# A reload lets the old workers finish what they hold and exit; keep-alive connections they
# close while idle are a client's race with any server, so every request opens its own.
reload_under_load() {
    local name=$1 prefix=$WORK/$1 master before load
    fresh_rundir
    port=$(pick_port)
    mkdir -p "$prefix/www"
    random_file "$prefix/www/page.bin" "$page_size"
    start_nginx "$name" 127.0.0.1 "$port" acc "$2"
    master=${_server_pid[$name]}
    run_wrk "$name" "http://127.0.0.1:$port/page.bin" "$prefix/www/page.bin" -d6s \
        -H 'Connection: close' &
    load=$!
    for round in 1 2; do
        sleep 1
        before=$(workers "$master")
        nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" -s reload ||
            fail "nginx -s reload failed"
        for _ in $(seq 100); do
            [ "$(comm -12 <(echo "$before") <(workers "$master"))" = "" ] && break
            sleep 0.1
        done
        [ "$(comm -12 <(echo "$before") <(workers "$master"))" = "" ] ||
            fail "reload $round: the workers $before were not replaced"
        kill -0 "$load" 2>/dev/null || fail "the load was over before reload $round finished"
        log "reload $round: workers now $(workers "$master" | tr '\n' ' ')"
    done
    wait "$load" || fail "wrk under reloads failed"
    download acc "http://127.0.0.1:$port/page.bin" "$prefix/www/page.bin"
    if [ "$2" = 1 ] && accelerating; then
        # The old workers are gone: the one left clears the mark at its next accept
        # after a second, and the connections after that are accelerated again.
        sleep 1.2
        download acc "http://127.0.0.1:$port/page.bin" "$prefix/www/page.bin"
        local acc0 amb0
        acc0=$(stat_value client_conn_accelerated) amb0=$(stat_value fallback_ambiguous_listener)
        run_wrk "$name-after" "http://127.0.0.1:$port/page.bin" "$prefix/www/page.bin" -d2s \
            -H 'Connection: close'
        [ "$(stat_value client_conn_accelerated)" -gt "$acc0" ] ||
            fail "after the reloads, new connections stay on TCP"
        [ "$(stat_value fallback_ambiguous_listener)" -eq "$amb0" ] ||
            fail "after the reloads, the port is still taken for several acceptors"
        log "after the reloads: accelerated again"
    fi
    stop "$name"
    nginx_clean "$name"
}

reload_under_load reload1 1
expect_accelerated $((page_size * 16))
# The new worker accepts while the old one finishes: for that moment two live processes
# accept from the port, which marks it ambiguous until the old one has gone.
accelerating && log "stats: fallback_ambiguous_listener=$(stat_value fallback_ambiguous_listener)"

reload_under_load reload2 2
expect_accelerated $((page_size * 16))
if accelerating; then
    log "stats: server_conn_accelerated=$(stat_value server_conn_accelerated)" \
        "handoffs=$(stat_value handoffs)" \
        "fallback_ambiguous_listener=$(stat_value fallback_ambiguous_listener)"
    [ "$(stat_value handoffs)" -gt 0 ] ||
        fail "two workers on one port: no proposal was handed from one to the other"
fi
log "nginx: ok"
