# Helpers shared by the real-application scenarios; each scenario script sources this file.
#
# A scenario calls app_begin, starts servers with `serve`, drives them with `client`, checks the
# application's own verdict, then proves from `usmc stats` that shared memory carried the bytes
# (expect_accelerated) or that the connection stayed plain TCP (expect_fallback).
#
# APPS_MODE=plain runs the same scenarios without usmc and checks only the applications' verdicts,
# which keeps the scenarios themselves honest independently of the library.
# Exit status of a scenario: 0 pass, 1 fail, 77 skipped.

set -euo pipefail

APPS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$APPS_DIR/../.." && pwd)
USMC_BUILD=${USMC_BUILD:-build}
case $USMC_BUILD in /*) ;; *) USMC_BUILD=$ROOT/$USMC_BUILD ;; esac
USMC=$USMC_BUILD/bin/usmc
APPS_MODE=${APPS_MODE:-usmc}
SKIP_STATUS=77
# A client that outlives this is hung, not slow: every client here transfers for a few seconds.
CLIENT_TIMEOUT=${APPS_CLIENT_TIMEOUT:-120}

# Server and client on different cores, so a busy-polling peer can never starve the other.
if [ "$(nproc)" -ge 2 ]; then
    SERVER_CPU=0 CLIENT_CPU=1
else
    SERVER_CPU=0 CLIENT_CPU=0
fi

declare -A _server_pid=() _server_job=() _server_log=() _container_pid=()
_netns=()
. "$ROOT/tests/lib/ports.sh"
# The scenarios count handoffs and accelerated connections of programs that make short ones by
# the hundred: the short-connection policy (tests/policy) would keep most of those on TCP.
export USMC_SHORT_CONN=${USMC_SHORT_CONN:-0}

log() { printf '%s\n' "$*"; }
# On stderr, so that a failure inside a command substitution is still reported.
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
skip() { printf 'SKIP: %s\n' "$*" >&2; exit "$SKIP_STATUS"; }
accelerating() { [ "$APPS_MODE" = usmc ]; }

_cleanup() {
    local rc=$? name
    trap - EXIT
    for name in "${!_server_pid[@]}"; do
        kill -TERM "${_server_pid[$name]}" 2>/dev/null || true
    done
    for name in "${!_server_pid[@]}"; do
        _reap "${_server_pid[$name]}"
    done
    # Killing a container's first process kills every process of its PID namespace.
    for name in "${!_container_pid[@]}"; do
        kill -KILL "${_container_pid[$name]}" 2>/dev/null || true
        _reap "${_container_pid[$name]}"
    done
    if [ "$rc" -ne 0 ] && [ "$rc" -ne "$SKIP_STATUS" ]; then
        for name in "${!_server_log[@]}"; do
            log "--- last lines of server $name (${_server_log[$name]##*/})"
            tail -n 15 "${_server_log[$name]}" 2>/dev/null || true
        done
        if accelerating && [ -x "$USMC" ] && [ -d "${RD:-}" ]; then
            log "--- usmc stats"
            "$USMC" stats --rundir "$RD" 2>&1 || true
        fi
    fi
    # Deleting a namespace also deletes the veth ends inside it.
    for name in "${_netns[@]}"; do
        ip netns del "$name" 2>/dev/null || true
    done
    rm -rf "${WORK:?}"
    exit "$rc"
}

# Waits for a process to exit, forcing it after a grace period so cleanup never hangs.
_reap() {
    local pid=$1
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# app_begin NAME: fresh work directory and private rundir, cleanup on every way out.
app_begin() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/usmc-app-$1.XXXXXX")
    RD=$WORK/rundir
    mkdir -m 700 "$RD"
    trap _cleanup EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    if accelerating && [ ! -x "$USMC" ]; then
        fail "$USMC is not built"
    fi
    log "scenario $1: mode $APPS_MODE, work dir $WORK"
}

need() {
    local tool
    for tool; do
        command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/install-deps.sh)"
    done
}


# Servers and clients run in the container named by CONTAINER (see `container`), else in the
# network namespace named by NETNS, when one is set, e.g.
#   NETNS=left serve ...

# The runtime directory as a container sees it: the scenario's, bind-mounted there.
CONTAINER_RUNDIR=/run/usmc

# _place: sets _cmd to the command prefix that runs a program in $CONTAINER, as `docker exec`
# does (in every namespace of the container's first process), or in $NETNS.
_place() {
    _cmd=()
    if [ -n "${CONTAINER-}" ]; then
        _cmd+=(nsenter --target "${_container_pid[$CONTAINER]:?unknown container $CONTAINER}" --all)
    elif [ -n "${NETNS-}" ]; then
        _cmd+=(ip netns exec "$NETNS")
    fi
}

# inside CMD...: runs CMD where the scenario places programs, without usmc.
inside() {
    _place
    "${_cmd[@]}" "$@"
}

# rundir_here: the runtime directory as a program placed there names it.
rundir_here() {
    if [ -n "${CONTAINER-}" ]; then
        echo "$CONTAINER_RUNDIR"
    else
        echo "$RD"
    fi
}

# _launcher MODE CPU: sets _cmd to the command prefix that runs a program in its place, pinned
# to CPU, under usmc when MODE is acc (and the suite is not in plain mode).
_launcher() {
    _place
    case $1 in
        acc | plain) ;;
        *) fail "launch mode must be acc or plain, not '$1'" ;;
    esac
    _cmd+=(taskset -c "$2")
    if [ "$1" = acc ] && accelerating; then
        _cmd+=("$USMC" run --rundir "$(rundir_here)" --)
    fi
}

# _spawn NAME MODE CPU CMD...: starts a program in the background, its output in $WORK/NAME.log;
# stop NAME ends it. Every launcher stage execs the next, so $! is the program itself, but for
# nsenter, which forks to enter a PID namespace: there the program is its child.
_spawn() {
    local name=$1 job
    _launcher "$2" "$3"
    shift 3
    _server_log[$name]=$WORK/$name.log
    "${_cmd[@]}" "$@" >"${_server_log[$name]}" 2>&1 &
    job=$!
    _server_job[$name]=$job
    _server_pid[$name]=$job
    if [ -n "${CONTAINER-}" ]; then
        _server_pid[$name]=$(_child_of "$job") || fail "$name did not start: $(cat "${_server_log[$name]}")"
    fi
}

# _child_of PID: the one child of PID, once it has forked it.
_child_of() {
    local child
    for _ in $(seq 100); do
        child=$(pgrep -P "$1") && { echo "$child"; return; }
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

# serve NAME PORT MODE CMD...: starts a server in the background (its output in $WORK/NAME.log)
# and returns once it listens on PORT.
serve() {
    local name=$1 port=$2
    _spawn "$name" "$3" "$SERVER_CPU" "${@:4}"
    for _ in $(seq 200); do
        kill -0 "${_server_pid[$name]}" 2>/dev/null || fail "server $name exited before listening"
        if [ -n "$(inside ss -Htln "( sport = :$port )")" ]; then
            log "server $name listening on port $port (pid ${_server_pid[$name]})"
            return
        fi
        sleep 0.1
    done
    fail "server $name does not listen on port $port"
}

# hold NAME MODE LINE CMD...: starts a client in the background that keeps its connection open,
# and returns once its output has the line LINE; stop NAME ends it.
hold() {
    local name=$1 line=$3
    _spawn "$name" "$2" "$CLIENT_CPU" "${@:4}"
    for _ in $(seq 400); do
        grep -qxF -- "$line" "${_server_log[$name]}" && return
        kill -0 "${_server_pid[$name]}" 2>/dev/null ||
            fail "client $name exited: $(cat "${_server_log[$name]}")"
        sleep 0.05
    done
    fail "client $name did not print '$line'"
}

# stop NAME: terminates a server and waits for it, so its statistics are final.
stop() {
    local pid=${_server_pid[$1]:?unknown server $1}
    kill -TERM "$pid" 2>/dev/null || true
    _reap "$pid"
    wait "${_server_job[$1]}" 2>/dev/null || true
    unset "_server_pid[$1]" "_server_job[$1]"
}

# server_done NAME: waits for a server that exits by itself and returns its exit status.
server_done() {
    local pid=${_server_pid[$1]:?unknown server $1} rc=0
    for _ in $(seq $((CLIENT_TIMEOUT * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        fail "server $1 did not exit"
    fi
    wait "${_server_job[$1]}" || rc=$?
    unset "_server_pid[$1]" "_server_job[$1]"
    return "$rc"
}

# client MODE CMD...: runs a client in the foreground, bounded by CLIENT_TIMEOUT. The client
# stays in the scenario's process group, so a runner that times the scenario out stops it too.
client() {
    _launcher "$1" "$CLIENT_CPU"
    shift
    timeout --foreground -k 5 "$CLIENT_TIMEOUT" "${_cmd[@]}" "$@"
}

random_file() {
    head -c "$2" /dev/urandom >"$1"
}

# binary_file PATH SIZE: every byte value once (NUL, CR, LF...), then random bytes up to SIZE.
binary_file() {
    local escapes
    escapes=$(printf '\\0%03o' $(seq 0 255))
    {
        printf '%b' "$escapes"
        head -c $(($2 - 256)) /dev/urandom
    } >"$1"
}

sha256() {
    sha256sum <"$1" | cut -d' ' -f1
}

same_content() {
    local want got
    want=$(sha256 "$1") got=$(sha256 "$2")
    [ "$want" = "$got" ] || fail "$2 differs from $1 (sha256 $got, expected $want)"
    log "$2: sha256 matches ($(stat -c %s "$2") bytes)"
}

stats() {
    "$USMC" stats --rundir "$RD" || fail "usmc stats --rundir $RD failed"
}

stat_value() {
    local value
    value=$(stats | awk -v name="$1" '$1 == name { v = $2 } END { print (v == "" ? 0 : v) }')
    [[ $value =~ ^[0-9]+$ ]] || fail "usmc stats: $1 is '$value'"
    echo "$value"
}

# expect_accelerated BYTES: shared memory carried at least BYTES in the scenario's rundir, and
# both the connecting and the accepting side counted accelerated connections of their own.
# The last receiver may still be draining its ring when its peer has finished, so the byte
# counters get a bounded time to reach BYTES before the verdict.
expect_accelerated() {
    local want=$1 sent recv conns side
    accelerating || { log "plain mode: acceleration not checked"; return 0; }
    for _ in $(seq 100); do
        recv=$(stat_value bytes_recv_shm)
        [ "$recv" -ge "$want" ] && break
        sleep 0.1
    done
    conns=$(stat_value conn_accelerated)
    sent=$(stat_value bytes_sent_shm)
    log "stats: conn_accelerated=$conns bytes_sent_shm=$sent bytes_recv_shm=$recv (expected >= $want)"
    [ "$conns" -gt 0 ] || fail "no connection was accelerated"
    for side in client server; do
        conns=$(stat_value ${side}_conn_accelerated)
        log "stats: ${side}_conn_accelerated=$conns"
        [ "$conns" -gt 0 ] || fail "no connection was accelerated on the $side side"
    done
    [ "$sent" -ge "$want" ] || fail "bytes_sent_shm $sent < $want"
    [ "$recv" -ge "$want" ] || fail "bytes_recv_shm $recv < $want"
}

# expect_fallback: every connection in the scenario's rundir stayed plain TCP, with a reason.
expect_fallback() {
    local conns fallbacks reasons
    accelerating || { log "plain mode: fallback not checked"; return 0; }
    conns=$(stat_value conn_accelerated)
    fallbacks=$(stat_value conn_fallback)
    reasons=$(stats | awk '$1 ~ /^fallback_/ && $2 > 0 { printf "%s=%s ", $1, $2 }')
    log "stats: conn_accelerated=$conns conn_fallback=$fallbacks reasons: ${reasons:-none}"
    [ "$conns" -eq 0 ] || fail "$conns connection(s) accelerated, expected plain TCP"
    [ "$fallbacks" -gt 0 ] || fail "no fallback counted"
    [ -n "$reasons" ] || fail "no fallback reason counted"
}

# fresh_rundir: a new trust domain with zeroed counters, for the next phase of a scenario.
fresh_rundir() {
    RD=$(mktemp -d "$WORK/rundir.XXXXXX")
}

# new_netns NAME: creates a namespace with loopback up, deleted again on exit.
new_netns() {
    ip netns add "$1" || skip "cannot create network namespaces (needs root)"
    _netns+=("$1")
    ip -n "$1" link set lo up
}

# container NAME [--pod OTHER] [UNSHARE_OPTION...]: a container as Docker, Podman and
# Kubernetes make one: its own mount, PID, IPC, UTS and network namespaces, a private /tmp and
# /run, and the scenario's runtime directory bind-mounted at $CONTAINER_RUNDIR. Its network
# namespace is named NAME (for veth) and has loopback up; with --pod it shares OTHER's instead,
# as the containers of one Kubernetes pod do. UNSHARE_OPTIONs add namespaces, such as
# `--user --map-root-user`. Its first process only waits, as a pod's pause container does;
# CONTAINER=NAME places programs in it. Stopped, with all it runs, when the scenario ends.
container() {
    local name=$1 join=() own=(--net) job init
    shift
    if [ "${1-}" = --pod ]; then
        join=(nsenter --net="/run/netns/$2") own=()
        shift 2
    fi
    # The bind mounts come first: the runtime directory and the checkout (the build the
    # container runs) may be under the /tmp they then hide; the checkout goes back to its path.
    "${join[@]}" unshare --mount --pid --fork --ipc --uts --mount-proc "${own[@]}" "$@" sh -c '
        mount -t tmpfs tmpfs /run && mkdir "$1" /run/.checkout && mount --bind "$0" "$1" &&
            mount --bind "$2" /run/.checkout && mount -t tmpfs tmpfs /tmp &&
            { [ -d "$2" ] || { mkdir -p "$2" && mount --bind /run/.checkout "$2"; }; } &&
            exec sleep infinity' "$RD" "$CONTAINER_RUNDIR" "$ROOT" \
        >"$WORK/container-$name.log" 2>&1 &
    job=$!
    init=$(_child_of "$job") || fail "container $name did not start: $(cat "$WORK/container-$name.log")"
    _container_pid[$name]=$init
    # Ready once its mounts are made and it waits.
    for _ in $(seq 100); do
        [ "$(cat "/proc/$init/comm" 2>/dev/null)" = sleep ] && break
        sleep 0.05
    done
    [ "$(cat "/proc/$init/comm" 2>/dev/null)" = sleep ] ||
        fail "container $name failed: $(cat "$WORK/container-$name.log")"
    if [ ${#own[@]} -gt 0 ]; then
        ip netns attach "$name" "$init" || fail "cannot name the network namespace of container $name"
        _netns+=("$name")
        ip -n "$name" link set lo up
    fi
    log "container $name: first process $init"
}

# ns_pid PID: the pid the process PID has in its own PID namespace.
ns_pid() {
    awk '$1 == "NSpid:" { print $NF }' "/proc/$1/status"
}

# veth NS_A DEV_A ADDR_A NS_B DEV_B ADDR_B: joins two namespaces with a veth pair whose ends are
# named DEV_A in NS_A and DEV_B in NS_B, with addresses as a.b.c.d/len.
veth() {
    ip link add "$2" netns "$1" type veth peer name "$5" netns "$4"
    ip -n "$1" addr add "$3" dev "$2"
    ip -n "$1" link set "$2" up
    ip -n "$4" addr add "$6" dev "$5"
    ip -n "$4" link set "$5" up
}

# start_nginx NAME ADDR PORT MODE [WORKERS]: nginx in the foreground, its prefix, config and
# logs under $WORK/NAME, serving $WORK/NAME/www. Without WORKERS, one process serves; with it,
# a master forks WORKERS workers, which drop privileges to nobody as they do in production.
# NGINX_SERVER, when set, is more configuration for the server block.
start_nginx() {
    local prefix=$WORK/$1 processes='master_process off;
worker_processes 1;'
    if [ -n "${5-}" ]; then
        processes="worker_processes $5;"
        # The workers, as nobody, read the files they serve.
        chmod 711 "$WORK"
    fi
    mkdir -p "$prefix/www" "$prefix/tmp"
    cat >"$prefix/nginx.conf" <<CONF
daemon off;
$processes
pid $prefix/nginx.pid;
error_log $prefix/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    keepalive_requests 1000000;
    client_body_temp_path $prefix/tmp/body;
    proxy_temp_path $prefix/tmp/proxy;
    fastcgi_temp_path $prefix/tmp/fastcgi;
    uwsgi_temp_path $prefix/tmp/uwsgi;
    scgi_temp_path $prefix/tmp/scgi;
    server {
        listen $2:$3;
        root $prefix/www;
        ${NGINX_SERVER-}
    }
}
CONF
    serve "$1" "$3" "$4" nginx -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log"
}

# run_wrk NAME URL FILE ARGS...: wrk's verdict is requests completed, every one answered 200
# with FILE as its body, and no socket errors. WRK_MODE=plain runs it without usmc.
run_wrk() {
    local name=$1 url=$2 file=$3 out=$WORK/wrk-$1.log requests
    shift 3
    client "${WRK_MODE:-acc}" wrk -t1 -c50 "$@" -s "$APPS_DIR/wrk_check.lua" "$url" -- "$file" >"$out" 2>&1 ||
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
    grep -q '^bodies checked: [1-9][0-9]* right, 0 wrong$' "$out" || fail "wrk $name got wrong bodies"
}

# nginx_clean NAME: nginx logged nothing worse than an error while it ran.
nginx_clean() {
    if grep -E '\[(alert|crit|emerg)\]' "$WORK/$1/error.log"; then
        fail "nginx $1 logged serious errors"
    fi
}

# sanitized: the library under test is a sanitizer build, whose runtime is preloaded into
# every program launched under it. Some programs do not start that way whatever the library
# does: curl deadlocks in setlocale() with nothing but libasan preloaded, and PostgreSQL's
# postmaster never listens.
sanitized() { accelerating && [[ $(basename "$USMC_BUILD") == build-*san ]]; }

# download MODE URL FILE: an HTTP success and a byte-exact copy of FILE: curl's, or Python's
# urllib where curl cannot run (sanitized).
download() {
    local out=$WORK/download.$RANDOM
    if sanitized && [ "$1" = acc ]; then
        client "$1" python3 -c 'import sys, urllib.request; open(sys.argv[2], "wb").write(urllib.request.urlopen(sys.argv[1]).read())' \
            "$2" "$out" || fail "fetching $2 failed"
    else
        client "$1" curl -sS --fail -o "$out" "$2" || fail "curl $2 failed"
    fi
    same_content "$3" "$out"
    rm -f "$out"
}

# start_redis NAME ADDR PORT MODE: a redis-server without persistence. Protected mode would
# refuse clients in another namespace; only namespaces of this scenario can reach ADDR.
start_redis() {
    local dir=$WORK
    # A container has a /tmp of its own.
    [ -z "${CONTAINER-}" ] || dir=/tmp
    serve "$1" "$3" "$4" redis-server --port "$3" --bind "$2" --save '' \
        --appendonly no --protected-mode no --dir "$dir" --daemonize no
}

# redis_roundtrip MODE ADDR PORT KEY SIZE: a binary value SET from a file and read back raw must
# come back byte-exact. redis-cli appends a newline to a raw reply, which is dropped before
# comparing.
redis_roundtrip() {
    local value back reply
    value=$WORK/$4.in back=$WORK/$4.out
    binary_file "$value" "$5"
    reply=$(client "$1" redis-cli -h "$2" -p "$3" -x SET "$4" <"$value" 2>&1) ||
        fail "SET $4 failed: $reply"
    [ "$reply" = OK ] || fail "SET $4 replied '$reply'"
    client "$1" redis-cli -h "$2" -p "$3" --raw GET "$4" | head -c -1 >"$back" ||
        fail "GET $4 failed"
    same_content "$value" "$back"
}
