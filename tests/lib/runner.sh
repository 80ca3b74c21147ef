# The loop of the suites that run one script per scenario (apps, tools): each runs bounded in
# time with its output in a log, and prints PASS, FAIL (with the log's end) or SKIP (exit 77),
# then `N passed, N failed[, N skipped]`. The caller defines scenario_command NAME, which sets
# the array cmd to what runs NAME and returns non-zero when there is no such scenario.

# run_scenarios KIND LIMIT NAME...: exit status 0 unless a scenario failed.
run_scenarios() {
    local kind=$1 limit=$2 logs name log rc start took passed=0 failed=0 skipped=0
    shift 2
    logs=$(mktemp -d "${TMPDIR:-/tmp}/usmc-$kind-logs.XXXXXX")
    for name; do
        log=$logs/$name.log
        if ! scenario_command "$name"; then
            echo "FAIL $name (no such scenario)"
            failed=$((failed + 1))
            continue
        fi
        start=$SECONDS
        timeout -k 10 "$limit" "${cmd[@]}" >"$log" 2>&1
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
}
