# Helpers shared by the benchmark driver (run.sh), its workloads (workloads/*.sh) and the demo.
#
# A workload is a file in workloads/ that sets
#   WL_TITLE            what it measures
#   WL_UNIT, WL_BETTER  the unit of its figure, and whether lower or higher is better
#   WL_MODES            the modes it runs (see mode_name), its reference first: ratios are
#                       against it
#   WL_CASES            array of case keys (a message size, a connection count...)
# and defines
#   wl_server MODE      start the server for MODE with `serve` (nothing to do: return 0)
#   wl_client MODE CASE run one repetition with `client` and print one number, the figure,
#                       then optionally lines worth keeping beside it (the results list the
#                       last repetition's under the table); or `-` when MODE has nothing to
#                       measure in CASE (no row, no figure)
#   wl_label CASE       optional: the case as the table shows it (default: the key)
#   wl_lower CASE       optional, for a workload whose cases differ in which way is better:
#                       succeeds when lower is better in CASE (the plot turns those over)
#   wl_setup            optional: makes what every mode needs before any server starts (and
#                       may add lines to WL_NOTES, listed under the results' table); fails,
#                       with SKIP_REASON saying why, when the workload cannot run here (it is
#                       skipped)
#   wl_teardown         optional: undoes wl_setup, on every way out once wl_setup ran
# and may set
#   WL_REF              the mode ratios are against (default tcp)
#   WL_TARGETS          array of "CASE MODE OP BOUND [REFMODE [REFCASE]]": the median of MODE in
#                       CASE divided by that of REFMODE (default tcp) in REFCASE (default CASE)
#                       must be OP (<= or >=) BOUND; REFMODE abs holds the median itself to
#                       BOUND, in the workload's unit; run.sh reports each as met or not
# Servers listen on $PORT (TCP modes) or $SOCK (unix mode); $MODE_DIR is the mode's private
# directory. Host modes (veth, region, region-bp; is_host) run the server in network namespace
# $HOST_NS_SERVER and the client in $HOST_NS_CLIENT, which the workload's wl_setup makes, joined
# by a veth; their usmc modes go through the region file $HOST_REGION (device ivshmem), each side
# with a runtime directory of its own ($MODE_DIR/rundir-server, -client), as kernels sharing an
# ivshmem region do. Modes "bare" and "bare-sleep" have no server: their client is bare_ring, the limit
# the others approach, spinning or sleeping. A mode that cannot start its server, or a repetition
# that prints no number, counts as failed; nothing a mode does stops the run.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
USMC_BUILD=${USMC_BUILD:-build}
case $USMC_BUILD in /*) ;; *) USMC_BUILD=$ROOT/$USMC_BUILD ;; esac
USMC=$USMC_BUILD/bin/usmc
BIN=$ROOT/build/bench
WL_DIR=$BENCH_DIR/workloads
BUSY_POLL_US=50
SECS=${BENCH_SECONDS:-5}

# Server and client on different cores: a transport is measured, not the scheduler.
if [ "$(nproc)" -ge 2 ]; then
    SERVER_CPU=0 CLIENT_CPU=1
else
    SERVER_CPU=0 CLIENT_CPU=0
fi

declare -A _server_pid=() _mode_port=()
WL_NAME=
_set_up=
_client_pid=
_ports=()

say() { printf '%s\n' "$*" >&2; }

# better: which way the current workload's figures improve, as a phrase
better() {
    case $WL_BETTER in lower | higher) echo "$WL_BETTER is better" ;; *) echo "$WL_BETTER" ;; esac
}

# load_workload NAME: forgets the previous workload and reads NAME's definition: WL_TITLE,
# WL_UNIT, WL_BETTER, WL_MODES, WL_CASES, WL_TARGETS, and WL_NEEDS, the programs it runs that
# are not part of usmc, each as PROGRAM:DEBIAN-PACKAGE.
load_workload() {
    unset -f wl_server wl_client wl_label wl_lower wl_setup wl_teardown
    unset WL_TITLE WL_UNIT WL_BETTER WL_MODES WL_CASES WL_NEEDS
    WL_TARGETS=() WL_NOTES=() WL_REF=tcp
    WL_NAME=$1
    . "$WL_DIR/$1.sh"
    declare -F wl_label >/dev/null || wl_label() { echo "$1"; }
}

# missing_programs: those of WL_NEEDS that are not on PATH, as PROGRAM:PACKAGE words
missing_programs() {
    local p
    for p in ${WL_NEEDS:-}; do
        command -v "${p%%:*}" >/dev/null || printf '%s ' "$p"
    done
}

mode_name() {
    case $1 in
        tcp) echo "TCP" ;;
        unix) echo "Unix socket" ;;
        usmc) echo "usmc" ;;
        usmc-bp) echo "usmc, busy-poll ${BUSY_POLL_US} µs" ;;
        usmc-sleep) echo "usmc, sleeping (no busy-poll)" ;;
        usmc-allshort) echo "usmc, short connections accelerated too" ;;
        fallback) echo "usmc client, plain server" ;;
        fallback-server) echo "plain client, usmc server" ;;
        bare) echo "bare memfd ring" ;;
        bare-sleep) echo "bare memfd ring, sleeping" ;;
        erm) echo "usmc ERM, shared memory" ;;
        erm-vm) echo "usmc ERM, the application's memory" ;;
        memcpy) echo "bare memcpy" ;;
        veth) echo "TCP over veth, between namespaces" ;;
        region) echo "usmc through the region" ;;
        region-bp) echo "usmc through the region, busy-poll ${BUSY_POLL_US} µs" ;;
        *) echo "$1" ;;
    esac
}

# _launcher MODE SIDE: sets _cmd to the prefix that runs SIDE (server or client) of MODE pinned to
# its core, under usmc where MODE says so.
_launcher() {
    local mode=$1 side=$2 cpu=$SERVER_CPU
    [ "$side" = client ] && cpu=$CLIENT_CPU
    # bare_ring pins its two processes itself, one on each core
    is_bare "$mode" && cpu=$SERVER_CPU,$CLIENT_CPU
    _cmd=(taskset -c "$cpu")
    case $mode:$side in
        usmc:* | erm:* | erm-vm:* | fallback:client | fallback-server:server) _cmd+=("$USMC" run --rundir "$RD" --) ;;
        usmc-bp:*) _cmd+=(env "USMC_BUSY_POLL_US=$BUSY_POLL_US" "$USMC" run --rundir "$RD" --) ;;
        usmc-sleep:*) _cmd+=(env USMC_BUSY_POLL_US=0 "$USMC" run --rundir "$RD" --) ;;
        usmc-allshort:*) _cmd+=(env USMC_SHORT_CONN=0 "$USMC" run --rundir "$RD" --) ;;
        region:*) _cmd+=("$USMC" run --device "ivshmem:$HOST_REGION" --rundir "$MODE_DIR/rundir-$side" --) ;;
        region-bp:*) _cmd+=(env "USMC_BUSY_POLL_US=$BUSY_POLL_US" "$USMC" run --device "ivshmem:$HOST_REGION" --rundir "$MODE_DIR/rundir-$side" --) ;;
    esac
    if is_host "$mode"; then
        [ "$side" = server ] && _cmd=(ip netns exec "$HOST_NS_SERVER" "${_cmd[@]}")
        [ "$side" = client ] && _cmd=(ip netns exec "$HOST_NS_CLIENT" "${_cmd[@]}")
    fi
}

# is_host MODE: MODE runs between two network namespaces, as between two kernels
is_host() { case $1 in veth | region | region-bp) return 0 ;; esac; return 1; }

# pick_port: a TCP port nobody uses and this run has not handed out, below the ephemeral range so
# that no client connection can take it meanwhile; in PORT.
pick_port() {
    local ephemeral
    read -r ephemeral _ </proc/sys/net/ipv4/ip_local_port_range
    while :; do
        PORT=$((10000 + RANDOM % (ephemeral - 10000)))
        case " ${_ports[*]} " in *" $PORT "*) continue ;; esac
        if [ -z "$(ss -Htan "( sport = :$PORT )")" ]; then
            _ports+=("$PORT")
            return
        fi
    done
}

# use_mode MODE: selects MODE's port, socket, runtime directory and private directory for the
# current workload ($WL_NAME), creating them on first use: every workload's usmc counters are
# its own, unless SHARED_RUNDIR names one runtime directory for all.
use_mode() {
    MODE=$1
    MODE_DIR=$WORK/$WL_NAME/$MODE
    SOCK=$MODE_DIR/sock
    if [ ! -d "$MODE_DIR" ]; then
        mkdir -p "$MODE_DIR"
        mkdir -m 700 "$MODE_DIR/rundir"
        is_host "$MODE" && mkdir -m 700 "$MODE_DIR/rundir-server" "$MODE_DIR/rundir-client"
        pick_port
        _mode_port[$WL_NAME/$MODE]=$PORT
    fi
    RD=${SHARED_RUNDIR:-$MODE_DIR/rundir}
    PORT=${_mode_port[$WL_NAME/$MODE]}
}

# endpoint: the address of the current mode's server, as msgrate and connrate take it
endpoint() {
    if [ "$MODE" = unix ]; then echo "unix:$SOCK"; else echo "tcp:127.0.0.1:$PORT"; fi
}

# _listening PORT: the current mode's server listens (on PORT, or on its socket in unix mode),
# in its network namespace
_listening() {
    if [ "$MODE" = unix ]; then
        [ -n "$(ss -Hxln "src $SOCK")" ]
    elif is_host "$MODE"; then
        [ -n "$(ip netns exec "$HOST_NS_SERVER" ss -Htln "( sport = :$1 )")" ]
    else
        [ -n "$(ss -Htln "( sport = :$1 )")" ]
    fi
}

# serve CMD...: starts the current mode's server in the background (output in $MODE_DIR/server.log)
# and returns 0 once it listens, 1 if it died or never listened.
serve() {
    serve_as server "$PORT" "$@"
}

# serve_as NAME PORT CMD...: as serve, for one of several servers of the mode (a backend the
# measured server talks to), listening on PORT, its output in $MODE_DIR/NAME.log.
serve_as() {
    local name=$1 port=$2 key=$MODE/$1
    shift 2
    _launcher "$MODE" server
    # each launcher stage execs the next, so $! is the server itself
    "${_cmd[@]}" "$@" >"$MODE_DIR/$name.log" 2>&1 &
    _server_pid[$key]=$!
    for _ in $(seq 100); do
        kill -0 "${_server_pid[$key]}" 2>/dev/null || break
        _listening "$port" && return 0
        sleep 0.1
    done
    say "  $name for $MODE did not start: $*"
    tail -n 5 "$MODE_DIR/$name.log" | sed 's/^/    /' >&2
    return 1
}

# nginx_serve_as NAME ADDR PORT WORKERS [CONFIG]: nginx for the current mode serving a 1 KB file
# (1k.html) on ADDR:PORT with WORKERS workers (more than one: a master too), CONFIG added to its
# server block; started as serve_as NAME does, its files named after NAME.
nginx_serve_as() {
    local name=$1 addr=$2 port=$3 workers=$4
    mkdir -p "$MODE_DIR/www" "$MODE_DIR/tmp"
    head -c 1024 /dev/zero | tr '\0' u >"$MODE_DIR/www/1k.html"
    cat >"$MODE_DIR/$name.conf" <<CONF
daemon off;
master_process $([ "$workers" -gt 1 ] && echo on || echo off);
worker_processes $workers;
user root;
worker_rlimit_nofile 8192;
pid $MODE_DIR/$name.pid;
error_log $MODE_DIR/$name.error.log warn;
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
        listen $addr:$port backlog=4096;
        root $MODE_DIR/www;
        ${5-}
    }
}
CONF
    serve_as "$name" "$port" nginx -p "$MODE_DIR" -c "$MODE_DIR/$name.conf" -e "$MODE_DIR/$name.error.log"
}

# _reap PID: terminates a process, forcing it after a grace period, and waits for it.
_reap() {
    kill -TERM "$1" 2>/dev/null || return 0
    for _ in $(seq 50); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}

stop_servers() {
    local mode
    for mode in "${!_server_pid[@]}"; do
        _reap "${_server_pid[$mode]}"
    done
    _server_pid=()
}

# client CMD...: one client run of the current mode, bounded in time (a hung transport is a
# failure, not the end of the benchmark). Its output, stdout and stderr, is left in $CLIENT_OUT.
# Runs in the background and waited for, so that an interrupted driver stops it at once.
client() {
    _launcher "$MODE" client
    timeout -k 5 $((SECS * 4 + 60)) "${_cmd[@]}" "$@" >"$CLIENT_OUT" 2>&1 &
    _client_pid=$!
    local rc=0
    wait "$_client_pid" || rc=$?
    _client_pid=
    return "$rc"
}

# start_servers MODE...: every mode's server; ALIVE[MODE] is 1 for those that started
declare -A ALIVE=()
start_servers() {
    local mode
    ALIVE=()
    for mode; do
        use_mode "$mode"
        if is_bare "$mode" || wl_server "$mode"; then ALIVE[$mode]=1; else ALIVE[$mode]=0; fi
    done
}

# measure MODE CASE: one repetition; FIGURE is its number, or FAILED (failure_detail says why),
# and NOTES what the client printed after it.
# Sets a variable rather than printing, so that it runs in this shell, where an interruption
# finds the client to stop.
measure() {
    FIGURE=FAILED NOTES=
    use_mode "$1"
    rm -f "$CLIENT_OUT" "$WORK/figure.err"
    [ "${ALIVE[$1]-0}" = 1 ] || return 0
    wl_client "$1" "$2" >"$WORK/figure" 2>"$WORK/figure.err"
    FIGURE=$(head -n 1 "$WORK/figure")
    NOTES=$(tail -n +2 "$WORK/figure")
    [ "$FIGURE" = - ] || is_number "$FIGURE" || FIGURE=FAILED
}

# failure_detail: the last words of the client that measure found failing, indented
failure_detail() {
    tail -n 3 "$CLIENT_OUT" "$WORK/figure.err" 2>/dev/null | grep -v '^==>' | grep . | sed 's/^/    /'
}

# cleanup: every client and server this shell started is stopped, and what a workload's
# wl_setup made undone, whatever ended it.
bench_cleanup() {
    [ -n "$_client_pid" ] && _reap "$_client_pid"
    stop_servers
    teardown_workload
    [ -n "${WORK-}" ] && rm -rf "$WORK"
}

# setup_workload: the current workload's wl_setup, if it has one; on failure, SKIP_REASON says why
setup_workload() {
    declare -F wl_setup >/dev/null || return 0
    _set_up=$WL_NAME SKIP_REASON=
    wl_setup && return 0
    teardown_workload
    return 1
}

# teardown_workload: undoes setup_workload, once
teardown_workload() {
    [ -n "$_set_up" ] || return 0
    [ "$_set_up" = "$WL_NAME" ] && declare -F wl_teardown >/dev/null && wl_teardown
    _set_up=
}

# bench_begin: private work directory, cleanup on every way out.
bench_begin() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/usmc-bench.XXXXXX")
    CLIENT_OUT=$WORK/client.out
    trap bench_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# build_programs: the benchmark's own C programs, into build/bench/, rebuilt when a source or a
# header they use (bench/*.h, the ring copy of src/core/streamcopy.h, usmc's CRC32C) changed. crc
# takes ISA-L where its header is.
build_programs() {
    local prog srcs flags
    mkdir -p "$BIN"
    for prog in msgrate connrate idle stream bare_ring crc erm; do
        srcs=("$BENCH_DIR/$prog.c") flags=()
        case $prog in
            bare_ring) ;;
            crc)
                srcs+=("$ROOT/src/util/crc32c.c")
                printf '#include <isa-l/crc.h>\n' | ${CC:-cc} -E -x c - >/dev/null 2>&1 &&
                    flags=(-DUSMC_ISAL -lisal)
                ;;
            erm) srcs+=("$BENCH_DIR/endpoint.c") flags=(-I"$ROOT/include" -ldl) ;;
            *) srcs+=("$BENCH_DIR/endpoint.c") ;;
        esac
        if [ ! -x "$BIN/$prog" ] || [ -n "$(find "${srcs[@]}" "$BENCH_DIR"/*.h "$ROOT/src/core/streamcopy.h" "$ROOT/src/util/crc32c.h" "$ROOT/include/usmc/erm.h" -newer "$BIN/$prog")" ]; then
            ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Wshadow -Werror -pthread -o "$BIN/$prog" \
                "${srcs[@]}" "${flags[@]}" || return 1
        fi
    done
}

is_number() { [[ $1 =~ ^[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$ ]]; }

# summarize: numbers on stdin, one per line, "FAILED" for a failed run; prints
# "MEDIAN MIN MAX OK TOTAL", or "FAILED - - 0 TOTAL" when no run succeeded.
summarize() {
    awk '$1 == "FAILED" { n++; next } { v[++ok] = $1 + 0; n++ }
        END {
            if (!ok) { printf "FAILED - - 0 %d\n", n; exit }
            for (i = 2; i <= ok; i++)
                for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
            m = (ok % 2) ? v[(ok + 1) / 2] : (v[ok / 2] + v[ok / 2 + 1]) / 2
            printf "%.10g %.10g %.10g %d %d\n", m, v[1], v[ok], ok, n
        }'
}

# fmt NUMBER: three significant digits at least, no exponent
fmt() {
    awk -v x="$1" 'BEGIN {
        if (x == "FAILED" || x == "-" || x == "") { print x; exit }
        a = x < 0 ? -x : x
        if (a >= 100) printf "%.0f\n", x; else if (a >= 10) printf "%.1f\n", x
        else if (a >= 1) printf "%.2f\n", x; else printf "%.3f\n", x
    }'
}

# ratio A B: A / B with two decimals, or "—" when either is missing
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (!(a + 0 > 0 && b + 0 > 0 && a != "FAILED" && b != "FAILED")) { print "—"; exit }
        r = a / b
        if (r >= 10) printf "%.1f ×\n", r; else if (r >= 0.1) printf "%.2f ×\n", r; else printf "%.2g ×\n", r
    }'
}

# usmc_counter RUNDIR NAME: one counter of `usmc stats`, 0 when absent or unreadable
usmc_counter() {
    "$USMC" stats --rundir "$1" 2>/dev/null | awk -v n="$2" '$1 == n { v = $2 } END { print v + 0 }'
}

is_bare() { [ "$1" = bare ] || [ "$1" = bare-sleep ]; }

# bare_client MODE latency|throughput SIZE: one bare_ring run of bare or bare-sleep, measured as
# sockperf measures
bare_client() {
    local sleep=()
    [ "$1" = bare-sleep ] && sleep=(sleep)
    client "$BIN/bare_ring" "$2" "$3" "$SECS" "${sleep[@]}" && cat "$CLIENT_OUT"
}

# sockperf_server: the server both sockperf workloads and the demo measure against
sockperf_server() {
    serve sockperf server --tcp -i 127.0.0.1 -p "$PORT"
}
