# check NAME CONDITION [LOG]: counts a PASS or a FAIL for CONDITION (evaluated); a failure
# shows the end of LOG. check_end prints `N passed, N failed` and gives the exit status.
passed=0 failed=0

check() {
    if eval "$2"; then
        echo "PASS $1"
        passed=$((passed + 1))
    else
        echo "FAIL $1"
        [ -n "${3:-}" ] && [ -f "$3" ] && sed 's/^/    /' "$3" | tail -n 15
        failed=$((failed + 1))
    fi
}

check_end() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
