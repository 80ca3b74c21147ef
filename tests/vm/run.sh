#!/usr/bin/env bash
# Scenarios that need a machine of their own, each run in a guest under QEMU (software
# emulation is enough: they check behaviour, never speed). The guest boots the host's kernel
# with an initramfs holding tests/vm/init.c as its init, the usmc build, the scenario's
# program and the libraries they load.
#
#   many_connections  10 000 accelerated connections between two processes
#                     (tests/faults/many_connections.c): two descriptors a connection on each
#                     side need RLIMIT_NOFILE above 20 256, which a container's root may be
#                     unable to raise (no CAP_SYS_RESOURCE); the guest's root can.
#
# usage: run.sh [NAME...]
# USMC_BUILD=DIR  where lib/libusmc.so and bin/usmc live (default: build).
# Needs qemu-system-x86_64 and a kernel image in /boot (scripts/install-deps.sh installs
# both); without them every scenario is skipped, saying so.
set -uo pipefail

. "$(dirname "$0")/../lib/suite.sh"
passed=0 failed=0 skipped=0
scenarios=("${@:-many_connections}")

kernel=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1)
if ! command -v qemu-system-x86_64 >/dev/null || [ -z "$kernel" ] || [ ! -r "$kernel" ]; then
    for name in "${scenarios[@]}"; do
        echo "SKIP $name: qemu-system-x86_64 or a readable /boot/vmlinuz-* is missing"
    done
    echo "0 passed, 0 failed, ${#scenarios[@]} skipped"
    exit 0
fi

# copy_with_libs FILE DEST: FILE into the image at DEST, and every library it loads at its
# own path.
copy_with_libs() {
    local lib
    install -D -m 755 "$1" "$img$2"
    for lib in $(ldd "$1" 2>/dev/null | grep -o '/[^ ]*'); do
        [ -e "$img$lib" ] || install -D -m 755 "$lib" "$img$lib"
    done
}

# boot NAME COMMAND...: packs the image and runs the guest; its console goes to
# $out/NAME.log.
boot() {
    local name=$1
    shift
    (cd "$img" && find . | cpio -o -H newc --quiet) >"$out/$name.cpio" || return 1
    timeout -k 10 900 qemu-system-x86_64 -nographic -no-reboot -m 3072 -smp 2 \
        -kernel "$kernel" -initrd "$out/$name.cpio" \
        -append "console=ttyS0 quiet panic=-1 -- $*" </dev/null 2>&1 | tr -d '\r' >"$out/$name.log"
    return "${PIPESTATUS[0]}"
}

scenario_many_connections() {
    local prog n=10000
    prog=$(bash "$root/tests/faults/run.sh" --compile many_connections) || return 1
    copy_with_libs "$prog" /many_connections
    # No "--" in a guest command: the kernel passes init nothing after a second one.
    boot many_connections /usmc/bin/usmc run --rundir /tmp/rd /many_connections $n \
        + /usmc/bin/usmc stats --rundir /tmp/rd || { echo "qemu failed or timed out"; return 1; }
    # (The console's first line starts with terminal escapes.)
    grep -q "$n connections open at once, every message verified both ways, $n accelerated" \
        "$out/many_connections.log" || { echo "not all $n connections accelerated"; return 1; }
    [ "$(grep -c '^vm-init: exit status 0' "$out/many_connections.log")" -eq 2 ] ||
        { echo "a guest command failed"; return 1; }
    local accel
    accel=$(awk '$1 == "client_conn_accelerated" { print $2 }' "$out/many_connections.log")
    [ "${accel:-0}" -gt "$n" ] || { echo "client_conn_accelerated is ${accel:-0}"; return 1; }
    grep -q '^fallback_memory [1-9]' "$out/many_connections.log" ||
        { echo "no fallback for want of descriptors beyond the limit"; return 1; }
    grep -oE "$n connections open at once.*|^(per connection|beyond the limit).*" \
        "$out/many_connections.log"
}

mkdir -p "$out" || exit 1
for name in "${scenarios[@]}"; do
    if ! declare -F "scenario_$name" >/dev/null; then
        echo "FAIL $name (no such scenario)"
        failed=$((failed + 1))
        continue
    fi
    img=$out/$name.root
    rm -rf "$img" && mkdir -p "$img"/{proc,dev,tmp} || exit 1
    start=$SECONDS
    if ! cc -static -O2 -Wall -Wextra -Werror -o "$img/init" "$here/init.c"; then
        echo "FAIL $name: tests/vm/init.c does not build statically"
        failed=$((failed + 1))
        continue
    fi
    copy_with_libs "$build/bin/usmc" /usmc/bin/usmc
    copy_with_libs "$build/lib/libusmc.so" /usmc/lib/libusmc.so
    if "scenario_$name" >"$out/$name.result" 2>&1; then
        echo "PASS $name ($((SECONDS - start))s)"
        sed 's/^/    /' "$out/$name.result"
        passed=$((passed + 1))
    else
        echo "FAIL $name: $(tail -n 1 "$out/$name.result"); the guest's console:"
        tail -n 30 "$out/$name.log" 2>/dev/null | sed 's/^/    /'
        failed=$((failed + 1))
    fi
    rm -rf "$img" "$out/$name.cpio"
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
