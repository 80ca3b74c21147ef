#!/usr/bin/env bash
# Containers as Docker, Podman and Kubernetes make them: each with its own mount, PID, IPC, UTS
# and network namespaces (the client's with a user namespace too), a private /tmp and /run, and
# one runtime directory bind-mounted into each at /run/usmc. Joined by a veth pair, a connection
# between two of them goes through shared memory, and the veth carries almost nothing; a third
# container in the server's network namespace, as a pod's sidecar, reaches it over loopback.
# usmc ss and usmc stats, run in each container and on the host, each show what that view can
# see: ss the processes of its own PID namespace and those below it, by its own pids; stats the
# same counters everywhere.
. "$(dirname "$0")/lib.sh"
app_begin engines
[ "$(id -u)" -eq 0 ] || skip "namespaces and mounts need root"
need ip nsenter unshare pgrep redis-server redis-cli

c=usmc$$
srv=${c}srv cli=${c}cli side=${c}side
value_size=$((1024 * 1024))

container "$srv"
# Root in the client's user namespace is root outside (the host's root made it): as with
# rootless Podman, the runtime directory and its files belong to one user seen from either side.
container "$cli" --user --map-root-user
container "$side" --pod "$srv"
veth "$srv" eth0 10.78.0.1/24 "$cli" eth0 10.78.0.2/24
port=$(pick_port)
CONTAINER=$srv start_redis redis 0.0.0.0 "$port" acc

# veth_bytes: what the client's end of the veth pair has sent and received so far.
veth_bytes() {
    ip netns exec "$cli" awk '$1 == "eth0:" { print $2 + $10 }' /proc/net/dev
}

# across MODE KEY: a round trip of value_size bytes from the client container to the server
# container; sets carried to the bytes the veth carried meanwhile.
across() {
    local before
    before=$(veth_bytes)
    CONTAINER=$cli redis_roundtrip "$1" 10.78.0.1 "$port" "$2" "$value_size"
    carried=$(($(veth_bytes) - before))
    log "$2: the veth carried $carried bytes"
}

log "across the veth, client in a user namespace"
across acc across
if accelerating; then
    [ "$carried" -lt $((value_size / 32)) ] || fail "the veth carried $carried bytes of an accelerated round trip"
else
    [ "$carried" -ge $((2 * value_size)) ] || fail "the veth carried only $carried bytes of a plain round trip"
fi
log "sidecar: the server's network namespace, over loopback"
CONTAINER=$side redis_roundtrip acc 127.0.0.1 "$port" sidecar "$value_size"
expect_accelerated $((4 * value_size))

if accelerating; then
    CONTAINER=$cli hold sub acc engines redis-cli -h 10.78.0.1 -p "$port" SUBSCRIBE engines
    host_srv=${_server_pid[redis]} host_cli=${_server_pid[sub]}
    in_srv=$(ns_pid "$host_srv") in_cli=$(ns_pid "$host_cli")
    log "server: pid $host_srv on the host, $in_srv in its container; client: $host_cli, $in_cli"
    [ "$in_srv" != "$host_srv" ] && [ "$in_cli" != "$host_cli" ] ||
        fail "the containers have no PID namespaces of their own"

    # usmc_in CONTAINER SUBCOMMAND ARG...: usmc SUBCOMMAND in that container ("": on the host),
    # on the runtime directory as it is named there.
    usmc_in() {
        local CONTAINER=$1
        inside "$USMC" "$2" --rundir "$(rundir_here)" "${@:3}" || fail "usmc $2 in '$1' failed"
    }
    # seen [CONTAINER]: the sockets `usmc ss -a` lists in that container, or on the host: state,
    # uid, pid and process, mode; sorted.
    seen() {
        usmc_in "${1-}" ss -a | awk 'NR > 1 { print $1, $2, $3, $4, $NF }' | sort
    }
    # sees WHO GOT WANT...: the lines of a view, one WANT each.
    sees() {
        local who=$1 got=$2 want shown
        shift 2
        want=$(printf '%s\n' "$@" | sort)
        [ "$got" = "$want" ] || fail "usmc ss $who lists:"$'\n'"$got"$'\n'"expected:"$'\n'"$want"
        shown=${got//$'\n'/; }
        log "usmc ss $who: ${shown:-nothing}"
    }
    sees "in the server's container" "$(seen "$srv")" \
        "LISTEN 0 $in_srv redis-server SMCD" "ESTAB 0 $in_srv redis-server SMCD"
    sees "in the client's container" "$(seen "$cli")" "ESTAB 0 $in_cli redis-cli SMCD"
    sees "in the sidecar" "$(seen "$side")" ""
    sees "on the host" "$(seen)" "LISTEN 0 $host_srv redis-server SMCD" \
        "ESTAB 0 $host_srv redis-server SMCD" "ESTAB 0 $host_cli redis-cli SMCD"

    # Without spin_core_lost: an idle server's timed waits count it while the machine is busy,
    # between one view and the next.
    steady_stats() { usmc_in "${1-}" stats | grep -v '^spin_core_lost '; }
    host_stats=$(steady_stats)
    for where in "$srv" "$cli" "$side"; do
        there=$(steady_stats "$where")
        [ "$there" = "$host_stats" ] ||
            fail "usmc stats in $where differs from the host's:"$'\n'"$(diff <(echo "$host_stats") <(echo "$there"))"
    done
    log "usmc stats: the same in every container and on the host"
    stop sub
fi

log "a plain client across the veth: what the veth carries when shared memory does not"
across plain plain
[ "$carried" -ge $((2 * value_size)) ] || fail "the veth carried only $carried bytes of a plain round trip"
stop redis
log "engines: ok"
