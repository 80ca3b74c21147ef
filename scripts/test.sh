#!/usr/bin/env bash
# Builds usmc (plain, with AddressSanitizer/UBSan and with ThreadSanitizer) and runs every test
# suite. Exit status 0 only when the dependencies, the three builds and all suites succeed.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
jobs=$(nproc)

step() { printf '\n=== %s\n' "$*"; }
die() {
    printf 'test.sh: %s\n' "$*" >&2
    exit 1
}

step "dependencies"
scripts/install-deps.sh || die "the dependencies are not installed"

step "build"
make -j"$jobs" || die "make failed"

step "build with sanitizers"
make -j"$jobs" SAN=asan || die "make SAN=asan failed"
make -j"$jobs" SAN=tsan || die "make SAN=tsan failed"

step "tests"
tests/run-all.sh
