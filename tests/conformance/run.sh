#!/usr/bin/env bash
# Differential conformance: every program here runs once on plain TCP and once under
# `usmc run`; stdout and exit status must be identical, and the accelerated run must show in
# `usmc stats` that shared memory carried the connection (and the bytes, when the program's
# `usmc-expect:` header says `data`). A `usmc-env: NAME=VALUE ...` header sets the
# library's environment for the accelerated run.
#
# usage: run.sh [--plain-only] [NAME...]
#   --plain-only  only check that each program succeeds on plain TCP
#   NAME          run only these programs (file names with or without .c)
# USMC_BUILD=DIR  where lib/libusmc.so and bin/usmc live (default: build); programs are
#                 compiled into DIR/tests/conformance. With a ThreadSanitizer build
#                 (make SAN=tsan) only the programs with a `/* threads */` line run by
#                 default, built with -fsanitize=thread: races between their threads
#                 inside the library are reported.
# USMC_CONFORMANCE_DEVICE=ivshmem: the accelerated run goes through a region (a fresh file in
#                 /dev/shm for each program), which the library prefers to the local device, as
#                 between two kernels; its known differences are in known-differences-ivshmem.
# USMC_CONFORMANCE_DEVICE=doorbell: the same, the region handed out by `usmc region serve` (one
#                 for each program), whose peers interrupt each other rather than poll.
# A sanitizer report on either run fails the program.
# Programs listed in known-differences are reported as skipped while they differ
# and fail when they stop differing (so the list is kept true).
set -uo pipefail

. "$(dirname "$0")/../lib/suite.sh"
usmc=$build/bin/usmc
cflags=(-std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -pthread)
. "$root/tests/lib/sanitizer.sh"
san=$(san_of "$build")
[ "$san" = tsan ] && cflags+=(-fsanitize=thread)

plain_only=0
names=()
device=${USMC_CONFORMANCE_DEVICE:-lo}
known_file=$here/known-differences
case $device in
lo) ;;
ivshmem | doorbell) known_file=$here/known-differences-ivshmem ;;
*)
    echo "run.sh: USMC_CONFORMANCE_DEVICE must be lo, ivshmem or doorbell" >&2
    exit 2
    ;;
esac
for arg; do
    case $arg in
    --plain-only) plain_only=1 ;;
    -h | --help)
        sed -n '2,17s/^# \{0,1\}//p' "$0"
        exit 0
        ;;
    -*)
        echo "run.sh: unknown option $arg" >&2
        exit 2
        ;;
    *)
        arg=${arg##*/}
        names+=("${arg%.c}")
        ;;
    esac
done
[ ${#names[@]} -gt 0 ] || mapfile -t names < <(suite_programs "$san")

mkdir -p "$out" || exit 1
passed=0 failed=0 skipped=0

# known NAME: the recorded reason, if NAME is a known difference.
known() {
    awk -v n="$1" '$1 == n { $1 = ""; sub(/^ +/, ""); print; exit }' "$known_file"
}

pass() {
    echo "PASS $1"
    passed=$((passed + 1))
}

# fail NAME REASON [FILE...]: the files' contents follow the reason, indented.
fail() {
    local name=$1 reason=$2 f why
    shift 2
    why=$(known "$name")
    if [ -n "$why" ] && [ $plain_only -eq 0 ] && [ "$reason" != "does not compile" ]; then
        echo "SKIP $name: known difference: $why"
        skipped=$((skipped + 1))
        return
    fi
    echo "FAIL $name: $reason"
    for f; do
        [ -s "$f" ] && sed 's/^/    /' "$f" | head -n 60
    done
    failed=$((failed + 1))
}

# The shared object is built once; a program is rebuilt when it or the scaffolding changed.
common_obj=$out/common.o
if [ ! -e "$common_obj" ] || [ "$here/common.c" -nt "$common_obj" ] ||
    [ "$here/common.h" -nt "$common_obj" ]; then
    if ! cc "${cflags[@]}" -c "$here/common.c" -o "$common_obj"; then
        echo "run.sh: common.c does not compile"
        echo "0 passed, ${#names[@]} failed"
        exit 1
    fi
fi

compile() {
    local name=$1 bin=$out/$1
    if [ -e "$bin" ] && [ "$bin" -nt "$here/$name.c" ] && [ "$bin" -nt "$common_obj" ]; then
        return 0
    fi
    cc "${cflags[@]}" -I"$here" "$here/$name.c" "$common_obj" -o "$bin" >"$out/$name.cc" 2>&1
}

stat_value() {
    awk -v k="$1" '$1 == k { print $2; found = 1 } END { if (!found) print 0 }' "$2"
}

run_one() {
    local name=$1 src=$here/$1.c bin=$out/$1 expect fallbacks ends bells rundir rc_plain rc_usmc acc recv sent
    local -a envs
    local plain=$out/$name.plain usmcout=$out/$name.usmc stats=$out/$name.stats
    if [ ! -e "$src" ]; then
        fail "$name" "no such program $src"
        return
    fi
    expect=$(sed -n 's/.*usmc-expect: *\([a-z][a-z ]*[a-z]\).*/\1/p' "$src" | head -n 1)
    # Optional: exactly how many connections (both sides counted) fall back.
    fallbacks=$(sed -n 's/.*usmc-fallbacks: *\([0-9][0-9]*\).*/\1/p' "$src" | head -n 1)
    # Optional: exactly how many connection ends shared memory carried.
    ends=$(sed -n 's/.*usmc-accelerated: *\([0-9][0-9]*\).*/\1/p' "$src" | head -n 1)
    # Optional: at most how many doorbells rang (for a program whose waits find their news
    # already there, so that no end asks to be rung).
    bells=$(sed -n 's/.*usmc-doorbells-at-most: *\([0-9][0-9]*\).*/\1/p' "$src" | head -n 1)
    read -ra envs <<<"$(sed -n 's/.*usmc-env: *\(USMC_[A-Z_]*=[^ ]*\( USMC_[A-Z_]*=[^ ]*\)*\).*/\1/p' "$src" | head -n 1)"
    case $expect in
    "accelerated data" | accelerated | none) ;;
    *)
        fail "$name" "missing or unknown usmc-expect header: '$expect'"
        return
        ;;
    esac
    if ! compile "$name"; then
        fail "$name" "does not compile" "$out/$name.cc"
        return
    fi

    timeout 60 "$bin" >"$plain" 2>"$plain.err"
    rc_plain=$?
    if san_reports "$plain.err"; then
        fail "$name" "sanitizer report on plain TCP" "$plain.err"
        return
    fi
    if [ $rc_plain -ne 0 ]; then
        fail "$name" "plain TCP run exited $rc_plain" "$plain" "$plain.err"
        return
    fi
    if [ $plain_only -eq 1 ]; then
        pass "$name"
        return
    fi

    if [ ! -x "$usmc" ]; then
        fail "$name" "$usmc is missing"
        return
    fi
    rundir=$(mktemp -d "${TMPDIR:-/tmp}/usmc-conformance.XXXXXX") || exit 1
    local region= server=
    if [ "$device" != lo ]; then
        # Sparse: a thousand connections' rings fit, and only what they touch is memory.
        region=$(mktemp /dev/shm/usmc-conformance-region.XXXXXX) && truncate -s 1G "$region" || exit 1
        envs+=("USMC_DEVICE=ivshmem:$region,lo")
    fi
    if [ "$device" = doorbell ]; then
        "$usmc" region serve "$region.sock" "$region" 2>/dev/null &
        server=$!
        for _ in $(seq 100); do [ -S "$region.sock" ] && break; sleep 0.02; done
        envs[-1]="USMC_DEVICE=ivshmem:unix:$region.sock,lo"
    fi
    timeout 60 env "${envs[@]}" "$usmc" run --rundir "$rundir" -- "$bin" >"$usmcout" 2>"$usmcout.err"
    rc_usmc=$?
    if [ -n "$server" ]; then
        kill -TERM "$server"
        wait "$server"
    fi
    [ -z "$region" ] || rm -f "$region"
    "$usmc" stats --rundir "$rundir" >"$stats" 2>&1
    rm -rf "$rundir"

    if san_reports "$usmcout.err"; then
        fail "$name" "sanitizer report under usmc" "$usmcout.err"
        return
    fi
    echo "exit $rc_plain" >>"$plain"
    echo "exit $rc_usmc" >>"$usmcout"
    if ! diff -u --label plain --label usmc "$plain" "$usmcout" >"$out/$name.diff"; then
        fail "$name" "output differs" "$out/$name.diff" "$usmcout.err"
        return
    fi
    acc=$(stat_value conn_accelerated "$stats")
    sent=$(stat_value bytes_sent_shm "$stats")
    recv=$(stat_value bytes_recv_shm "$stats")
    case $expect in
    none)
        if [ "$acc" -ne 0 ]; then
            fail "$name" "expected no accelerated connection, stats say conn_accelerated $acc" "$stats"
            return
        fi
        ;;
    *)
        if [ "$acc" -le 0 ]; then
            fail "$name" "not accelerated: conn_accelerated $acc" "$stats" "$usmcout.err"
            return
        fi
        if [ "$expect" = "accelerated data" ] && { [ "$sent" -le 0 ] || [ "$recv" -le 0 ]; }; then
            fail "$name" "bytes did not go through shared memory: bytes_sent_shm $sent, bytes_recv_shm $recv" "$stats"
            return
        fi
        if [ -n "$fallbacks" ] && [ "$(stat_value conn_fallback "$stats")" -ne "$fallbacks" ]; then
            fail "$name" "expected $fallbacks connections to fall back" "$stats"
            return
        fi
        if [ -n "$ends" ] && [ "$acc" -ne "$ends" ]; then
            fail "$name" "expected $ends accelerated connection ends, stats say $acc" "$stats"
            return
        fi
        if [ -n "$bells" ] && [ "$(stat_value doorbells "$stats")" -gt "$bells" ]; then
            fail "$name" "expected at most $bells doorbells, stats say $(stat_value doorbells "$stats")" "$stats"
            return
        fi
        ;;
    esac
    # A difference that shows only at times (its reason says so) may match in a run.
    case $(known "$name") in
    "at times:"*) ;;
    ?*)
        echo "FAIL $name: behaves like TCP now; remove it from known-differences"
        failed=$((failed + 1))
        return
        ;;
    esac
    pass "$name"
}

for name in "${names[@]}"; do
    run_one "$name"
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
