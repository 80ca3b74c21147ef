#!/usr/bin/env bash
# Builds every tests/unit/test_*.c plain and with ASan/UBSan, and the threaded ones (those
# that say `/* threads */`) with TSan as well; runs them and prints `N passed, N failed` over
# all test cases of every build.
#
# A test file names the sources it needs on a line of the form `/* link: src/core/x.c ... */`,
# so a new test is one new file. CC selects the compiler (default cc); UNIT_TIMEOUT bounds each
# program (default 600 s: a hang such as a lost wake-up fails instead of blocking the suite).
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
cc=${CC:-cc}
limit=${UNIT_TIMEOUT:-600}
out=build/tests/unit
flags=(-std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -Isrc/core -Iinclude -pthread)
# shellcheck disable=SC2054 # the commas belong to -fsanitize's argument
san=(-fsanitize=address,undefined -fno-sanitize-recover=all)
passed=0 failed=0

# run_one MODE FILE: builds and runs one test program, adding its summary to the totals.
run_one() {
    local mode=$1 src=$2 name bin log summary rc extra=()
    name=$(basename "$src" .c)
    bin=$out/$mode/$name
    log=$out/$mode/$name.log
    [ "$mode" = asan ] && extra=("${san[@]}")
    [ "$mode" = tsan ] && extra=(-fsanitize=thread)
    # shellcheck disable=SC2046 # the link line is a list of paths
    if ! "$cc" "${flags[@]}" "${extra[@]}" -o "$bin" "$src" \
        $(sed -n 's|^/\* link: \(.*\) \*/$|\1|p' "$src"); then
        echo "FAIL $name ($mode): does not build"
        failed=$((failed + 1))
        return
    fi
    echo "--- $name ($mode)"
    timeout -k 10 "$limit" "$bin" >"$log" 2>&1
    rc=$?
    cat "$log"
    summary=$(tail -n 1 "$log")
    if [[ $summary =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        passed=$((passed + BASH_REMATCH[1])) failed=$((failed + BASH_REMATCH[2]))
        if [ "$rc" -ne 0 ] && [ "${BASH_REMATCH[2]}" -eq 0 ]; then
            echo "FAIL $name ($mode): exit status $rc"
            failed=$((failed + 1))
        fi
    else
        [ "$rc" -eq 124 ] && echo "FAIL $name ($mode): timed out after ${limit}s"
        echo "FAIL $name ($mode): exit status $rc without a summary"
        failed=$((failed + 1))
    fi
}

for mode in plain asan tsan; do
    mkdir -p "$out/$mode"
    for src in tests/unit/test_*.c; do
        if [ "$mode" != tsan ] || grep -q '^/\* threads \*/$' "$src"; then
            run_one "$mode" "$src"
        fi
    done
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
