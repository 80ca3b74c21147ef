# Verdicts of the suites that run one program per test (faults, erm): pass NAME and fail NAME
# REASON [FILE...] count into passed and failed (which the caller starts at 0) and print the
# line; a failure shows each file's first lines, indented.
pass() {
    echo "PASS $1"
    passed=$((passed + 1))
}

fail() {
    local name=$1 reason=$2 f
    shift 2
    echo "FAIL $name: $reason"
    for f; do
        [ -s "$f" ] && sed 's/^/    /' "$f" | head -n 40
    done
    failed=$((failed + 1))
}
