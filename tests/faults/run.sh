#!/usr/bin/env bash
# Fault injection: hostile shared memory, hostile control messages and dying peers must cost
# at most the connection concerned. Each test is one program run (with its arguments) under
# `usmc run` in a fresh run directory; it must exit 0 (77: skipped, it said why), and the
# counters `usmc stats` sums over that directory must meet the test's expectations.
#
# usage: run.sh [NAME...]     (default: every test in the table below)
#        run.sh --compile PROGRAM   builds one program and prints its path (tests/vm runs one
#                                   in a guest)
# USMC_BUILD=DIR  where lib/libusmc.so and bin/usmc live (default: build); programs are
#                 compiled into DIR/tests/faults. With a ThreadSanitizer build (make SAN=tsan)
#                 only the tests whose program has a `/* threads */` line run, built with
#                 -fsanitize=thread. A sanitizer report fails the test.
set -uo pipefail

. "$(dirname "$0")/../lib/suite.sh"
usmc=$build/bin/usmc
cflags=(-std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -pthread -I"$root/src/core")
. "$root/tests/lib/sanitizer.sh"
san=$(san_of "$build")
[ "$san" = tsan ] && cflags+=(-fsanitize=thread)

# name | program and arguments | stats expectations (counter>N or counter==N) | environment
# (@REGION@ in it names a fresh region file for the test: 64 MiB, a lease of 1000 ms)
tests=(
    "corrupt_prod_ahead|corrupt_cursor prod_ahead|conn_accelerated>1 conn_aborted>0|"
    "corrupt_prod_back|corrupt_cursor prod_back|conn_accelerated>1 conn_aborted>0|"
    "corrupt_urg_ahead|corrupt_cursor urg_ahead|conn_accelerated>1 conn_aborted>0|"
    "corrupt_cons_ahead|corrupt_cursor cons_ahead|conn_accelerated>1 conn_aborted>0|"
    "corrupt_cons_back|corrupt_cursor cons_back|conn_accelerated>1 conn_aborted>0|"
    "corrupt_flags_garbage|corrupt_cursor flags_garbage|conn_accelerated>1 conn_aborted==0|"
    "corrupt_state_garbage|corrupt_cursor state_garbage|conn_accelerated>1 conn_aborted==0|"
    "corrupt_tcp_bytes|corrupt_cursor tcp_bytes|conn_accelerated>1 conn_aborted>0|"
    "sigurg_forged|sigurg forged|conn_accelerated>1 sigurg_unverified>0 sigurg_sent==0|"
    "sigurg_pidns|sigurg pidns|conn_accelerated>1 sigurg_unverified>0 sigurg_sent==0|"
    "sigurg_denied|sigurg denied|conn_accelerated>1 sigurg_denied>0 sigurg_sent==0|"
    "hostile_ctl_decoder|hostile_ctl decoder|conn_accelerated>1 handshake_errors>0|USMC_HANDSHAKE_TIMEOUT_MS=300"
    "hostile_ctl_binding|hostile_ctl binding|conn_accelerated>1 handshake_errors>0|USMC_HANDSHAKE_TIMEOUT_MS=300"
    "hostile_ctl_elsewhere|hostile_ctl elsewhere|conn_accelerated>1|USMC_HANDSHAKE_TIMEOUT_MS=300"
    "hostile_ctl_replay|hostile_ctl replay|conn_accelerated>1|USMC_HANDSHAKE_TIMEOUT_MS=300"
    "forged_own_socket|forged_proposal own_socket|conn_accelerated>0 conn_fallback>0|"
    "forged_netns_twin|forged_proposal netns_twin|conn_accelerated>0 conn_fallback>0|"
    "shm_arena_short|shm_resources arena_short|conn_accelerated>0|"
    "shm_arena_shrunk|shm_resources arena_shrunk|conn_accelerated>1|"
    "shm_arena_punched|shm_resources arena_punched|conn_accelerated>1 conn_aborted>0|"
    "shm_arena_remapped|shm_resources arena_remapped|conn_accelerated>1|"
    "shm_bell_saturated|shm_resources bell_saturated|conn_accelerated>1|"
    "peer_dies_writer|peer_dies_with_data writer|conn_accelerated>1|"
    "peer_dies_reader|peer_dies_with_data reader|conn_accelerated>1|"
    "killed_client|killed_peer client|conn_accelerated>3|"
    "killed_server|killed_peer server|conn_accelerated>3|"
    "killed_fork_parent|killed_peer fork_parent|conn_accelerated>3|"
    "killed_fork_child|killed_peer fork_child|conn_accelerated>3|"
    "abandoned_segment|abandoned_segment|conn_accelerated>1 fallback_timeout>0|USMC_HANDSHAKE_TIMEOUT_MS=300"
    "stopped_peer|stopped_peer|conn_accelerated>3 ring_full>1|"
    "listener_replaced|listener_replaced|client_conn_accelerated>1|"
    "rundir_removed|rundir_lost removed||"
    "rundir_unwritable|rundir_lost unwritable|conn_accelerated>1 fallback_peer_not_usmc>0|"
    "many_connections|many_connections 10000|conn_accelerated>1 fallback_memory>0|"
    "other_user_nobody|other_user nobody|conn_accelerated>1 fallback_peer_not_usmc>0|"
    "other_user_squatted|other_user squatted||"
    "other_user_worker|other_user worker|server_conn_accelerated>0 client_conn_accelerated>0|"
    "prefork_alternate|prefork alternate|client_conn_accelerated==40 server_conn_accelerated==40 handoffs==20 handoff_links==1 conn_fallback==0 doorbell_pairs==1 arena_maps==3|"
    "prefork_nobody|prefork nobody||"
    "prefork_epoll|prefork epoll|client_conn_accelerated==40 server_conn_accelerated==40 handoffs==20 handoff_links==1 conn_fallback==0|"
    "prefork_poll|prefork poll|client_conn_accelerated==40 server_conn_accelerated==40 handoffs==20 handoff_links==1 conn_fallback==0|"
    "prefork_crowd|prefork crowd|client_conn_accelerated==40 server_conn_accelerated==40 handoffs==20 handoff_links==1 conn_fallback==0|"
    "prefork_holder_exits|prefork holder_exits|client_conn_accelerated==2 server_conn_accelerated==2 handoffs==1 conn_fallback==0|"
    "prefork_stopped|prefork stopped|client_conn_accelerated==1 handoffs==0 client_conn_fallback==42 server_fallback_client_not_usmc==42|"
    "prefork_plain|prefork plain|client_conn_accelerated==3 server_conn_accelerated==3 handoffs==2 handoff_asks==2 server_fallback_client_not_usmc==10|USMC_HANDSHAKE_TIMEOUT_MS=300"
    "prefork_twin|prefork twin|client_conn_accelerated==2 server_conn_accelerated==2 handoffs==1 handshake_errors==0|"
    "prefork_foreign|prefork foreign|client_conn_accelerated==2 server_conn_accelerated==2 handoffs==1 handshake_errors==1|"
    "rlimit_nofile_client|rlimits nofile_client|conn_accelerated>5 conn_fallback>0|"
    "rlimit_nofile_server|rlimits nofile_server|conn_accelerated>5 conn_fallback>0|USMC_HANDSHAKE_TIMEOUT_MS=1000"
    "rlimit_as_client|rlimits as_client|conn_accelerated>5 fallback_memory>0|"
    "rlimit_as_server|rlimits as_server|conn_accelerated>5 conn_fallback>0|USMC_HANDSHAKE_TIMEOUT_MS=1000"
    "erm_forged_slots|erm_hostile slots|conn_accelerated>1 erm_failed>6|"
    "erm_forged_pid|erm_hostile pid|conn_accelerated>1 erm_failed==1|"
    "erm_forged_events|erm_hostile events|conn_accelerated>1 erm_commands==1|"
    "erm_forged_cons|erm_hostile cons|conn_accelerated>1 erm_commands==1 erm_failed==1|"
    "erm_stuck_inflight|erm_hostile inflight|conn_accelerated>1 erm_commands==2|"
    "region_header|region header|ivshmem_conn_accelerated>1|USMC_DEVICE=ivshmem:@REGION@,lo"
    "region_slots|region slots|ivshmem_conn_accelerated>1|USMC_DEVICE=ivshmem:@REGION@,lo"
    "region_channels|region channels|ivshmem_conn_accelerated>1|USMC_DEVICE=ivshmem:@REGION@,lo"
    "region_cursors|region cursors|ivshmem_conn_accelerated>3 conn_aborted>0|USMC_DEVICE=ivshmem:@REGION@,lo"
    "region_full|region full|ivshmem_conn_accelerated>1 fallback_memory>0|USMC_DEVICE=ivshmem:@REGION@,lo USMC_RING_SIZE=8M"
    "region_reformat|region reformat|ivshmem_conn_accelerated>1|USMC_DEVICE=ivshmem:@REGION@,lo"
    "region_frozen|region frozen|ivshmem_conn_accelerated>0|USMC_DEVICE=ivshmem:@REGION@,lo"
    "region_sleeping|region sleeping|ivshmem_conn_accelerated>0|USMC_DEVICE=ivshmem:@REGION@,lo"
    "region_exits|region exits|ivshmem_conn_accelerated>5|USMC_DEVICE=ivshmem:@REGION@,lo"
)

passed=0 failed=0 skipped=0
mkdir -p "$out" || exit 1
. "$root/tests/lib/verdict.sh"

# The programs read the library's wire formats and counters from its headers: a binary older
# than any of them is rebuilt.
compile() {
    local prog=$1 bin=$out/$1 dep
    if [ -e "$bin" ]; then
        for dep in "$here/$prog.c" "$here/faults.c" "$here/faults.h" "$root"/src/core/*.h \
            "$root"/src/erm/*.h "$root"/include/usmc/*.h "$root"/src/dev/*.h; do
            [ "$bin" -nt "$dep" ] || { dep=stale; break; }
        done
        [ "$dep" = stale ] || return 0
    fi
    # A program names what more of the library it needs on a line `/* link: src/x.c ... */`.
    # shellcheck disable=SC2046 # the link line is a list of paths
    cc "${cflags[@]}" "$here/$prog.c" "$here/faults.c" "$root/src/core/decline.c" \
        $(sed -n 's|^/\* link: \(.*\) \*/$|\1|p' "$here/$prog.c") -o "$bin" >"$out/$prog.cc" 2>&1
}

stat_value() {
    awk -v k="$1" '$1 == k { print $2; found = 1 } END { if (!found) print 0 }' "$2"
}

# check_stats EXPECTATIONS FILE: prints the first unmet expectation.
check_stats() {
    local e key op want have
    for e in $1; do
        if [[ $e =~ ^([a-z_]+)(==|\>)([0-9]+)$ ]]; then
            key=${BASH_REMATCH[1]} op=${BASH_REMATCH[2]} want=${BASH_REMATCH[3]}
        else
            echo "bad expectation '$e'"
            return
        fi
        have=$(stat_value "$key" "$2")
        if { [ "$op" = ">" ] && [ "$have" -le "$want" ]; } ||
            { [ "$op" = "==" ] && [ "$have" -ne "$want" ]; }; then
            echo "$key is $have, expected $op $want"
            return
        fi
    done
}

run_one() {
    local name=$1 cmd=$2 expect=$3 env=$4 prog rundir rc log=$out/$1.out stats=$out/$1.stats
    local -a argv envv
    read -r -a argv <<<"$cmd"
    read -r -a envv <<<"$env"
    prog=${argv[0]}
    if ! compile "$prog"; then
        fail "$name" "$prog.c does not compile" "$out/$prog.cc"
        return
    fi
    rundir=$(mktemp -d "${TMPDIR:-/tmp}/usmc-faults.XXXXXX") || exit 1
    local region=
    if [[ $env == *@REGION@* ]]; then
        region=$(mktemp /dev/shm/usmc-faults-region.XXXXXX) || exit 1
        "$usmc" region create "$region" --size 64M --lease 1000 --force >/dev/null || exit 1
        envv=("${envv[@]//@REGION@/$region}")
    fi
    env ${envv[@]+"${envv[@]}"} timeout 60 "$usmc" run --rundir "$rundir" -- \
        "$out/$prog" "${argv[@]:1}" >"$log" 2>&1
    rc=$?
    "$usmc" stats --rundir "$rundir" >"$stats" 2>&1
    rm -rf "$rundir"
    [ -z "$region" ] || rm -f "$region"
    if san_reports "$log"; then
        fail "$name" "sanitizer report" "$log"
        return
    fi
    if [ $rc -eq 77 ]; then
        echo "SKIP $name: $(tail -n 1 "$log")"
        skipped=$((skipped + 1))
        return
    fi
    if [ $rc -ne 0 ]; then
        [ $rc -eq 124 ] && echo "timed out after 60s" >>"$log"
        fail "$name" "exit status $rc" "$log"
        return
    fi
    local unmet
    unmet=$(check_stats "$expect" "$stats")
    if [ -n "$unmet" ]; then
        fail "$name" "stats: $unmet" "$stats"
        return
    fi
    pass "$name"
}

if [ "${1:-}" = --compile ]; then
    compile "$2" || { cat "$out/$2.cc" >&2; exit 1; }
    echo "$out/$2"
    exit 0
fi
if [ ! -x "$usmc" ]; then
    echo "run.sh: $usmc is missing (run make)"
    echo "0 passed, ${#tests[@]} failed, 0 skipped"
    exit 1
fi
for t in "${tests[@]}"; do
    IFS='|' read -r name cmd expect env <<<"$t"
    if [ $# -gt 0 ]; then
        want=0
        for a; do [ "$a" = "$name" ] && want=1; done
        [ $want -eq 1 ] || continue
    elif [ "$san" = tsan ]; then
        read -r prog _ <<<"$cmd"
        grep -q '^/\* threads \*/$' "$here/$prog.c" || continue
    fi
    run_one "$name" "$cmd" "$expect" "$env"
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
