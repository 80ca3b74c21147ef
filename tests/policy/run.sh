#!/usr/bin/env bash
# Policy: which sockets use shared memory. Clients, listeners and accepted connections that the
# rules exclude (by peer or local address, IPv4 and IPv6, port, process name, IPPROTO_SMC) fall
# back to plain TCP with the reason `policy`, byte-exact, and the others are accelerated; a bad
# policy or setting, or a runtime directory that cannot be trusted, stops `usmc run` before the
# program starts, and makes the library step aside with one message. USMC_BUILD selects the build
# (default: build).
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
. tests/lib/echo.sh
. tests/lib/sanitizer.sh
build=${USMC_BUILD:-build}
case $build in /*) ;; *) build=$PWD/$build ;; esac
USMC=$build/bin/usmc
ECHO=$WORK/smc_echo
BYTES=300000

# shellcheck disable=SC2046 # a list of flags
cc -std=c11 -Wall -Wextra -Werror $(san_cflags "$build") -Iinclude examples/smc_echo.c \
    -L"$build/lib" -Wl,-rpath,"$build/lib" -lusmc -o "$ECHO" 2>"$WORK/cc.log"
check "the example builds against $build" '[ -x "$ECHO" ]' "$WORK/cc.log"

# pair NAME SERVER_RULES CLIENT_RULES SERVER_ADDR CLIENT_ADDR [tcp]: both ends under usmc run,
# each with its rules (a string of usmc run options); the echo must be exact. Leaves the rundir
# in $rd.
pair() {
    local out
    rd=$(fresh_rundir)
    eval "SERVER_RUN=(\"\$USMC\" run $2 --) CLIENT_RUN=(\"\$USMC\" run $3 --)"
    out=$(echo_pair "$rd" "$4" "$5" "$BYTES" "${6:-tcp}")
    echo "$out" >"$WORK/out.log"
    check "$1: echo exact" '[ "$out" = "ok $BYTES" ]' "$WORK/out.log"
}

# counters NAME ACCELERATED POLICY OTHER: conn_accelerated, fallback_policy and the other
# fallbacks of the last pair.
counters() {
    local acc pol all want="$2 $3 $4"
    "$USMC" stats --rundir "$rd" >"$WORK/stats.log"
    acc=$(stat_of "$rd" conn_accelerated) pol=$(stat_of "$rd" fallback_policy)
    all=$(stat_of "$rd" conn_fallback)
    check "$1: accelerated $2, policy fallbacks $3, others $4" \
        '[ "$acc $pol $((all - pol))" = "$want" ]' "$WORK/stats.log"
}

pair "no rules" "" "" 127.0.0.2 127.0.0.2
counters "no rules" 2 0 0
check "no rules: shared memory carried the bytes" \
    '[ "$(stat_of "$rd" bytes_recv_shm)" -ge $((2 * BYTES)) ]' "$WORK/stats.log"

pair "client excludes its peer" "" "--rule 'exclude peer 127.0.0.0/30'" 127.0.0.2 127.0.0.2
counters "client excludes its peer" 0 1 1
pair "client's rule for another peer" "" "--rule 'exclude peer 127.0.0.4/30'" 127.0.0.2 127.0.0.2
counters "client's rule for another peer" 2 0 0

pair "client excludes its own address" "" "--rule 'exclude local 127.0.0.1'" 0.0.0.0 127.0.0.1
counters "client excludes its own address" 0 1 1

port=$(pick_port)
ECHO_PORT=$port pair "listener excluded by port" "--rule 'exclude port $port'" "" \
    127.0.0.1 127.0.0.1
counters "listener excluded by port" 0 1 1
check "listener excluded by port: not registered, its client finds no usmc" \
    '[ "$(stat_of "$rd" fallback_peer_not_usmc)" = 1 ]'


# The server learns the peer only at accept(): it declines the client's proposal, and the client
# counts the server's reason.
pair "server declines an IPv6 peer" "--rule 'exclude peer ::1/128'" "" :: ::1
counters "server declines an IPv6 peer" 0 2 0
pair "server admits another IPv6 peer" "--rule 'exclude peer fe80::/10'" "" :: ::1
counters "server admits another IPv6 peer" 2 0 0
pair "server declines an IPv4-mapped peer" "--rule 'exclude peer 127.0.0.0/8'" "" :: 127.0.0.1
counters "server declines an IPv4-mapped peer" 0 2 0
pair "wildcard server excludes the address reached" "--rule 'exclude local 127.0.0.1'" "" \
    0.0.0.0 127.0.0.1
counters "wildcard server excludes the address reached" 0 2 0
pair "server bound to an excluded address" "--rule 'exclude local 127.0.0.0/30'" "" \
    127.0.0.3 127.0.0.3
counters "server bound to an excluded address" 0 1 1

pair "client excluded by process name" "" "--rule 'exclude comm smc_ech?'" 127.0.0.1 127.0.0.1
counters "client excluded by process name" 0 1 1
pair "another process name" "" "--rule 'exclude comm nginx*'" 127.0.0.1 127.0.0.1
counters "another process name" 2 0 0

# First match wins, the default comes last.
pair "include before exclude" "" "--rule 'include peer 127.0.0.1' --rule 'default none'" \
    127.0.0.1 127.0.0.1
counters "include before exclude" 2 0 0
pair "exclude before include" "" "--rule 'exclude port 1-65535' --rule 'include peer 127.0.0.1'" \
    127.0.0.1 127.0.0.1
counters "exclude before include" 0 1 1

# smc-only under usmc run: plain TCP sockets are left alone (not even counted), IPPROTO_SMC
# ones are accelerated. An IPPROTO_SMC socket the policy refuses is counted.
pair "smc-only, plain sockets" "--rule smc-only" "--rule smc-only" 127.0.0.1 127.0.0.1
counters "smc-only, plain sockets" 0 0 0
pair "smc-only, IPPROTO_SMC sockets" "--rule smc-only" "--rule smc-only" 127.0.0.1 127.0.0.1 smc
counters "smc-only, IPPROTO_SMC sockets" 2 0 0

# A policy file, with comments and ';', and a default it sets.
cat >"$WORK/good.policy" <<'POLICY'
# test policy
exclude peer 10.0.0.0/8; exclude comm sshd

include port 1-65535 proto tcp
none
POLICY
pair "policy file" "--policy $WORK/good.policy" "--policy $WORK/good.policy" 127.0.0.1 127.0.0.1
counters "policy file" 2 0 0
pair "policy file, IPPROTO_SMC under default none" "--policy $WORK/good.policy" \
    "--policy $WORK/good.policy" 127.0.0.1 127.0.0.1 smc
counters "policy file, IPPROTO_SMC under default none" 0 2 0

# Settings: tiny rings still move every byte through shared memory.
pair "4K rings" "-r 4K -t 4K --busy-poll 0" "-r 4K -t 4096 --busy-poll 0" 127.0.0.1 127.0.0.1
counters "4K rings" 2 0 0
out=$("$USMC" run -r 1M -t 256K --busy-poll 50 -- sh -c \
    'echo "$USMC_RECV_RING_SIZE $USMC_SEND_RING_SIZE $USMC_BUSY_POLL_US"')
check "usmc run -r -t --busy-poll set the library's settings" '[ "$out" = "1M 256K 50" ]'

# rejected CHECK_NAME WANT_MESSAGE USMC_RUN_ARGS...: exit status 2, the message on stderr, and the
# program never ran.
rejected() {
    local name=$1 want=$2 rc
    shift 2
    rm -f "$WORK/ran"
    "$USMC" run "$@" -- touch "$WORK/ran" 2>"$WORK/err.log"
    rc=$?
    check "rejected: $name" \
        '[ "$rc" = 2 ] && [ ! -e "$WORK/ran" ] && grep -qF -- "$want" "$WORK/err.log"' "$WORK/err.log"
}
printf 'include port 80\n\nexclude peer 10.0.0.0/33\n' >"$WORK/bad.policy"
rejected "policy file, line named" "$WORK/bad.policy:3: exclude peer 10.0.0.0/33:" \
    --policy "$WORK/good.policy" --policy "$WORK/bad.policy"
rejected "missing policy file" "$WORK/none.policy: No such file" --policy "$WORK/none.policy"
rejected "bad --rule" "--rule: exclude pear 1.2.3.4: unknown condition 'pear'" \
    --rule 'exclude pear 1.2.3.4'
rejected "bad port range" "--rule: include port 90-80:" --rule 'include port 90-80'
rejected "ring size too large" "-r 128M: expected a size from 4K to 64M" -r 128M
rejected "ring size not a size" "--send-ring 1G: expected a size" --send-ring 1G
rejected "ring size too small" "-t 1K: expected a size" -t 1K
rejected "busy-poll not a number" "--busy-poll soon: expected microseconds" --busy-poll soon
rejected "unknown option" "unknown option --polcy" --polcy x
USMC_POLICY='include; exclude port x' rejected "USMC_POLICY" "USMC_POLICY:1: exclude port x:"
USMC_RING_SIZE=3G rejected "USMC_RING_SIZE" "USMC_RING_SIZE=3G"
"$USMC" run --rule 2>"$WORK/err.log"
rc=$?
check "rejected: option without its value" \
    '[ "$rc" = 2 ] && grep -qF -- "--rule needs a value" "$WORK/err.log"' "$WORK/err.log"

# The library on its own: a bad USMC_POLICY (here in a program linked with -lusmc, which no
# usmc run checked) gives one message per process, and the program runs on plain TCP.
rd=$(fresh_rundir)
SERVER_RUN=(env "USMC_POLICY=exclude port 99999") CLIENT_RUN=(env "USMC_POLICY=exclude port 99999")
out=$(echo_pair "$rd" 127.0.0.1 127.0.0.1 "$BYTES" smc)
echo "$out" >"$WORK/out.log"
check "library, bad USMC_POLICY: echo exact" '[ "$(grep -c "^ok $BYTES$" <<<"$out")" = 1 ]' \
    "$WORK/out.log"
check "library, bad USMC_POLICY: one message in each process" \
    '[ "$(grep -c "USMC_POLICY:1: exclude port 99999:" <<<"$out")" = 2 ]' "$WORK/out.log"
check "library, bad USMC_POLICY: usmc stepped aside" \
    '[ "$(stat_of "$rd" conn_accelerated)" = 0 ] && [ "$(stat_of "$rd" conn_fallback)" = 0 ]'

# The runtime directory: one the library could not trust is refused by usmc run, with why, before
# the program starts.
open_rd=$WORK/open-rundir
mkdir "$open_rd" && chmod 777 "$open_rd"
USMC_RUNDIR=$open_rd rejected "runtime directory writable by others" \
    "usmc run: runtime directory $open_rd is writable by others (mode 777)"
rejected "--rundir writable by others" "runtime directory $open_rd is writable by others" \
    --rundir "$open_rd"
ln -s "$(fresh_rundir)" "$WORK/link-rundir"
rejected "runtime directory a symbolic link" \
    "runtime directory $WORK/link-rundir is a symbolic link" --rundir "$WORK/link-rundir"
touch "$WORK/file-rundir"
rejected "runtime directory not a directory" \
    "runtime directory $WORK/file-rundir is not a directory" --rundir "$WORK/file-rundir"
rejected "runtime directory that cannot be created" \
    "runtime directory $WORK/none/rundir cannot be created: No such file or directory" \
    --rundir "$WORK/none/rundir"
# Only root can give a directory away. Root's usmc run leaves the owner to the program, which
# may become that user (runuser, su); another user's refuses it.
if [ "$(id -u)" -eq 0 ]; then
    other_rd=$(fresh_rundir)
    chown 65534 "$other_rd"
    chmod 711 "$WORK"
    setpriv --reuid=65533 --regid=65533 --clear-groups "$USMC" run --rundir "$other_rd" -- true \
        2>"$WORK/err.log"
    rc=$?
    check "rejected: runtime directory of another user" '[ "$rc" = 2 ] && grep -qF -- \
        "usmc run: runtime directory $other_rd belongs to uid 65534, neither to uid 65533 nor to root" \
        "$WORK/err.log"' "$WORK/err.log"
    out=$("$USMC" run --rundir "$other_rd" -- runuser -u nobody -- echo ran 2>&1)
    check "root's usmc run, another user's runtime directory: the program runs" '[ "$out" = ran ]'
fi
missing_rd=$WORK/missing-rundir
out=$("$USMC" run --rundir "$missing_rd" -- echo ran 2>&1)
check "usmc run: a missing runtime directory that can be made passes, and is left to the program" \
    '[ "$out" = ran ] && [ ! -e "$missing_rd" ]'
out=$(USMC_DISABLE=1 "$USMC" run --rundir "$open_rd" -- echo ran 2>&1)
check "USMC_DISABLE=1: no runtime directory to judge" '[ "$out" = ran ]'

# The library loaded without usmc run, preloaded or linked, says once per process why it does not
# use the directory, and the program runs on plain TCP; it says nothing when it has no socket to
# accelerate, or when the directory is good.
PRELOAD=(env LD_PRELOAD="$(san_preload "$build")")
# library_says NAME RUNDIR TIMES preloaded|linked|run [smc]: an echo pair on RUNDIR, both ends
# loading the library that way (run: under usmc run), must be exact, and each end must print TIMES
# lines REFUSED, and nothing else.
library_says() {
    local out said=$3
    case $4 in
    preloaded) SERVER_RUN=("${PRELOAD[@]}") CLIENT_RUN=("${PRELOAD[@]}") ;;
    linked) SERVER_RUN=() CLIENT_RUN=() ;;
    run) SERVER_RUN=("$USMC" run --) CLIENT_RUN=("$USMC" run --) ;;
    esac
    out=$(echo_pair "$2" 127.0.0.1 127.0.0.1 "$BYTES" "${5:-tcp}")
    echo "$out" >"$WORK/out.log"
    # The pair's output is the client's, then the server's, which is also left in server.out.
    check "$1: echo exact, $3 message(s) from each end, nothing else" \
        '[ "$(grep -c "^ok $BYTES$" <<<"$out")" = 1 ] && [ "$(grep -cvx "ok $BYTES" <<<"$out")" = $((2 * said)) ] &&
         [ "$(grep -cxF "$REFUSED" <<<"$out")" = $((2 * said)) ] &&
         [ "$(grep -cvx listening "$WORK/server.out")" = "$said" ]' "$WORK/out.log"
}
REFUSED="usmc: runtime directory $open_rd is writable by others (mode 777); running without acceleration"
library_says "preloaded, open runtime directory" "$open_rd" 1 preloaded
library_says "linked, IPPROTO_SMC, open runtime directory" "$open_rd" 1 linked smc
library_says "linked, plain sockets, open runtime directory" "$open_rd" 0 linked
check "open runtime directory: the library left nothing in it" '[ -z "$(ls -A "$open_rd")" ]'
rd=$(fresh_rundir)
library_says "preloaded, good runtime directory" "$rd" 0 preloaded
counters "preloaded, good runtime directory" 2 0 0
# Let through by root's usmc run, another user's directory is refused by the library of a
# program that stays root.
if [ -n "${other_rd-}" ]; then
    REFUSED="usmc: runtime directory $other_rd belongs to uid 65534, neither to uid 0 nor to root; running without acceleration"
    library_says "root's program, another user's runtime directory" "$other_rd" 1 run
fi

# The library reads a policy file named by USMC_POLICY.
rd=$(fresh_rundir)
echo "exclude peer 127.0.0.1" >"$WORK/lib.policy"
SERVER_RUN=(env "USMC_POLICY=$WORK/lib.policy") CLIENT_RUN=(env "USMC_POLICY=$WORK/lib.policy")
out=$(echo_pair "$rd" 127.0.0.1 127.0.0.1 "$BYTES" smc)
echo "$out" >"$WORK/out.log"
check "library, USMC_POLICY file: echo exact" '[ "$out" = "ok $BYTES" ]' "$WORK/out.log"
counters "library, USMC_POLICY file" 0 1 1

# Short connections (src/core/shortlived.h): a client whose connections to one server on its
# own core carry a few bytes and end keeps the later ones on TCP, counted as fallbacks with the
# reason short_lived, every byte exact; connections that carry more stay accelerated, and
# USMC_SHORT_CONN=0 accelerates them all. The suites of the transport turn the policy off
# (tests/lib/suite.sh): here it is on.
SHORT=$WORK/short_conns
# shellcheck disable=SC2046 # a list of flags
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror $(san_cflags "$build") tests/policy/short_conns.c \
    -o "$SHORT" 2>"$WORK/cc.log"
check "short_conns builds" '[ -x "$SHORT" ]' "$WORK/cc.log"
# short_run NAME COUNT BYTES [VAR=VALUE]: COUNT connections of BYTES each way under usmc run, in
# a fresh runtime directory left in $rd; they must all be exact.
short_run() {
    local out want="ok $2"
    rd=$(fresh_rundir)
    out=$(USMC_RUNDIR=$rd USMC_SHORT_CONN=1 timeout 60 env ${4:-} "$USMC" run -- "$SHORT" "$(pick_port)" "$2" "$3" 2>&1)
    echo "$out" >"$WORK/out.log"
    check "$1: every connection exact" '[ "$out" = "$want" ]' "$WORK/out.log"
    "$USMC" stats --rundir "$rd" >"$WORK/stats.log"
}
short_run "short connections" 100 100
check "short connections: later ones kept on TCP as short_lived, the first ones accelerated" \
    '[ "$(stat_of "$rd" client_fallback_short_lived)" -gt 0 ] &&
     [ "$(stat_of "$rd" client_conn_accelerated)" -ge 16 ] &&
     [ "$(stat_of "$rd" client_conn_fallback)" = "$(stat_of "$rd" client_fallback_short_lived)" ]' \
    "$WORK/stats.log"
short_run "connections of 64 KiB each way" 40 65536
check "connections of 64 KiB each way: all accelerated" \
    '[ "$(stat_of "$rd" client_conn_accelerated)" = 40 ] && [ "$(stat_of "$rd" conn_fallback)" = 0 ]' \
    "$WORK/stats.log"
short_run "USMC_SHORT_CONN=0" 100 100 USMC_SHORT_CONN=0
check "USMC_SHORT_CONN=0: all accelerated" \
    '[ "$(stat_of "$rd" client_conn_accelerated)" = 100 ] && [ "$(stat_of "$rd" conn_fallback)" = 0 ]' \
    "$WORK/stats.log"

check_end
