#!/usr/bin/env bash
# `make install` into a temporary prefix (and under DESTDIR), then a program built against the
# installed copy with pkg-config (examples/smc_echo.c, no LD_PRELOAD, no usmc run) talks to
# itself: its IPPROTO_SMC sockets go through shared memory, the same program with plain TCP
# sockets is left alone, and the installed `usmc` finds the installed library. The man pages are
# installed and agree with the commands' --help (manpages.sh). scripts/install-deps.sh, run by
# a user who lacks a package, goes through sudo at a terminal and stops without one.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
. tests/lib/echo.sh
. tests/install/manpages.sh
# The program alone: linking is what brings usmc in.
unset LD_PRELOAD
prefix=$WORK/prefix
USMC=$prefix/bin/usmc
ECHO=$WORK/smc_echo
BYTES=1000000

make -s install PREFIX="$prefix" >"$WORK/install.log" 2>&1
check "make install" '[ -x "$USMC" ] && [ -f "$prefix/lib/libusmc.so" ] &&
    [ -f "$prefix/include/usmc/usmc.h" ] && [ -f "$prefix/include/usmc/erm.h" ] &&
    [ -f "$prefix/lib/pkgconfig/usmc.pc" ]' "$WORK/install.log"
check "make install: the man pages" 'for p in man/*.1 man/*.3 man/*.7; do
        cmp -s "$p" "$prefix/share/man/man${p##*.}/${p##*/}" || exit 1; done' "$WORK/install.log"
make -s install PREFIX=/opt/usmc DESTDIR="$WORK/dest" >"$WORK/destdir.log" 2>&1
check "make install DESTDIR: staged, the package names the final prefix" \
    '[ -x "$WORK/dest/opt/usmc/bin/usmc" ] && [ -f "$WORK/dest/opt/usmc/share/man/man7/usmc.7" ] &&
     grep -qx "prefix=/opt/usmc" "$WORK/dest/opt/usmc/lib/pkgconfig/usmc.pc"' "$WORK/destdir.log"

check "the header stands alone" \
    'printf "#include <usmc/usmc.h>\nint p = IPPROTO_SMC;\n" |
     cc -std=c11 -Wall -Wextra -Werror -pedantic -I"$prefix/include" -x c -c -o /dev/null -'
check "the placement interface's header stands alone" \
    'printf "#include <usmc/ddp.h>\nunsigned (*p)(int) = usmc_ddp_caps;\n" |
     cc -std=c11 -Wall -Wextra -Werror -pedantic -I"$prefix/include" -x c -c -o /dev/null -'
check "the installed usmc nvme runs, with the installed library" \
    '"$USMC" nvme --help >/dev/null && grep -q "$prefix/bin/../lib/libusmc.so" <<<"$(ldd "$prefix/bin/usmc-nvme")"'
check "the ERM header stands alone, and C++ takes it" \
    'printf "#include <usmc/erm.h>\nint l = SOL_SMC + SMC_ERM_CMD;\n" |
     cc -std=c11 -Wall -Wextra -Werror -pedantic -I"$prefix/include" -x c -c -o /dev/null - &&
     printf "#include <usmc/erm.h>\nint l = SOL_SMC;\n" |
     c++ -Wall -Wextra -Werror -pedantic -I"$prefix/include" -x c++ -c -o /dev/null -'
# A C library that knows IPPROTO_SMC defines it as glibc does its other protocols.
cat >"$WORK/coexist.c" <<'C'
#include <netinet/in.h>
enum { IPPROTO_SMC = 256 };
#define IPPROTO_SMC IPPROTO_SMC
#include <usmc/usmc.h>
_Static_assert(IPPROTO_SMC == 256, "IPPROTO_SMC");
C
check "the header coexists with a C library that defines IPPROTO_SMC" \
    'cc -std=c11 -Wall -Wextra -Werror -I"$prefix/include" -c -o /dev/null "$WORK/coexist.c"'
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
check "example builds with pkg-config" \
    'cc -std=c11 -Wall -Wextra -Werror examples/smc_echo.c $(pkg-config --cflags --libs usmc) \
        -o "$ECHO" 2>"$WORK/cc.log"' "$WORK/cc.log"
check "the ERM example builds with pkg-config" \
    'cc -std=c11 -Wall -Wextra -Werror examples/erm_write.c $(pkg-config --cflags --libs usmc) \
        -o "$WORK/erm_write" 2>"$WORK/cc.log"' "$WORK/cc.log"
# (Not `ldd | grep -q`: grep leaving early makes ldd die of SIGPIPE, which pipefail counts.)
check "it uses the installed library" 'grep -q "$prefix/lib/libusmc.so" <<<"$(ldd "$ECHO")"'
# Linked the wrong way round, the program calls the C library directly: usmc says why, and
# the program sees what the C library says (no crash in the library's constructor).
cc -std=c11 examples/smc_echo.c -Wl,--no-as-needed -lc $(pkg-config --cflags --libs usmc) \
    -o "$WORK/smc_echo_lc_first" 2>"$WORK/cc.log"
"$WORK/smc_echo_lc_first" client 127.0.0.1 1 1 >"$WORK/lc_first.log" 2>&1
rc=$?
check "linked after the C library: a message, the program goes on" \
    '[ "$rc" = 1 ] && grep -q "link order" "$WORK/lc_first.log"' "$WORK/lc_first.log"

rd=$(fresh_rundir)
out=$(echo_pair "$rd" 127.0.0.1 127.0.0.1 $BYTES)
echo "$out" >"$WORK/out.log"
check "IPPROTO_SMC echo is exact" '[ "$out" = "ok $BYTES" ]' "$WORK/out.log"
"$USMC" stats --rundir "$rd" >"$WORK/stats.log"
check "IPPROTO_SMC went through shared memory" \
    '[ "$(stat_of "$rd" conn_accelerated)" -ge 2 ] &&
     [ "$(stat_of "$rd" bytes_sent_shm)" -ge $((2 * BYTES)) ] &&
     [ "$(stat_of "$rd" bytes_recv_shm)" -ge $((2 * BYTES)) ]' "$WORK/stats.log"

rd=$(fresh_rundir)
out=$(echo_pair "$rd" 127.0.0.1 127.0.0.1 100000 tcp)
check "plain TCP echo is exact" '[ "$out" = "ok 100000" ]'
"$USMC" stats --rundir "$rd" >"$WORK/stats.log"
check "plain TCP sockets are left alone when linked" \
    '[ "$(stat_of "$rd" conn_accelerated)" = 0 ] && [ "$(stat_of "$rd" conn_fallback)" = 0 ]' \
    "$WORK/stats.log"

rd=$(fresh_rundir)
check "installed usmc run finds the installed library" \
    '[ "$(USMC_RUNDIR=$rd "$USMC" run -- sh -c "echo \$LD_PRELOAD")" = "$prefix/lib/libusmc.so" ]'
SERVER_RUN=("$USMC" run --) CLIENT_RUN=("$USMC" run --)
out=$(echo_pair "$rd" 127.0.0.1 127.0.0.1 100000 tcp)
check "the linked program's plain sockets under usmc run: accelerated" \
    '[ "$out" = "ok 100000" ] && [ "$(stat_of "$rd" conn_accelerated)" -ge 2 ]'

man_checks

# A sudo that only says how it was called, and a package no machine has: nothing is installed.
fake=$WORK/fakebin
mkdir -m 755 "$fake" && printf '#!/bin/sh\necho "sudo $*"\n' >"$fake/sudo" && chmod 755 "$fake/sudo"
chmod 711 "$WORK"
as_user=()
[ "$(id -u)" -ne 0 ] || as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
absent=usmc-no-such-package
out=$(timeout 20 "${as_user[@]}" env PATH="$fake:$PATH" scripts/install-deps.sh "$absent" \
    </dev/null 2>&1)
rc=$?
echo "$out" >"$WORK/deps.log"
check "install-deps without a terminal: names what is missing and stops" \
    '[ "$rc" = 1 ] && [ "$out" = "install-deps: run as root, or install: $absent" ]' "$WORK/deps.log"
out=$(timeout 20 "${as_user[@]}" env PATH="$fake:$PATH" \
    script -qec "scripts/install-deps.sh $absent" /dev/null 2>&1 | tr -d '\r')
echo "$out" >"$WORK/deps.log"
check "install-deps at a terminal: again through sudo, for what is missing" \
    'grep -qx "sudo -- scripts/install-deps.sh $absent" <<<"$out"' "$WORK/deps.log"
check_end
