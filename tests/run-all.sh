#!/usr/bin/env bash
# Runs every test suite that exists and prints the summed `N passed, N failed` as its last line.
# A suite that exits non-zero without reporting a failure (a crash, a timeout, a missing summary)
# counts as one more failure.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
# A suite past this is hung; the whole run has to stay well inside CI's limit.
limit=${SUITE_TIMEOUT:-1200}
passed=0 failed=0 skipped=0

# run_suite NAME [VAR=VALUE...] COMMAND...: runs a suite's runner, echoing its output.
run_suite() {
    local name=$1 out rc summary p f k
    shift
    printf '\n=== suite %s\n' "$name"
    out=$(mktemp)
    timeout -k 10 "$limit" env "$@" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    summary=$(tail -n 1 "$out")
    rm -f "$out"
    if [[ $summary =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
        p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} k=${BASH_REMATCH[4]:-0}
    else
        echo "suite $name: its last line is not \`N passed, N failed\`; counted as a failure"
        p=0 f=1 k=0
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        [ "$rc" -eq 124 ] && echo "suite $name: timed out after ${limit}s"
        echo "suite $name: exit status $rc without a reported failure; counted as a failure"
        f=1
    fi
    echo "suite $name: $p passed, $f failed, $k skipped"
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + k))
}

for suite in unit conformance erm faults apps tools fuzz bench install policy nvme vm doorbell; do
    if [ -e "tests/$suite/run.sh" ]; then
        run_suite "$suite" bash "tests/$suite/run.sh"
    fi
done
# The conformance suite again, its connections through a region (the ivshmem device) rather
# than the local device: the same results as plain TCP.
run_suite conformance-ivshmem USMC_CONFORMANCE_DEVICE=ivshmem bash tests/conformance/run.sh
# And with the region handed out by `usmc region serve`, the peers interrupting each other.
run_suite conformance-doorbell USMC_CONFORMANCE_DEVICE=doorbell bash tests/conformance/run.sh
# Again against the sanitizer builds (make SAN=asan, SAN=tsan) where they exist. Under ASan/UBSan,
# every suite that runs the library (bench: its smoke run) but install, which packages the plain
# build (policy and nvme cover the linked library). Under TSan, the conformance, ERM and fault
# programs that run threads (the unit suite has its own TSan build); not nvme, whose program links
# the library: TSan's start-up would call into the library's wrappers before it can take their
# calls.
if [ -d build-asan ]; then
    for suite in conformance erm faults apps tools policy nvme bench doorbell; do
        if [ -e "tests/$suite/run.sh" ]; then
            run_suite "$suite-asan" USMC_BUILD=build-asan bash "tests/$suite/run.sh"
        fi
    done
fi
if [ -d build-tsan ]; then
    for suite in conformance erm faults; do
        run_suite "$suite-tsan" USMC_BUILD=build-tsan bash "tests/$suite/run.sh"
    done
    run_suite conformance-ivshmem-tsan USMC_BUILD=build-tsan USMC_CONFORMANCE_DEVICE=ivshmem \
        bash tests/conformance/run.sh
    run_suite conformance-doorbell-tsan USMC_BUILD=build-tsan USMC_CONFORMANCE_DEVICE=doorbell \
        bash tests/conformance/run.sh
fi

printf '\n%s passed, %s failed, %s skipped\n' "$passed" "$failed" "$skipped"
[ "$failed" -eq 0 ]
