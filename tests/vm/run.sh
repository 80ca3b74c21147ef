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
#   nvme              NVMe/TCP against Linux's own, whose modules this host's kernel may not
#                     load: usmc's host against nvmet-tcp (configured through configfs), and
#                     Linux's nvme-tcp host (through /dev/nvme-fabrics) and nvme-cli's discover
#                     against usmc's target, with and without digests, over the guest's
#                     loopback; 64 MiB written by one side, read back and checked by the other;
#                     Linux's Write Zeroes and Dataset Management against usmc's target.
#                     The modules come from /lib/modules of the kernel booted (the newest in
#                     /boot), nvme-cli from the host.
#
# usage: run.sh [NAME...]
# USMC_BUILD=DIR  where lib/libusmc.so and bin/usmc live (default: build).
# Needs qemu-system-x86_64 and a kernel image in /boot (scripts/install-deps.sh installs
# both); without them every scenario is skipped, saying so.
set -uo pipefail

. "$(dirname "$0")/../lib/suite.sh"
passed=0 failed=0 skipped=0
if [ $# -gt 0 ]; then scenarios=("$@"); else scenarios=(many_connections nvme); fi

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

# The NVMe/TCP steps of a guest, a command a line (init's @FILE: words split at spaces, no
# quotes); perf's defaults reach 127.0.0.1:4420, where nvmet listens.
NVME_SPAN=$((64 << 20))
nvme_steps() {
    local g=/nvme_guest u=/usmc/bin/usmc-nvme io="-o 64K -q 32 --span 64M --once"
    printf '%s\n' \
        "$g modules /m/configfs.ko /m/nvmet.ko /m/nvmet-tcp.ko /m/nvme-fabrics.ko /m/nvme-tcp.ko" \
        "$g nvmet 4420 /tmp/k.img $((128 << 20)) nqn.2024-11.io.usmc:kernel" \
        "$u identify" \
        "$u perf -w write $io --verify 21" \
        "$g file-check /tmp/k.img $NVME_SPAN 21" \
        "$u perf -w read $io --verify 21" \
        "$u perf --digest -w write $io --verify 22" \
        "$g file-check /tmp/k.img $NVME_SPAN 22" \
        "$u perf --digest -w read $io --verify 22" \
        "$g serve 4421 $u target --mem 128M -p 4421 --discovery-port 0 --nqn nqn.2024-11.io.usmc:u" \
        "/usr/sbin/nvme discover -t tcp -a 127.0.0.1 -s 4421 --hostnqn=nqn.2024-11.io.usmc:h" \
        "$g kernel-host 4421 nqn.2024-11.io.usmc:u $NVME_SPAN 23" \
        "$u perf -r trsvcid:4421 -w read $io --verify 23" \
        "$g kernel-host 4421 nqn.2024-11.io.usmc:u $NVME_SPAN 24 digest" \
        "$u perf -r trsvcid:4421 --digest -w read $io --verify 24" \
        "$g dmesg"
}

scenario_nvme() {
    local kver mods m log=$out/nvme.log
    kver=$(basename "$kernel" | sed 's/^vmlinuz-//')
    mods=/lib/modules/$kver
    for m in fs/configfs/configfs drivers/nvme/target/nvmet drivers/nvme/target/nvmet-tcp \
        drivers/nvme/host/nvme-fabrics drivers/nvme/host/nvme-tcp; do
        if [ ! -f "$mods/kernel/$m.ko" ]; then
            echo "SKIP: $mods/kernel/$m.ko is missing (the guest kernel's NVMe/TCP modules)"
            return 77
        fi
        install -D -m 644 "$mods/kernel/$m.ko" "$img/m/$(basename "$m").ko"
    done
    command -v nvme >/dev/null || { echo "SKIP: nvme-cli is missing"; return 77; }
    cc -static -O2 -Wall -Wextra -Werror -o "$img/nvme_guest" "$here/nvme_guest.c" || return 1
    copy_with_libs "$build/bin/usmc-nvme" /usmc/bin/usmc-nvme
    copy_with_libs "$(command -v nvme)" /usr/sbin/nvme
    mkdir -p "$img/etc/nvme"
    nvme_steps >"$img/steps"
    boot nvme @/steps || { echo "qemu failed or timed out"; return 1; }
    local want steps
    steps=$(nvme_steps | wc -l)
    want=$(grep -c '^vm-init: exit status 0' "$log")
    grep -E '^(usmc nvme perf:|nvme_guest:|subnqn|ns 1|verify_errors|errors |iops|mbps|traddr|subnqn:)' "$log" |
        sed 's/^/  /' | head -n 80
    [ "$want" -eq "$steps" ] || { echo "$((steps - want)) of $steps guest steps failed"; return 1; }
    grep -q "^subnqn *: nqn.2024-11.io.usmc:kernel" "$log" ||
        { echo "usmc's host did not identify nvmet's subsystem"; return 1; }
    [ "$(grep -c '^verify_errors 0' "$log")" -eq 6 ] || { echo "a verification failed"; return 1; }
    grep -q '^subnqn: *nqn.2024-11.io.usmc:u' "$log" ||
        { echo "nvme discover did not list usmc's subsystem"; return 1; }
    [ "$(grep -c 'bytes as written' "$log")" -eq 4 ] ||
        { echo "a file or block device did not hold what was written"; return 1; }
    [ "$(grep -c 'read back as zeroes' "$log")" -eq 2 ] ||
        { echo "Write Zeroes or Dataset Management from Linux's host did not zero"; return 1; }
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
    "scenario_$name" >"$out/$name.result" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "PASS $name ($((SECONDS - start))s)"
        sed 's/^/    /' "$out/$name.result"
        passed=$((passed + 1))
    elif [ "$rc" -eq 77 ]; then
        echo "$(sed -n 's/^SKIP: /SKIP '"$name"': /p' "$out/$name.result" | tail -n 1)"
        skipped=$((skipped + 1))
    else
        echo "FAIL $name: $(tail -n 1 "$out/$name.result"); the guest's console:"
        tail -n 30 "$out/$name.log" 2>/dev/null | sed 's/^/    /'
        failed=$((failed + 1))
    fi
    rm -rf "$img" "$out/$name.cpio"
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
