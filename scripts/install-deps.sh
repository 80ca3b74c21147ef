#!/usr/bin/env bash
# Installs what building and testing usmc needs on Debian 12, or only the packages named as
# arguments (bench/run.sh installs what its workloads run). Safe to run again: it returns at once
# when everything is present. Installs as root: run by another user at a terminal, it runs itself
# again through sudo, which asks for a password there; else it names what is missing and fails.
set -euo pipefail

packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(
    build-essential make gcc clang libclang-rt-14-dev
    sockperf iperf3 redis-server redis-tools nginx-light wrk curl memcached postgresql php-fpm
    iproute2 iptables procps psmisc python3 python3-matplotlib python3-jsonschema python3-grpcio
    pkg-config libisal-dev nvme-cli
    qemu-system-x86 linux-image-cloud-amd64 cpio
)

missing=()
for pkg in "${packages[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages present"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    # Without a terminal nobody could answer sudo's password prompt, and it would wait forever.
    if [ -t 0 ] && command -v sudo >/dev/null; then
        echo "install-deps: installing through sudo: ${missing[*]}" >&2
        exec sudo -- "$0" "${missing[@]}"
    fi
    echo "install-deps: run as root, or install: ${missing[*]}" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -q

available=() unknown=()
for pkg in "${missing[@]}"; do
    if grep -q 'Candidate: [^(]' <<<"$(apt-cache policy "$pkg")"; then
        available+=("$pkg")
    else
        unknown+=("$pkg")
    fi
done
if [ ${#unknown[@]} -gt 0 ]; then
    echo "install-deps: no installation candidate for: ${unknown[*]}" >&2
fi

# Tests start their own servers on their own ports with private configuration, so the
# distribution's redis, nginx, memcached, PostgreSQL, php-fpm and iperf3 services must not be
# started by the installation: policy-rc.d forbids it for the duration (exit status 101 = action
# not allowed).
policy=/usr/sbin/policy-rc.d
own_policy=
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    own_policy=1
fi
trap '[ -z "$own_policy" ] || rm -f "$policy"' EXIT

if [ ${#available[@]} -gt 0 ]; then
    apt-get install -y -q --no-install-recommends "${available[@]}"
fi

# Where systemd manages services, keep them from starting at the next boot either.
if [ -d /run/systemd/system ]; then
    for service in redis-server nginx memcached postgresql iperf3 \
        $(cd /lib/systemd/system && compgen -G 'php*-fpm.service' | sed 's/[.]service$//'); do
        systemctl disable --now "$service" >/dev/null 2>&1 || true
    done
fi

[ ${#unknown[@]} -eq 0 ]
