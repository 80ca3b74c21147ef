#!/usr/bin/env bash
# The benchmark driver works: one short repetition of the message-rate workload must produce
# a results table with a figure for every mode, a data file and counters showing that the usmc
# modes went through shared memory; a workload whose program is not installed is skipped with
# a message saying so, and the run goes on. The ERM workload's cases each have the modes that
# measure something in them, and its targets on a figure itself are reported. The figures
# themselves decide nothing here.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1
out=$(mktemp -d "${TMPDIR:-/tmp}/usmc-bench-test.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
. tests/lib/check.sh

# The driver runs from a copy of bench/ beside the tree's build, with one more workload: the
# message rate again, needing a program no machine has.
tree=$out/tree
mkdir -p "$tree/bench" "$tree/build"
tar -C bench --exclude=./results -cf - . | tar -C "$tree/bench" -xf -
ln -s "$PWD/src" "$PWD/scripts" "$PWD/include" "$tree/"
case ${USMC_BUILD:=build} in /*) ;; *) USMC_BUILD=$PWD/$USMC_BUILD ;; esac
export USMC_BUILD
printf '%s\n' '. "$WL_DIR/msgrate.sh"' 'WL_NEEDS="usmc-absent-program:usmc-absent-package"' \
    >"$tree/bench/workloads/absent.sh"
BENCH_INSTALL=0 BENCH_SECONDS=1 BENCH_RESULTS=$out timeout 600 "$tree/bench/run.sh" --reps 1 absent msgrate \
    erm >"$out/log" 2>&1
rc=$?
md=$(ls "$out"/*.md 2>/dev/null | head -n 1)
tsv=${md%.md}.tsv
check "driver exits 0" '[ $rc -eq 0 ] || { tail -n 20 "$out/log"; false; }'
check "results table written" '[ -n "$md" ] && grep -q "^## msgrate" "$md"'
check "a workload lacking its program is skipped" \
    'grep -q "== absent: skipped: usmc-absent-program not installed" "$out/log" &&
     grep -q "^Not measured: usmc-absent-program not installed" "$md" && ! grep -q "^V	absent" "$tsv"'
check "machine recorded" 'grep -q "^- CPU: " "$md" && grep -q "^- kernel: " "$md"'
# figure MODE: the row of the table for MODE has a number as its median
figure() {
    awk -F' *[|] *' -v m="$1" '$2 == "100 B" && $3 == m && $4 ~ /^[0-9.]+$/ { ok = 1 }
        END { exit !ok }' "$md"
}
for mode in "TCP" "Unix socket" "usmc" "usmc, sleeping (no busy-poll)" "bare memfd ring, sleeping"; do
    check "a figure for $mode" "figure '$mode'"
done
check "every figure in the data file" '[ "$(grep -c "^V" "$tsv")" -ge 6 ]'
check "usmc modes used shared memory" \
    '! grep -E "^- usmc.*counted 0 accelerated" "$md" >/dev/null && grep -qE "^- usmc: usmc counted [1-9]" "$md"'
# The targets section: each of msgrate's targets with a ratio computed from the table's medians.
check "targets reported" '[ "$(grep -cE "^[|] msgrate [|] 100 B [|] usmc.* [|] [0-9.e+]+ × [|] [0-9.e+]+ – [0-9.e+]+ [|] (yes|[*][*]no[*][*]) [|]$" "$md")" -eq 2 ]'
# With one repetition, the ratio taken repetition by repetition is the ratio of the medians.
check "by repetition, one repetition is the ratio itself" 'grep -E "^[|] msgrate [|] 100 B [|] usmc" "$md" |
    awk -F" *[|] *" "{ r = \$6; sub(/ ×\$/, \"\", r); if (\$7 != r \" – \" r) bad = 1; n++ } END { exit !(n == 2 && !bad) }"'
check "the sleeping target's floor reported" \
    'grep -qE "^- msgrate, 100 B: bare memfd ring, sleeping / TCP = [0-9.]+ ×: the target is (within|out of) reach of a transport that sleeps, on this machine$" "$md"'
check "target ratio from the medians" 'awk -F" *[|] *" -v t="$(grep -E "^[|] msgrate [|] 100 B [|] usmc, sleeping" "$md" | awk -F" *[|] *" "{ print \$6 }")" "
        \$2 == \"100 B\" && \$3 == \"TCP\" { tcp = \$4 } \$2 == \"100 B\" && \$3 == \"usmc, sleeping (no busy-poll)\" { u = \$4 }
        END { r = u / tcp; t += 0; exit !(t > 0 && (r - t) / t < 0.01 && (t - r) / t < 0.01) }" "$md"'
# erm_row CASE MODE: the ERM table has a figure for MODE in CASE
erm_row() {
    awk -F' *[|] *' -v c="$1" -v m="$2" '$2 == c && $3 == m && $4 ~ /^[0-9.]+$/ { ok = 1 }
        END { exit !ok }' "$md"
}
for mode in "TCP" "usmc" "usmc ERM, shared memory" "usmc ERM, the application's memory" \
    "bare memcpy"; do
    check "erm: a figure for $mode writing 64 KB" "erm_row 'write 64 KB, MiB/s' \"$mode\""
done
check "erm: the bare ring's one-way latency beside ERM's" \
    "erm_row '64 B one way, usec' 'bare memfd ring' && erm_row '64 B one way, usec' 'usmc ERM, shared memory'"
check "erm: no row where a mode measures nothing" \
    '! grep -qE "^[|] (64 B one way, usec [|] bare memcpy|write 64 KB, MiB/s [|] bare memfd ring) " "$md"'
check "erm: the ERM connections were accelerated" \
    'grep -qE "^- usmc ERM, shared memory: usmc counted [1-9]" "$md"'
check "erm: a target on the figure itself" \
    'grep -qE "^[|] erm [|] 64 B one way, usec [|] usmc ERM, shared memory, median [|] ≤ 0.3 [|] [0-9.]+ [|]" "$md"'
check "erm: a ratio target against the bare memcpy" \
    'grep -qE "^[|] erm [|] write 64 KB, MiB/s [|] usmc ERM, shared memory / bare memcpy [|] ≥ 0.9 × [|] [0-9.]+ × [|]" "$md"'
check_end
