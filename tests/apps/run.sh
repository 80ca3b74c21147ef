#!/usr/bin/env bash
# Runs the real-application scenarios: PASS, FAIL or SKIP per scenario, then `N passed, N failed`.
#
#   tests/apps/run.sh [--plain-only] [SCENARIO...]
#
# --plain-only runs the same scenarios without usmc, checking only the applications' verdicts.
# USMC_BUILD selects the build directory (default: build).
set -uo pipefail

dir=$(cd "$(dirname "$0")" && pwd)
scenarios=(sockperf iperf3 redis nginx fallback containers restart python postgres memcached)
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

logs=$(mktemp -d "${TMPDIR:-/tmp}/usmc-apps-logs.XXXXXX")
passed=0 failed=0 skipped=0
for name in "${scenarios[@]}"; do
    log=$logs/$name.log
    if [ ! -f "$dir/$name.sh" ]; then
        echo "FAIL $name (no such scenario)"
        failed=$((failed + 1))
        continue
    fi
    start=$SECONDS
    timeout -k 10 "$limit" bash "$dir/$name.sh" >"$log" 2>&1
    rc=$?
    took="$((SECONDS - start))s"
    case $rc in
        0)
            echo "PASS $name ($took)"
            passed=$((passed + 1))
            ;;
        77)
            echo "SKIP $name: $(sed -n 's/^SKIP: //p' "$log" | tail -n 1)"
            skipped=$((skipped + 1))
            ;;
        *)
            [ "$rc" -eq 124 ] && echo "$name: timed out after ${limit}s" >>"$log"
            echo "FAIL $name ($took, exit $rc); last lines of $log:"
            tail -n 40 "$log" | sed 's/^/    /'
            failed=$((failed + 1))
            ;;
    esac
done

if [ "$failed" -eq 0 ]; then
    rm -rf "$logs"
else
    echo "logs kept in $logs"
fi
if [ "$skipped" -eq 0 ]; then
    echo "$passed passed, $failed failed"
else
    echo "$passed passed, $failed failed, $skipped skipped"
fi
[ "$failed" -eq 0 ]
