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
#   region_guests     two guests, each with an ivshmem-plain device on one region file and a
#                     virtio-net link to the other (QEMU's datagram network, no bridge): a
#                     byte-checked transfer, request/response exchanges and 1000 connections at
#                     once go through the region, the virtio interface carrying < 1 % of what
#                     the same transfer put on it over TCP, by a client without usmc that fell
#                     back; a process of the host mapping the region file talks to a guest
#                     through it (over a tap device, skipped saying so when none can be made);
#                     killing one guest's QEMU ends the other's connection once the region's
#                     lease ran out (within two leases), and what the dead guest held is taken
#                     back.
#   region_doorbell   two guests (q35 with intel-iommu) with ivshmem-doorbell devices joined to
#                     usmc region serve, each binding its device to vfio-pci: guest b sleeps
#                     between exchanges with guest a and is woken by a's interrupts (MSI-X
#                     through vfio-pci), as is a host process taking interrupts from the same
#                     server (over a tap device, when one can be made); guest b's status says
#                     guest a maps the region through vfio-pci.
#
# usage: run.sh [NAME...]
# USMC_BUILD=DIR  where lib/libusmc.so and bin/usmc live (default: build).
# Needs qemu-system-x86_64 and a kernel image in /boot (scripts/install-deps.sh installs
# both); without them every scenario is skipped, saying so.
set -uo pipefail

. "$(dirname "$0")/../lib/suite.sh"
passed=0 failed=0 skipped=0
if [ $# -gt 0 ]; then scenarios=("$@"); else scenarios=(many_connections region_guests region_doorbell nvme); fi

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

# modules NAME...: the kernel modules NAME need, in order, copied into the image and listed in
# /modules/order for init to load.
modules() {
    local m f kver
    kver=$(basename "$kernel" | sed 's/^vmlinuz-//')
    for m; do
        modprobe --show-depends -S "$kver" "$m" 2>/dev/null | awk '$1 == "insmod" { print $2 }'
    done | awk '!seen[$0]++' | while read -r f; do
        install -D -m 644 "$f" "$img$f"
        echo "$f" >>"$img/modules/order"
    done
}

# The NVMe/TCP steps of a guest, a command a line (init's @FILE: words split at spaces, no
# quotes); perf's defaults reach 127.0.0.1:4420, where nvmet listens.
NVME_SPAN=$((64 << 20))
nvme_steps() {
    local g=/nvme_guest u=/usmc/bin/usmc-nvme io="-o 64K -q 32 --span 64M --once"
    printf '%s\n' \
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
    done
    modules configfs nvmet nvmet-tcp nvme-fabrics nvme-tcp
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

# guest NAME APPEND QEMU_OPTION...: starts a guest of the packed image in the background (one
# CPU, 1 GiB), its console in $out/NAME.log, its QEMU's pid in $out/NAME.pid. GUEST_KERNEL_ARGS
# go on its kernel's command line.
guest() {
    local name=$1 append=$2
    shift 2
    rm -f "$out/$name.pid"
    # (The subshell's own stderr is only its report of the QEMU that stop killed.)
    (timeout -k 10 900 qemu-system-x86_64 -nographic -no-reboot -m 1024 -smp 1 \
        -kernel "$kernel" -initrd "$out/image.cpio" -pidfile "$out/$name.pid" \
        -append "console=ttyS0 quiet panic=-1 ${GUEST_KERNEL_ARGS-} -- $append" "$@" \
        </dev/null 2>&1 | stdbuf -oL tr -d '\r' >"$out/$name.log") 2>/dev/null &
    for _ in $(seq 100); do
        [ -s "$out/$name.pid" ] && return 0
        sleep 0.1
    done
    echo "$name: QEMU did not start: $(cat "$out/$name.log")"
    return 1
}

# stop NAME...: kills the guests' QEMU.
stop() {
    local name pid
    for name; do
        pid=$(cat "$out/$name.pid" 2>/dev/null) && [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
        rm -f "$out/$name.pid"
    done
    return 0
}

# await NAME REGEX SECONDS: waits for a line of the guest's console; fails saying what.
await() {
    for _ in $(seq $((${3} * 10))); do
        grep -qE "$2" "$out/$1.log" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "$1: no '$2' within $3 s"
    return 1
}

# await_steps NAME N SECONDS: waits until the guest's init has reported the end of N steps
# ("vm-init: exit status" after each, written after the step's own output); fails saying what.
await_steps() {
    for _ in $(seq $((${3} * 10))); do
        [ "$(grep -c 'vm-init: exit status' "$out/$1.log" 2>/dev/null)" -ge "$2" ] && return 0
        sleep 0.1
    done
    echo "$1: $2 steps did not end within $3 s"
    return 1
}

# dgram LOCAL REMOTE: a netdev joining two guests by UDP datagrams on the host's loopback
# (neither waits for the other, as a socket netdev's listener would).
dgram() {
    echo "dgram,id=g,local.type=inet,local.host=127.0.0.1,local.port=$1,remote.type=inet,remote.host=127.0.0.1,remote.port=$2"
}

# host_tap TAP N: a tap device TAP at 10.N.0.1 on the host, which a guest reaches as 10.N.0.2:
# sets the caller's host (the guest's QEMU options for it) and host_ip, left empty when no tap
# device can be made.
host_tap() {
    ip tuntap add dev "$1" mode tap 2>/dev/null || return 0
    ip addr add "10.$2.0.1/24" dev "$1" && ip link set "$1" up
    host=(-netdev "tap,id=t,ifname=$1,script=no,downscript=no"
        -device "virtio-net-pci,netdev=t,mac=52:54:00:$2:00:02")
    host_ip=10.$2.0.2
}

scenario_region_guests() {
    local region=/dev/shm/usmc-vm-region.$$ tap=usmcvm$$ net port=7000 mb=32 exchanges=20000
    local lease=2000 t0 took want
    local usmc="/usmc/bin/usmc run --device ivshmem --rundir /tmp/rd" peer=/vmpeer
    consoles=("$out/a.log" "$out/b.log")
    cc -O2 -Wall -Wextra -Werror -o "$out/vmpeer" "$here/vmpeer.c" || return 1
    copy_with_libs "$out/vmpeer" /vmpeer
    modules virtio_pci virtio_net
    # Guest b's steps, a command a line (more words than a kernel command line passes to
    # init). The first transfer's client runs without usmc against guest a's usmc server: it
    # falls back to TCP, and what it puts on virtio is the measure of the accelerated
    # transfer's.
    cat >"$img/steps.b" <<EOF
$peer waitport 10.81.0.1 $port
$peer netbytes eth0
$peer transfer 10.81.0.1 $port $((mb << 20))
$peer netbytes eth0
$usmc $peer transfer 10.81.0.1 $port $((mb << 20))
$peer netbytes eth0
$usmc $peer rr 10.81.0.1 $port $exchanges
$peer netbytes eth0
$peer rr 10.81.0.1 $port $((exchanges / 10))
$usmc $peer many 10.81.0.1 $port 1000
/usmc/bin/usmc stats --rundir /tmp/rd
$usmc $peer hold 10.81.0.1 $port
EOF
    # Every step but the last, which holds its connection until guest b is killed, says
    # "exit status 0".
    want=$(($(wc -l <"$img/steps.b") - 1))
    (cd "$img" && find . | cpio -o -H newc --quiet) >"$out/image.cpio" || return 1
    "$build/bin/usmc" region create "$region" --size 1G --lease $lease --force || return 1
    local shm=(-object "memory-backend-file,id=m,share=on,mem-path=$region,size=1G"
        -device ivshmem-plain,memdev=m)
    net=$((20000 + RANDOM % 20000))
    # The host reaches guest A over a tap device, when it can make one.
    local host=() host_ip=
    host_tap "$tap" 80
    trap 'trap - RETURN; stop a b; ip link del "$tap" 2>/dev/null; rm -f "$region" "$out/image.cpio"' RETURN

    guest a "ip=eth0,10.81.0.1/24 ${host_ip:+ip=eth1,$host_ip/24} $usmc $peer serve $port" "${shm[@]}" \
        -netdev "$(dgram "$net" $((net + 1)))" -device virtio-net-pci,netdev=g,mac=52:54:00:81:00:01 \
        "${host[@]}" || return 1
    await a "serving on $port" 120 || return 1
    guest b "ip=eth0,10.81.0.2/24 @/steps.b" "${shm[@]}" \
        -netdev "$(dgram $((net + 1)) "$net")" -device virtio-net-pci,netdev=g,mac=52:54:00:81:00:02 ||
        return 1
    if [ -n "$host_ip" ]; then
        local rd
        rd=$(mktemp -d "$out/host-rundir.XXXXXX")
        USMC_DEVICE=ivshmem:$region "$build/bin/usmc" run --rundir "$rd" -- \
            "$out/vmpeer" transfer "$host_ip" "$port" $((8 << 20)) | sed 's/^/host: /'
        [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
        "$build/bin/usmc" stats --rundir "$rd" | grep -q '^ivshmem_conn_accelerated 1$' ||
            { echo "the host's connection to the guest did not go through the region"; return 1; }
        rm -rf "$rd"
        echo "a host process talked to guest a through the region"
    else
        echo "no tap device here: the host process's connection was not tried"
    fi
    echo "these guests poll (ivshmem-plain); region_doorbell has them interrupt each other"
    await b "^holding" 300 || return 1
    local ended
    ended=$(grep -c "connection ended" "$out/a.log")
    t0=$(date +%s%N)
    stop b
    # Guest b's slot is judged dead once its lease ran out, by a look every half lease.
    await a "connection ended: Connection reset by peer \($((ended + 1)) so far\)" 30 || return 1
    took=$((($(date +%s%N) - t0) / 1000000))
    echo "killing guest b's QEMU ended guest a's connection after $took ms (lease $lease ms)"
    [ "$took" -le $((2 * lease)) ] || { echo "later than twice the lease"; return 1; }
    # What guest b held returns once guest a let go of the link group (within a lease).
    local taken='import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if len(d["peers"]) == 1 and d["memory"]["used"] == 0 else 1)'
    for _ in $(seq $((lease / 50))); do
        "$build/bin/usmc" region status "$region" --json >"$out/status.json"
        python3 -c "$taken" "$out/status.json" && break
        sleep 0.1
    done
    stop a
    python3 -c "$taken" "$out/status.json" ||
        { echo "guest b's slot or memory was not taken back: $(cat "$out/status.json")"; return 1; }
    echo "guest b's slot and memory taken back"

    # Guest b's console: every step succeeded, and the virtio interface's counters.
    # (Not anchored: the console's first line starts with terminal escapes.)
    [ "$(grep -c 'vm-init: exit status 0$' "$out/b.log")" -eq "$want" ] ||
        { echo "a step of guest b failed"; return 1; }
    grep -q "many ok: 1000 connections" "$out/b.log" || { echo "1000 connections failed"; return 1; }
    local n=() plain acc rr
    mapfile -t n < <(awk '$1 == "netbytes" { print $3 }' "$out/b.log")
    plain=$((n[1] - n[0])) acc=$((n[2] - n[1])) rr=$((n[3] - n[2]))
    # Both ways: at least twice the transfer on virtio, or it did not go over TCP.
    [ "$plain" -ge $((2 * (mb << 20))) ] ||
        { echo "the client without usmc put $plain bytes on virtio, under the transfer's"; return 1; }
    echo "a client without usmc fell back to TCP against guest a's usmc server: $((mb << 20))" \
        "bytes both ways, checked, $plain bytes on virtio"
    echo "virtio eth0 of guest b: $acc bytes for the transfer through the region, $rr for" \
        "$exchanges exchanges"
    [ $((acc * 100)) -lt "$plain" ] || { echo "the region's transfer put >= 1 % of TCP's bytes on virtio"; return 1; }
    [ $((rr * 100)) -lt "$plain" ] || { echo "the exchanges put >= 1 % of TCP's bytes on virtio"; return 1; }
    local accel
    accel=$(awk '$1 == "ivshmem_conn_accelerated" { print $2 }' "$out/b.log")
    [ "${accel:-0}" -ge 1002 ] || { echo "ivshmem_conn_accelerated in guest b is ${accel:-0}"; return 1; }
    # In step order: transfer plain, transfer and exchanges through the region, exchanges
    # plain, the 1000 connections.
    grep -E "^(transfer|rr|many) ok" "$out/b.log" |
        awk 'BEGIN { split("without usmc,through the region,through the region,without usmc,through the region", l, ",") }
             { print l[NR] ": " $0 }'
    # The figures of software emulation (TCG): they show that the region carries the bytes,
    # not how fast a virtual machine on KVM would.
    awk '/^transfer ok/ { t[++nt] = $(NF - 1) } /^rr ok/ { r[++nr] = $(NF - 2) }
         END { if (nt == 2 && nr == 2)
                   printf "emulated (TCG) figures: %d MiB both ways in %s ms over virtio, %s ms through the region; one 64-byte exchange %s us over virtio, %s us through the region\n",
                          '"$mb"', t[1], t[2], r[2], r[1] }' "$out/b.log"
    echo "guest b: $accel connections through the region"
}

# The guests of region_doorbell: q35 with an IOMMU (VFIO wants one; interrupt remapping for
# MSI-X), an ivshmem-doorbell device joined to SOCKET, and virtio-net between them.
doorbell_guest() {
    local name=$1 append=$2 sock=$3
    shift 3
    GUEST_KERNEL_ARGS=intel_iommu=on guest "$name" "$append" -machine q35 \
        -device intel-iommu,intremap=on -chardev "socket,path=$sock,id=ivs" \
        -device ivshmem-doorbell,chardev=ivs,vectors=1 "$@"
}

scenario_region_doorbell() {
    local region=/dev/shm/usmc-vm-doorbell.$$ sock=$out/doorbell.sock tap=usmcdb$$ net port=7100
    local usmc="/usmc/bin/usmc run --device ivshmem --rundir /tmp/rd" peer=/vmpeer server
    consoles=("$out/dba.log" "$out/dbb.log" "$out/doorbell-serve.log")
    cc -O2 -Wall -Wextra -Werror -o "$out/vmpeer" "$here/vmpeer.c" || return 1
    copy_with_libs "$out/vmpeer" /vmpeer
    modules virtio_pci virtio_net vfio vfio_iommu_type1 vfio-pci
    # Guest b sleeps between its exchanges with guest a, and so does a: each wakes by the
    # other's interrupt. Guest b and the host process do not spin at all: a spin that
    # catches the answer leaves nothing to interrupt. Then b's counters, and the region as
    # its status sees it.
    cat >"$img/steps.b" <<EOF
$peer vfio-bind
$peer waitport 10.82.0.1 $port
$usmc --busy-poll 0 $peer quiet 10.82.0.1 $port 5 300
/usmc/bin/usmc stats --rundir /tmp/rd
/usmc/bin/usmc region status
EOF
    (cd "$img" && find . | cpio -o -H newc --quiet) >"$out/image.cpio" || return 1
    "$build/bin/usmc" region create "$region" --size 64M --force >/dev/null || return 1
    "$build/bin/usmc" region serve "$sock" "$region" 2>"$out/doorbell-serve.log" &
    server=$!
    net=$((20000 + RANDOM % 20000))
    local host=() host_ip=
    host_tap "$tap" 83
    trap 'trap - RETURN; stop dba dbb; kill "$server" 2>/dev/null; wait "$server"; ip link del "$tap" 2>/dev/null; rm -f "$region" "$out/image.cpio"' RETURN
    for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done

    doorbell_guest dba "ip=eth0,10.82.0.1/24 ${host_ip:+ip=eth1,$host_ip/24} $peer vfio-bind + $usmc $peer serve $port" \
        "$sock" -netdev "$(dgram "$net" $((net + 1)))" \
        -device virtio-net-pci,netdev=g,mac=52:54:00:82:00:01 "${host[@]}" || return 1
    await dba "serving on $port" 120 || return 1
    doorbell_guest dbb "ip=eth0,10.82.0.2/24 @/steps.b" "$sock" \
        -netdev "$(dgram $((net + 1)) "$net")" -device virtio-net-pci,netdev=g,mac=52:54:00:82:00:02 ||
        return 1
    if [ -n "$host_ip" ]; then
        local rd n
        rd=$(mktemp -d "$out/host-rundir.XXXXXX")
        "$build/bin/usmc" run --rundir "$rd" --device "ivshmem:unix:$sock" --busy-poll 0 -- \
            "$out/vmpeer" quiet "$host_ip" "$port" 4 300 | sed 's/^/host: /'
        [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
        "$build/bin/usmc" stats --rundir "$rd" >"$out/host-stats"
        n=$(awk '$1 == "ivshmem_interrupts_received" { print $2 }' "$out/host-stats")
        grep -q '^ivshmem_conn_accelerated 1$' "$out/host-stats" ||
            { echo "the host's connection to guest a did not go through the region"; return 1; }
        [ "${n:-0}" -ge 2 ] ||
            { echo "the host process was woken by ${n:-0} interrupts from guest a, not 2"; return 1; }
        echo "a host process slept between 4 exchanges with guest a: $n interrupts woke it," \
            "$(awk '$1 == "ivshmem_interrupts_sent" { print $2 }' "$out/host-stats") it sent"
        rm -rf "$rd"
    else
        echo "no tap device here: the host process's interrupts were not tried"
    fi
    await_steps dbb 5 300 || return 1
    [ "$(grep -c 'vm-init: exit status 0$' "$out/dbb.log")" -eq 5 ] ||
        { echo "a step of guest b failed"; return 1; }
    grep -q "quiet ok" "$out/dbb.log" || { echo "guest b's exchanges failed"; return 1; }
    local got sent acc
    got=$(awk '$1 == "ivshmem_interrupts_received" { print $2 }' "$out/dbb.log")
    sent=$(awk '$1 == "ivshmem_interrupts_sent" { print $2 }' "$out/dbb.log")
    acc=$(awk '$1 == "ivshmem_conn_accelerated" { print $2 }' "$out/dbb.log")
    [ "${acc:-0}" -ge 1 ] || { echo "guest b's connection did not go through the region"; return 1; }
    # Not every round: an answer may land before the wait arms, and the timer that backs
    # interrupts up may look first (2 to 5 heard of 5, without spinning). None heard means
    # the interrupts do not wake anyone.
    [ "${got:-0}" -ge 1 ] && [ "${sent:-0}" -ge 3 ] ||
        { echo "guest b heard ${got:-0} interrupts and sent ${sent:-0}, not 1 and 3"; return 1; }
    echo "guest b slept between 5 exchanges with guest a: woken by $got interrupts, sent $sent" \
        "(MSI-X through vfio-pci, the doorbell register)"
    # Guest a's slot, as guest b's usmc region status sees it: its region through vfio-pci.
    grep -E '^mapping:|^[0-9]+ +[0-9a-f]+ ' "$out/dbb.log"
    grep -qE '^[0-9]+ +[0-9a-f]+ +[a-z]+ +[0-9]+ +[0-9]+ +[0-9.]+M +vfio,' "$out/dbb.log" ||
        { echo "no guest's slot says it maps the region through vfio-pci"; return 1; }
}

mkdir -p "$out" || exit 1
for name in "${scenarios[@]}"; do
    if ! declare -F "scenario_$name" >/dev/null; then
        echo "FAIL $name (no such scenario)"
        failed=$((failed + 1))
        continue
    fi
    img=$out/$name.root
    rm -rf "$img" && mkdir -p "$img"/{proc,dev,tmp,sys,modules} || exit 1
    start=$SECONDS
    consoles=("$out/$name.log") # the guests' consoles, shown when the scenario fails
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
        echo "FAIL $name: $(tail -n 1 "$out/$name.result")"
        for console in "${consoles[@]}"; do
            echo "  the last lines of $console:"
            tail -n 30 "$console" 2>/dev/null | sed 's/^/    /'
        done
        failed=$((failed + 1))
    fi
    rm -rf "$img" "$out/$name.cpio"
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
