#!/usr/bin/env bash
# The usmc tool's observability commands (ss, stats, check) against live accelerated and
# fallen-back connections: PASS, FAIL or SKIP per case, then `N passed, N failed, N skipped`.
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
if ! cc -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -o "$build/tests/tools/peer" \
    "$dir/peer.c"; then
    echo "0 passed, 1 failed"
    exit 1
fi

cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
    mapfile -t cases < <(sed -n 's/^case_\([a-z0-9_]*\)() {$/\1/p' "$dir/cases.sh")
fi

logs=$(mktemp -d "${TMPDIR:-/tmp}/usmc-tools-logs.XXXXXX")
passed=0 failed=0 skipped=0
for name in "${cases[@]}"; do
    log=$logs/$name.log
    USMC_BUILD=$build timeout -k 10 "$limit" bash "$dir/cases.sh" "$name" >"$log" 2>&1
    rc=$?
    case $rc in
        0)
            echo "PASS $name"
            passed=$((passed + 1))
            ;;
        77)
            echo "SKIP $name: $(sed -n 's/^SKIP: //p' "$log" | tail -n 1)"
            skipped=$((skipped + 1))
            ;;
        *)
            [ "$rc" -eq 124 ] && echo "$name: timed out after ${limit}s" >>"$log"
            echo "FAIL $name (exit $rc); last lines of $log:"
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
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
