#!/usr/bin/env bash
# Fallback: one side under usmc, the other plain. nginx/curl and redis-server/redis-cli must move
# their data byte-exact over plain TCP and the accelerated side must count a fallback with a reason.
. "$(dirname "$0")/lib.sh"
app_begin fallback
need nginx curl redis-server redis-cli

random_file "$WORK/data.bin" $((8 * 1024 * 1024))

# mixed_pair SERVER_MODE CLIENT_MODE: both applications in a fresh rundir.
mixed_pair() {
    local tag=$1-server port
    log "server $1, client $2"
    fresh_rundir
    port=$(pick_port)
    mkdir -p "$WORK/web-$tag/www"
    ln "$WORK/data.bin" "$WORK/web-$tag/www/data.bin"
    start_nginx "web-$tag" 127.0.0.1 "$port" "$1"
    download "$2" "http://127.0.0.1:$port/data.bin" "$WORK/data.bin"
    stop "web-$tag"
    nginx_clean "web-$tag"

    port=$(pick_port)
    start_redis "redis-$tag" 127.0.0.1 "$port" "$1"
    redis_roundtrip "$2" 127.0.0.1 "$port" "key-$tag" $((1024 * 1024))
    stop "redis-$tag"
    expect_fallback
}

mixed_pair plain acc
mixed_pair acc plain
log "fallback: ok"
