#!/usr/bin/env bash
# Runs the real-application scenarios: PASS, FAIL or SKIP per scenario, then `N passed, N failed`.
#
#   tests/apps/run.sh [--plain-only] [SCENARIO...]
#
# --plain-only runs the same scenarios without usmc, checking only the applications' verdicts.
# USMC_BUILD selects the build directory (default: build).
set -uo pipefail

dir=$(cd "$(dirname "$0")" && pwd)
scenarios=(sockperf iperf3 redis nginx php_fpm fallback containers engines region region_fallback restart python postgres memcached tokio grpc)
export APPS_MODE=usmc
# One scenario transfers for well under a minute; past this it is hung.
limit=${APPS_SCENARIO_TIMEOUT:-240}

if [ "${1-}" = --plain-only ]; then
    APPS_MODE=plain
    shift
fi
if [ $# -gt 0 ]; then
    scenarios=("$@")
fi

. "$dir/../lib/runner.sh"
scenario_command() {
    [ -f "$dir/$1.sh" ] && cmd=(bash "$dir/$1.sh")
}
run_scenarios apps "$limit" "${scenarios[@]}"
