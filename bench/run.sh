#!/usr/bin/env bash
# The benchmark driver: every workload over plain TCP loopback, Unix domain sockets where the
# application has them, usmc, and usmc busy-polling, in one run, server and client pinned to
# different cores, repetitions interleaved across modes (in reverse order every other time) so
# that drift in the machine's load, and what one mode leaves behind, touch every mode alike. The
# region workload has modes of its own, between two network namespaces (TCP over a veth, usmc
# through an ivshmem region), and its ratios are against TCP over the veth. Writes bench/results/DATE.md (machine, one table per workload with
# medians, min–max and ratios against TCP), DATE.tsv (every figure) and DATE.png (a plot).
#
#   bench/run.sh [--quick] [--reps N] [workload...]     all workloads when none is named
#   bench/run.sh --list
#
# Environment: USMC_BUILD (default build) selects the usmc build, BENCH_SECONDS the length of a
# timed run (5 s, --quick 2 s), BENCH_RESULTS where the results go (bench/results).
set -uo pipefail

. "$(dirname "$0")/lib.sh"

ALL_WORKLOADS=(sockperf_pp sockperf_tp msgrate stream redis nginx nginx_prefork fastcgi proxy fallback connrate idle iperf3 bare_ring nvme crc erm region)

usage() {
    say "usage: bench/run.sh [--quick] [--reps N] [workload...] | bench/run.sh --list"
    exit 2
}

list() {
    local name
    for name in "${ALL_WORKLOADS[@]}"; do
        load_workload "$name"
        printf '%-12s %s (%s; %s; modes: %s)\n' "$name" "$WL_TITLE" "$WL_UNIT" \
            "$(better)" "$WL_MODES"
    done
}

QUICK=0
REPS=
selected=()
while [ $# -gt 0 ]; do
    case $1 in
        --list) list; exit 0 ;;
        --quick) QUICK=1 ;;
        --reps) [ $# -ge 2 ] || usage; REPS=$2; shift ;;
        -h | --help) usage ;;
        -*) usage ;;
        *)
            [ -f "$WL_DIR/$1.sh" ] || { say "unknown workload '$1' (bench/run.sh --list)"; exit 2; }
            selected+=("$1")
            ;;
    esac
    shift
done
[ ${#selected[@]} -gt 0 ] || selected=("${ALL_WORKLOADS[@]}")
if [ "$QUICK" = 1 ]; then
    REPS=${REPS:-2}
    SECS=${BENCH_SECONDS:-2}
fi
REPS=${REPS:-5}
[[ $REPS =~ ^[1-9][0-9]*$ ]] || usage
export QUICK

# selected_packages [missing]: the packages the selected workloads' programs come from, each once
# (with "missing", only those of programs this machine lacks)
selected_packages() {
    local name p list packages=()
    for name in "${selected[@]}"; do
        load_workload "$name"
        if [ "${1-}" = missing ]; then list=$(missing_programs); else list=${WL_NEEDS:-}; fi
        for p in $list; do
            [[ " ${packages[*]} " = *" ${p#*:} "* ]] || packages+=("${p#*:}")
        done
    done
    echo "${packages[*]}"
}

# install_needed: as root with apt-get, the packages of what the selected workloads run and this
# machine lacks (BENCH_INSTALL=0: never); a workload whose programs are still missing is skipped.
install_needed() {
    local packages
    read -ra packages <<<"$(selected_packages missing)"
    [ ${#packages[@]} -gt 0 ] && [ "${BENCH_INSTALL:-1}" != 0 ] && [ "$(id -u)" -eq 0 ] &&
        command -v apt-get >/dev/null || return 0
    say "installing ${packages[*]}"
    "$ROOT/scripts/install-deps.sh" "${packages[@]}" >/dev/null 2>&1 ||
        say "installing failed: the workloads that need it are skipped"
}

bench_begin
install_needed
build_programs || { say "building the benchmark programs failed"; exit 1; }
[ -x "$USMC" ] || say "warning: $USMC is missing (run make): the usmc modes will fail"

stamp=$(date +%Y-%m-%d-%H%M)
RESULTS=${BENCH_RESULTS:-$BENCH_DIR/results}
mkdir -p "$RESULTS"
# a second run within the same minute keeps the first one's results
for n in $(seq 2 99); do
    [ -e "$RESULTS/$stamp.md" ] || break
    stamp=${stamp%-[0-9]}-$n
done
MD=$RESULTS/$stamp.md
TSV=$RESULTS/$stamp.tsv
PNG=$RESULTS/$stamp.png
: >"$TSV"

record() { (IFS=$'\t'; printf '%s\n' "$*") >>"$TSV"; }

# values WORKLOAD CASE MODE: the figures of one row, one per line
values() {
    awk -F'\t' -v w="$1" -v c="$2" -v m="$3" '$1 == "V" && $2 == w && $3 == c && $4 == m { print $5 }' "$TSV"
}

# median WORKLOAD CASE MODE: the median of a row
median() {
    values "$1" "$2" "$3" | summarize | cut -d' ' -f1
}

# lscpu_field NAME: one line of lscpu's summary
lscpu_field() { lscpu | sed -n "s/^$1: *//p" | head -n 1; }

# idle_policy: how an idle core waits, which decides what waking a sleeper costs: the floor
# of every mode that sleeps (a guest that halts at once pays an exit to its host per wake-up)
idle_policy() {
    local d=/sys/devices/system/cpu/cpuidle p=/sys/module/haltpoll/parameters/guest_halt_poll_ns
    [ -r $d/current_driver ] || { echo "not reported"; return; }
    printf 'cpuidle driver %s, governor %s' "$(cat $d/current_driver)" \
        "$(cat $d/current_governor_ro 2>/dev/null || cat $d/current_governor 2>/dev/null)"
    [ -r $p ] && printf '; a guest idle core polls %s ns before it halts' "$(cat $p)"
    echo
}

machine() {
    local hv
    hv=$(lscpu_field 'Hypervisor vendor')
    echo "## Machine"
    echo
    echo "- CPU: $(lscpu_field 'Model name'); $(nproc) online: $(lscpu_field 'Socket(s)') socket(s) × $(lscpu_field 'Core(s) per socket') core(s) × $(lscpu_field 'Thread(s) per core') thread(s)${hv:+; virtual machine ($hv)}"
    echo "- memory: $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    echo "- kernel: $(uname -r); $(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-}")"
    echo "- idle cores: $(idle_policy)"
    echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- usmc: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown), build $USMC_BUILD"
    echo "- tools: $(for p in $(selected_packages); do
        dpkg-query -W -f '${Package} ${Version}, ' "$p" 2>/dev/null; done | sed 's/, $//')"
    echo
    echo "## Method"
    echo
    echo "Server on CPU $SERVER_CPU, client on CPU $CLIENT_CPU (taskset). Each figure: $REPS runs of ${SECS} s,"
    echo "interleaved across modes, in reverse order every other time; the tables give the median, the range, and the median's ratio"
    echo "to plain TCP loopback. Modes: **TCP** plain loopback; **Unix socket** where the application"
    echo "has one; **usmc**: \`usmc run\` on both ends (the library's default busy-poll); **usmc,"
    echo "busy-poll**: the same with USMC_BUSY_POLL_US=$BUSY_POLL_US; **usmc, sleeping**: with"
    echo "USMC_BUSY_POLL_US=0, every wait a sleep; **usmc, short connections accelerated too**: with"
    echo "USMC_SHORT_CONN=0, no connection kept on TCP for being short; **usmc client, plain server** and **plain client,"
    echo "usmc server**: the fallback paths. Each usmc mode has its own runtime directory; its counters are listed"
    echo "under the table to show whether shared memory carried the connections. The region workload"
    echo "compares kernels sharing an ivshmem region, stood in for by two network namespaces joined by a veth,"
    echo "each side with a runtime directory of its own: **TCP over veth** between them, against usmc through"
    echo "a region file both map (default settings, and busy-polling $BUSY_POLL_US µs); its ratios are to TCP over veth."
    echo
}

# table NAME: the workload's results, as Markdown
table() {
    local name=$1 case mode s median min max ok total tcp acc fb note
    printf '## %s: %s\n\n' "$name" "$WL_TITLE"
    printf '%s; %s.\n\n' "$WL_UNIT" "$(better)"
    echo "| case | mode | median | min – max | vs $(mode_name "$WL_REF") | runs |"
    echo "|---|---|---:|---:|---:|---:|"
    for case in "${WL_CASES[@]}"; do
        tcp=$(median "$name" "$case" "$WL_REF")
        for mode in $WL_MODES; do
            read -r median min max ok total < <(values "$name" "$case" "$mode" | summarize)
            [ "$total" -gt 0 ] || continue # nothing to measure in this case
            if [ "$median" = FAILED ]; then
                printf '| %s | %s | FAILED | | | %s/%s |\n' "$(wl_label "$case")" "$(mode_name "$mode")" "$ok" "$total"
                continue
            fi
            printf '| %s | %s | %s | %s – %s | %s | %s/%s |\n' "$(wl_label "$case")" \
                "$(mode_name "$mode")" "$(fmt "$median")" "$(fmt "$min")" "$(fmt "$max")" \
                "$(ratio "$median" "$tcp")" "$ok" "$total"
        done
    done
    echo
    for note in "${WL_NOTES[@]}"; do
        printf -- '- %s\n' "$note"
    done
    for mode in $WL_MODES; do
        s=$(awk -F'\t' -v w="$name" -v m="$mode" '$1 == "S" && $2 == w && $3 == m { print $4, $5 }' "$TSV")
        [ -n "$s" ] || continue
        read -r acc fb <<<"$s"
        printf -- '- %s: usmc counted %s accelerated connection ends, %s fallbacks' "$(mode_name "$mode")" "$acc" "$fb"
        if [[ $mode != fallback* ]] && [ "$acc" -eq 0 ]; then
            printf ' — **not accelerated: these figures are not usmc'"'"'s**'
        elif [[ $mode = fallback* ]] && [ "$acc" -gt 0 ]; then
            printf ' — **accelerated: this is not the fallback path**'
        fi
        echo
    done
    # What the clients said beside their figures, from each row's last repetition.
    for case in "${WL_CASES[@]}"; do
        for mode in $WL_MODES; do
            awk -F'\t' -v w="$name" -v c="$case" -v m="$mode" \
                '$1 == "N" && $2 == w && $3 == c && $4 == m { k = $5; sub(/:.*/, "", k); last[k] = $5; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
                 END { for (i = 1; i <= n; i++) print last[order[i]] }' "$TSV" |
                while IFS= read -r line; do
                    printf -- '- %s, %s: %s\n' "$(wl_label "$case")" "$(mode_name "$mode")" "$line"
                done
        done
    done
    echo
}

# ceiling NAME: for a workload that also ran bare_ring (mode bare), every mode's median as a
# multiple of that limit, measured in the same minutes
ceiling() {
    local name=$1 case mode bare median
    printf '### %s against the bare limit\n\n' "$name"
    echo "Each mode's median as a multiple of the bare memfd ring's, measured in the same minutes:"
    echo "for latency a floor, for throughput a ceiling. The ring copies each message in one piece,"
    echo "so a transport that overlaps the two copies of a large message can pass it there."
    echo
    echo "| case | mode | median | × bare ring |"
    echo "|---|---|---:|---:|"
    for case in "${WL_CASES[@]}"; do
        bare=$(median "$name" "$case" bare)
        is_number "$bare" || continue # no bare figure in this case
        for mode in $WL_MODES; do
            [ "$mode" != bare ] || continue
            [ -n "$(values "$name" "$case" "$mode")" ] || continue # nothing measured
            median=$(median "$name" "$case" "$mode")
            printf '| %s | %s | %s | %s |\n' "$(wl_label "$case")" "$(mode_name "$mode")" \
                "$(fmt "$median")" "$(ratio "$median" "$bare")"
        done
    done
    echo
}

# run_workload NAME: every case, repetition and mode of one workload, recorded in the TSV
run_workload() {
    local name=$1 case mode modes rep line missing
    load_workload "$name"
    missing=$(missing_programs | sed 's/:[^ ]*//g; s/ $//')
    if [ -n "$missing" ]; then
        say "== $name: skipped: $missing not installed (scripts/install-deps.sh installs it)"
        printf '## %s: %s\n\nNot measured: %s not installed.\n\n' "$name" "$WL_TITLE" "$missing" >>"$MD"
        return
    fi
    if ! setup_workload; then
        say "== $name: skipped: $SKIP_REASON"
        printf '## %s: %s\n\nNot measured: %s.\n\n' "$name" "$WL_TITLE" "$SKIP_REASON" >>"$MD"
        return
    fi
    say "== $name: $WL_TITLE ($WL_UNIT; $(better))"
    record W "$name" "$WL_TITLE" "$WL_UNIT" "$WL_BETTER" "$WL_REF"
    for line in "${WL_NOTES[@]}"; do
        say "  $line"
        record I "$name" "$line"
    done
    for case in "${WL_CASES[@]}"; do
        if declare -F wl_lower >/dev/null; then
            record C "$name" "$case" "$(wl_label "$case")" "$(wl_lower "$case" && echo lower || echo higher)"
        else
            record C "$name" "$case" "$(wl_label "$case")"
        fi
    done
    start_servers $WL_MODES
    for case in "${WL_CASES[@]}"; do
        for rep in $(seq "$REPS"); do
            # Every other repetition runs the modes in reverse: what a mode leaves behind
            # (TIME_WAIT sockets by the ten thousand, with short connections) then weighs
            # on the modes after it in one repetition and before it in the next.
            modes=$WL_MODES
            [ $((rep % 2)) -eq 1 ] || modes=$(printf '%s\n' $WL_MODES | tac | tr '\n' ' ')
            for mode in $modes; do
                measure "$mode" "$case"
                [ "$FIGURE" != - ] || continue
                record V "$name" "$case" "$mode" "$FIGURE"
                [ -z "$NOTES" ] || while IFS= read -r line; do
                    record N "$name" "$case" "$mode" "$line"
                done <<<"$NOTES"
                say "  $(wl_label "$case"), $(mode_name "$mode"), run $rep/$REPS: $FIGURE"
                [ "$FIGURE" != FAILED ] || failure_detail >&2
            done
        done
    done
    stop_servers
    for mode in $WL_MODES; do
        use_mode "$mode"
        [ -x "$USMC" ] || continue
        case $mode in
            usmc | usmc-bp | usmc-sleep | usmc-allshort | erm | erm-vm | fallback | fallback-server)
                record S "$name" "$mode" "$(usmc_counter "$RD" conn_accelerated)" "$(usmc_counter "$RD" conn_fallback)"
                ;;
            region | region-bp)
                # each side counts its own ends; those through the region, not the local device
                record S "$name" "$mode" \
                    $(($(usmc_counter "$MODE_DIR/rundir-server" ivshmem_conn_accelerated) + $(usmc_counter "$MODE_DIR/rundir-client" ivshmem_conn_accelerated))) \
                    $(($(usmc_counter "$MODE_DIR/rundir-server" conn_fallback) + $(usmc_counter "$MODE_DIR/rundir-client" conn_fallback)))
                ;;
        esac
    done
    teardown_workload
    table "$name" >>"$MD"
    if [[ " $WL_MODES " = *" bare "* && " $WL_MODES " = *" tcp "* ]]; then
        ceiling "$name" >>"$MD"
    fi
}

# median_ratio NAME CASE MODE REFCASE REF: MODE's median over REF's, or nothing without both
median_ratio() {
    awk -v a="$(median "$1" "$2" "$3")" -v b="$(median "$1" "$4" "$5")" \
        'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3g\n", a / b }'
}

# paired_range WORKLOAD CASE MODE REFCASE REFMODE: the lowest and highest of MODE's figure over
# REFMODE's taken repetition by repetition. In one case, one pass over the modes measures both
# within seconds of each other, so what the machine's drift does to the ratio of medians shows
# here; a reference in another case is the same repetition of that case.
paired_range() {
    paste <(values "$1" "$2" "$3") <(values "$1" "$4" "$5") | awk '
        $1 + 0 > 0 && $2 + 0 > 0 {
            r = $1 / $2
            if (!n++ || r < lo) lo = r
            if (n == 1 || r > hi) hi = r
        }
        END { if (n) printf "%.3g – %.3g\n", lo, hi }'
}

# meets RATIO OP BOUND: whether RATIO satisfies "OP BOUND" (<= or >=)
meets() { awk -v r="$1" -v op="$2" -v b="$3" 'BEGIN { exit !(op == "<=" ? r <= b : r >= b) }'; }

# targets: every selected workload's WL_TARGETS against this run's medians, as Markdown, and
# for a target on the sleeping mode the same ratio for the bare ring sleeping: what no
# transport that sleeps can beat on this machine.
targets() {
    local name t case mode op bound ref refcase r met floor floors= what unit range
    echo "## Targets"
    echo
    echo "Each target is a ratio of medians from this run (see the workloads' WL_TARGETS), or a median"
    echo "itself in the workload's unit. Beside it, the same ratio repetition by repetition (or the"
    echo "figure's range), lowest and highest: a bound inside that range is one this machine's noise"
    echo "cannot tell apart from the figure."
    echo
    echo "| workload | case | ratio | target | measured | by repetition | met |"
    echo "|---|---|---|---:|---:|---:|---|"
    for name in "${selected[@]}"; do
        load_workload "$name"
        for t in "${WL_TARGETS[@]}"; do
            read -r case mode op bound ref refcase <<<"$t"
            ref=${ref:-$WL_REF} refcase=${refcase:-$case}
            if [ "$ref" = abs ]; then
                local lo hi
                read -r r lo hi _ <<<"$(values "$name" "$case" "$mode" | summarize)"
                is_number "$r" || r=
                what="$(mode_name "$mode"), median" unit="" range="$(fmt "$lo") – $(fmt "$hi")"
            else
                r=$(median_ratio "$name" "$case" "$mode" "$refcase" "$ref")
                what="$(mode_name "$mode") / $(mode_name "$ref")$([ "$refcase" = "$case" ] ||
                    echo " ($(wl_label "$refcase"))")" unit=" ×"
                range=$(paired_range "$name" "$case" "$mode" "$refcase" "$ref")
            fi
            if [ -z "$r" ]; then
                met="no figure"
            elif meets "$r" "$op" "$bound"; then
                met=yes
            else
                met="**no**"
            fi
            if [ "$mode" = usmc-sleep ] && [[ " $WL_MODES " = *" bare-sleep "* ]]; then
                floor=$(median_ratio "$name" "$case" bare-sleep "$refcase" "$ref")
                [ -z "$floor" ] || floors+="- $name, $(wl_label "$case"): $(mode_name bare-sleep) / $(mode_name "$ref") = $floor ×: the target is $(
                    meets "$floor" "$op" "$bound" && echo within || echo out of) reach of a transport that sleeps, on this machine"$'\n'
            fi
            printf '| %s | %s | %s | %s %s%s | %s | %s | %s |\n' "$name" "$(wl_label "$case")" \
                "$what" "$([ "$op" = "<=" ] && echo ≤ || echo ≥)" "$bound" "$unit" \
                "${r:-—}${r:+$unit}" "$range" "$met"
        done
    done
    echo
    [ -z "$floors" ] || printf 'The sleeping targets against the floor, one wake-up and one sleep per message:\n\n%s\n' "$floors"
}

# plot: matplotlib from the distribution if no python3 on PATH has it
plot() {
    local py
    for py in python3 /usr/bin/python3; do
        if "$py" -c 'import matplotlib' 2>/dev/null; then
            "$py" "$BENCH_DIR/plot.py" "$TSV" "$PNG.tmp" && mv "$PNG.tmp" "$PNG" && return 0
            return 1
        fi
    done
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        say "installing python3-matplotlib for the plot"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-matplotlib >/dev/null 2>&1 &&
            /usr/bin/python3 "$BENCH_DIR/plot.py" "$TSV" "$PNG.tmp" && mv "$PNG.tmp" "$PNG" && return 0
    fi
    say "no plot: python3 with matplotlib is not available (apt-get install python3-matplotlib)"
    return 1
}

{
    echo "# usmc benchmark, $(date '+%Y-%m-%d %H:%M %Z')"
    echo
    echo "\`bench/run.sh $([ "$QUICK" = 1 ] && echo '--quick ')${selected[*]}\`"
    echo
    machine
} >"$MD"

for name in "${selected[@]}"; do
    run_workload "$name"
done
targets >>"$MD"

if plot; then
    printf '![results](%s)\n' "$(basename "$PNG")" >>"$MD"
fi
say "results: $MD"
