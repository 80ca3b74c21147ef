#!/usr/bin/env bash
# Builds every tests/fuzz/fuzz_*.c harness and fuzzes each for FUZZ_SECONDS (default 20).
#
# With clang and its fuzzer runtime (libclang-rt-14-dev) the harnesses run under libFuzzer with
# ASan and UBSan; without them, gcc builds each harness with ASan, UBSan and driver.c, which feeds
# it mutations of its seeds for the same time. Nothing is installed here. Seeds come from each
# harness's fuzz_seeds(), written into build/tests/fuzz/NAME/corpus, where libFuzzer also keeps
# what it finds. A harness names the sources it needs on a line `/* link: src/core/x.c ... */`, so
# a new decoder's harness is one new file.
#
# One result per harness: a build failure, crash, broken invariant or hang fails it. The crashing
# input is kept in build/tests/fuzz/NAME/artifacts/; rerun it with `build/tests/fuzz/NAME/NAME
# FILE` (libFuzzer) or `build/tests/fuzz/NAME/driver FILE`. FUZZ_SEED varies the driver's stream.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
seconds=${FUZZ_SECONDS:-20}
# -max_total_time=0 would mean "forever".
[ "$seconds" -ge 1 ] 2>/dev/null || seconds=1
out=build/tests/fuzz
common=(-std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -Isrc/core -Iinclude -Itests/fuzz)
# shellcheck disable=SC2054 # the commas belong to -fsanitize's argument
san=(-fsanitize=address,undefined -fno-sanitize-recover=all)
passed=0 failed=0

mkdir -p "$out"
mode=driver
if command -v clang >/dev/null &&
    printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d[0] + (int)n; }\n' |
    clang -x c -fsanitize=fuzzer -o "$out/probe" - >/dev/null 2>&1; then
    mode=libfuzzer
fi
rm -f "$out/probe"
if [ "$mode" = libfuzzer ]; then
    echo "mode: libFuzzer (clang -fsanitize=fuzzer,address,undefined), ${seconds}s per harness"
else
    echo "mode: driver (gcc, ASan/UBSan, deterministic mutations), ${seconds}s per harness;" \
        "clang or libclang-rt-14-dev missing, libFuzzer skipped"
fi

# fuzz_one FILE: builds, seeds and fuzzes one harness; returns non-zero on failure.
fuzz_one() {
    local src=$1 name dir links log rc
    name=$(basename "$src" .c)
    dir=$out/$name
    log=$dir/fuzz.log
    links=$(sed -n 's|^/\* link: \(.*\) \*/$|\1|p' "$src")
    mkdir -p "$dir/corpus" "$dir/artifacts"
    # The driver also writes the seeds in libFuzzer mode: it is the one build that has a main.
    # shellcheck disable=SC2086 # the link line is a list of paths
    gcc "${common[@]}" "${san[@]}" -o "$dir/driver" tests/fuzz/driver.c "$src" $links ||
        return 1
    "$dir/driver" --write-seeds "$dir/corpus" || return 1
    if [ "$mode" = libfuzzer ]; then
        # shellcheck disable=SC2086
        clang "${common[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
            -o "$dir/$name" "$src" $links || return 1
        timeout -k 10 $((seconds + 120)) "$dir/$name" -max_total_time="$seconds" -timeout=10 \
            -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$dir/artifacts/" "$dir/corpus" >"$log" 2>&1
        rc=$?
        grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' "$log"
    else
        timeout -k 10 $((seconds + 120)) "$dir/driver" -seconds="$seconds" \
            "$dir/artifacts/crash" >"$log" 2>&1
        rc=$?
        tail -n 1 "$log"
    fi
    if [ "$rc" -ne 0 ]; then
        [ "$rc" -eq 124 ] && echo "$name: hung (timed out)"
        tail -n 40 "$log" | sed 's/^/    /'
        find "$dir/artifacts" -type f -newer "$dir/driver" -printf '    artifact: %p\n'
        return 1
    fi
}

for src in tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    echo "--- $name"
    if fuzz_one "$src"; then
        echo "PASS $name"
        passed=$((passed + 1))
    else
        echo "FAIL $name"
        failed=$((failed + 1))
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
