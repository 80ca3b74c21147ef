#!/usr/bin/env bash
# SMC-ERM: every program here runs under `usmc run` in a fresh runtime directory, linked with the
# build's library (-lusmc, for the helpers of <usmc/erm.h>); it must exit 0 (77: skipped, it said
# why), and `usmc stats` must show that shared memory carried its connections and that ERM moved
# bytes, unless its `erm-expect:` header says `fallback` (no connection accelerated, no ERM
# command run). examples/erm_write.c runs too, its server and its client under usmc.
#
# usage: run.sh [NAME...]   (default: every program)
# USMC_BUILD=DIR  where lib/libusmc.so and bin/usmc live (default: build); programs are built
#                 into DIR/tests/erm with the build's sanitizer. With a ThreadSanitizer build only
#                 the programs with a `/* threads */` line run. A sanitizer report fails the
#                 program.
set -uo pipefail

. "$(dirname "$0")/../lib/suite.sh"
usmc=$build/bin/usmc
. "$root/tests/lib/sanitizer.sh"
. "$root/tests/lib/ports.sh"
san=$(san_of "$build")
read -ra sanflags <<<"$(san_cflags "$build")"
cflags=(-std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -pthread -I"$root/include"
    ${sanflags[@]+"${sanflags[@]}"})
libs=(-L"$build/lib" -Wl,-rpath,"$build/lib" -lusmc)

names=()
for arg; do
    arg=${arg##*/}
    names+=("${arg%.c}")
done
if [ ${#names[@]} -eq 0 ]; then
    mapfile -t names < <(suite_programs "$san")
    [ "$san" = tsan ] || names+=(example)
fi

mkdir -p "$out" || exit 1
passed=0 failed=0 skipped=0
. "$root/tests/lib/verdict.sh"

# build NAME SOURCE...: into $out/NAME unless newer than its sources and the library's headers
build_prog() {
    local name=$1 bin=$out/$1 dep
    shift
    if [ -e "$bin" ]; then
        for dep in "$@" "$root"/include/usmc/*.h "$build/lib/libusmc.so"; do
            [ "$bin" -nt "$dep" ] || { dep=stale; break; }
        done
        [ "$dep" = stale ] || return 0
    fi
    cc "${cflags[@]}" "$@" "${libs[@]}" -o "$bin" >"$out/$name.cc" 2>&1
}

stat_value() {
    awk -v k="$1" '$1 == k { print $2; found = 1 } END { if (!found) print 0 }' "$2"
}

# judge NAME RC LOG STATS EXPECT: the verdict on one run
judge() {
    local name=$1 rc=$2 log=$3 stats=$4 expect=$5
    if san_reports "$log"; then
        fail "$name" "sanitizer report" "$log"
    elif [ "$rc" -eq 77 ]; then
        echo "SKIP $name: $(tail -n 1 "$log")"
        skipped=$((skipped + 1))
    elif [ "$rc" -ne 0 ]; then
        [ "$rc" -eq 124 ] && echo "timed out" >>"$log"
        fail "$name" "exit status $rc" "$log"
    elif [ "$expect" = fallback ] &&
        { [ "$(stat_value conn_accelerated "$stats")" -ne 0 ] ||
            [ "$(stat_value erm_commands "$stats")" -ne 0 ]; }; then
        fail "$name" "expected no accelerated connection and no ERM command" "$stats"
    elif [ "$expect" != fallback ] &&
        { [ "$(stat_value conn_accelerated "$stats")" -le 0 ] ||
            [ "$(stat_value erm_commands "$stats")" -le 0 ]; }; then
        fail "$name" "shared memory did not carry it, or ERM moved nothing" "$stats" "$log"
    else
        pass "$name"
    fi
}

run_prog() {
    local name=$1 src=$here/$1.c rundir rc log=$out/$1.out stats=$out/$1.stats expect
    if ! build_prog "$name" "$src" "$here/common.c"; then
        fail "$name" "does not compile" "$out/$name.cc"
        return
    fi
    expect=$(sed -n 's/.*erm-expect: *\([a-z]*\).*/\1/p' "$src" | head -n 1)
    rundir=$(mktemp -d "${TMPDIR:-/tmp}/usmc-erm.XXXXXX") || exit 1
    timeout 300 "$usmc" run --rundir "$rundir" -- "$out/$name" >"$log" 2>&1
    rc=$?
    "$usmc" stats --rundir "$rundir" >"$stats" 2>&1
    rm -rf "$rundir"
    judge "$name" "$rc" "$log" "$stats" "$expect"
}

# The slides' program: its server, then its client, each under usmc.
run_example() {
    local rundir port rc log=$out/example.out stats=$out/example.stats server
    if ! build_prog erm_write "$root/examples/erm_write.c"; then
        fail example "examples/erm_write.c does not compile" "$out/erm_write.cc"
        return
    fi
    rundir=$(mktemp -d "${TMPDIR:-/tmp}/usmc-erm.XXXXXX") || exit 1
    port=$(pick_port)
    : >"$log"
    timeout 60 "$usmc" run --rundir "$rundir" -- "$out/erm_write" server 127.0.0.1 "$port" \
        >>"$log" 2>&1 &
    server=$!
    for _ in $(seq 200); do
        [ -n "$(ss -Htln "( sport = :$port )")" ] && break
        sleep 0.05
    done
    timeout 60 "$usmc" run --rundir "$rundir" -- "$out/erm_write" client 127.0.0.1 "$port" \
        >>"$log" 2>&1
    rc=$?
    wait "$server" || rc=$?
    "$usmc" stats --rundir "$rundir" >"$stats" 2>&1
    rm -rf "$rundir"
    if [ "$rc" -eq 0 ] && ! grep -q '^server: received "hello from the ERM client"' "$log"; then
        echo "the server did not print what the client wrote" >>"$log"
        rc=1
    fi
    judge example "$rc" "$log" "$stats" ""
}

if [ ! -x "$usmc" ]; then
    echo "run.sh: $usmc is missing (run make)"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
for name in "${names[@]}"; do
    if [ "$name" = example ]; then
        run_example
    else
        run_prog "$name"
    fi
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
