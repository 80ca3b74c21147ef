#!/usr/bin/env bash
# The usmc tool's observability commands (ss, stats, check) against live accelerated and
# fallen-back connections: PASS, FAIL or SKIP per case, then the summary (tests/lib/runner.sh).
#
#   tests/tools/run.sh [CASE...]      cases are the functions of cases.sh (case_NAME)
#
# USMC_BUILD selects the build directory (default: build); the test peer is compiled into it.
set -uo pipefail

dir=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$dir/../.." && pwd)
build=${USMC_BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
limit=${TOOLS_CASE_TIMEOUT:-180}

mkdir -p "$build/tests/tools" || exit 1
if ! cc -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -pthread -o "$build/tests/tools/peer" \
    "$dir/peer.c"; then
    echo "0 passed, 1 failed"
    exit 1
fi

cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
    mapfile -t cases < <(sed -n 's/^case_\([a-z0-9_]*\)() {$/\1/p' "$dir/cases.sh")
fi

. "$dir/../lib/runner.sh"
scenario_command() {
    grep -q "^case_$1() {\$" "$dir/cases.sh" && cmd=(env USMC_BUILD="$build" bash "$dir/cases.sh" "$1")
}
run_scenarios tools "$limit" "${cases[@]}"
