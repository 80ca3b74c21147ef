#!/usr/bin/env bash
# `make install` into a temporary prefix, then a program built against the installed copy with
# pkg-config (examples/smc_echo.c, no LD_PRELOAD) talks to itself: its IPPROTO_SMC sockets go
# through shared memory, its plain TCP sockets are left alone, and the installed `usmc` finds
# the installed library.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
work=$(mktemp -d "${TMPDIR:-/tmp}/usmc-install.XXXXXX") || exit 1
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
passed=0 failed=0
prefix=$work/prefix

check() {
    if eval "$2"; then
        echo "PASS $1"
        passed=$((passed + 1))
    else
        echo "FAIL $1"
        [ -n "${3:-}" ] && [ -f "$3" ] && sed 's/^/    /' "$3" | tail -n 15
        failed=$((failed + 1))
    fi
}

stat_of() { "$prefix/bin/usmc" stats --rundir "$1" | awk -v k="$2" '$1 == k { print $2 }'; }

# run_echo RUNDIR BYTES [tcp]: one server and one client of the example; prints the client's line
run_echo() {
    local rd=$1 port=$((20000 + RANDOM % 20000))
    USMC_RUNDIR=$rd "$work/smc_echo" server "$port" ${3:-} >"$work/server.out" 2>&1 &
    server=$!
    for _ in $(seq 50); do grep -q listening "$work/server.out" && break; sleep 0.1; done
    USMC_RUNDIR=$rd timeout 30 "$work/smc_echo" client "$port" "$2" ${3:-} 2>&1
    wait "$server"
    server=
}

make -s install PREFIX="$prefix" >"$work/install.log" 2>&1
check "make install" '[ -x "$prefix/bin/usmc" ] && [ -f "$prefix/lib/libusmc.so" ] &&
    [ -f "$prefix/include/usmc/usmc.h" ] && [ -f "$prefix/lib/pkgconfig/usmc.pc" ]' "$work/install.log"
check "the header stands alone" \
    'printf "#include <usmc/usmc.h>\nint p = IPPROTO_SMC;\n" | cc -std=c11 -Wall -Wextra -Werror -pedantic -I"$prefix/include" -x c -c -o /dev/null -'
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
check "example builds with pkg-config" \
    'cc -std=c11 -Wall -Wextra -Werror examples/smc_echo.c $(pkg-config --cflags --libs usmc) -o "$work/smc_echo" 2>"$work/cc.log"' "$work/cc.log"
check "it uses the installed library" 'ldd "$work/smc_echo" | grep -q "$prefix/lib/libusmc.so"'

mkdir -m 700 "$work/rd1" "$work/rd2" "$work/rd3"
out=$(run_echo "$work/rd1" 1000000)
check "IPPROTO_SMC echo is exact" '[ "$out" = "ok 1000000" ]'
check "IPPROTO_SMC went through shared memory" \
    '[ "$(stat_of "$work/rd1" conn_accelerated)" -ge 2 ] && [ "$(stat_of "$work/rd1" bytes_sent_shm)" -ge 2000000 ]'
out=$(run_echo "$work/rd2" 100000 tcp)
check "plain TCP echo is exact" '[ "$out" = "ok 100000" ]'
check "plain TCP sockets are left alone when linked" \
    '[ "$(stat_of "$work/rd2" conn_accelerated)" = 0 ] && [ "$(stat_of "$work/rd2" conn_fallback)" = 0 ]'
check "installed usmc run finds the installed library" \
    '[ "$(USMC_RUNDIR=$work/rd3 "$prefix/bin/usmc" run -- sh -c "echo \$LD_PRELOAD")" = "$prefix/lib/libusmc.so" ]'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
