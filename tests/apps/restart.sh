#!/usr/bin/env bash
# restart: a server killed with SIGKILL leaves its registration behind; the next server on the
# same port takes it over and is accelerated, and the dead one's files do not pile up.
. "$(dirname "$0")/lib.sh"
app_begin restart
need redis-server redis-cli

port=$(pick_port)
start_redis first 127.0.0.1 "$port" acc
redis_roundtrip acc 127.0.0.1 "$port" before 4096
kill -KILL "${_server_pid[first]}"
_reap "${_server_pid[first]}"
unset "_server_pid[first]"

if accelerating; then
    [ -L "$RD/l-$port" ] || fail "the killed server's registration is gone already: nothing tested"
fi
start_redis second 127.0.0.1 "$port" acc
redis_roundtrip acc 127.0.0.1 "$port" after 4096
if accelerating; then
    target=$(readlink "$RD/l-$port")
    case $target in
        '!'*) fail "registration marked ambiguous after a restart: $target" ;;
    esac
    socks=$(find "$RD" -maxdepth 1 -name 'c-*.sock' | wc -l)
    [ "$socks" -eq 1 ] || fail "$socks control sockets in the runtime directory, expected 1"
fi
stop second
expect_accelerated $((4 * 4096))
log "restart: ok"
