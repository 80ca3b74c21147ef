# Helpers for suites that drive examples/smc_echo.c (one server, one client) and judge by the
# echo's verdict and by `usmc stats`. A suite sets USMC (the usmc command) and ECHO (the built
# example), makes its checks with `check` (tests/lib/check.sh), and ends with check_end, which prints
# `N passed, N failed` and gives the exit status.

server=
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/usmc-suite.XXXXXX") || exit 1
. "$(dirname "${BASH_SOURCE[0]}")/ports.sh"

_echo_cleanup() {
    if [ -n "$server" ]; then
        kill "$server" 2>/dev/null
        wait "$server" 2>/dev/null
    fi
    rm -rf "$WORK"
}
trap _echo_cleanup EXIT

# fresh_rundir: prints a new, empty runtime directory (its counters start at zero).
fresh_rundir() {
    mktemp -d "$WORK/rundir.XXXXXX"
}


# stat_of RUNDIR NAME: one counter of `usmc stats`, 0 when it is not listed.
stat_of() {
    "$USMC" stats --rundir "$1" | awk -v k="$2" '$1 == k { v = $2 } END { print v + 0 }'
}

# echo_pair RUNDIR SERVER_ADDR CLIENT_ADDR BYTES [tcp]: the example's server on SERVER_ADDR and
# its client connecting to CLIENT_ADDR, on a fresh port, each prefixed by the command in the
# arrays SERVER_RUN and CLIENT_RUN (e.g. usmc run ... --; empty: the program alone). Prints the
# client's output (`ok BYTES` when the echo was exact) and the server's complaints. ECHO_PORT
# chooses the port.
SERVER_RUN=() CLIENT_RUN=()
echo_pair() {
    local rd=$1 port=${ECHO_PORT:-}
    [ -n "$port" ] || port=$(pick_port)
    # Gone before the server starts: the background job truncates it only when it runs, and
    # the last pair's "listening" must not pass for this server's.
    rm -f "$WORK/server.out"
    USMC_RUNDIR=$rd timeout 30 "${SERVER_RUN[@]}" "$ECHO" server "$2" "$port" ${5:-} \
        >"$WORK/server.out" 2>&1 &
    server=$!
    # A sanitized server on a loaded machine can take seconds to start.
    for _ in $(seq 400); do
        if grep -q listening "$WORK/server.out" || ! kill -0 "$server" 2>/dev/null; then
            break
        fi
        sleep 0.05
    done
    USMC_RUNDIR=$rd timeout 30 "${CLIENT_RUN[@]}" "$ECHO" client "$3" "$port" "$4" ${5:-} 2>&1
    wait "$server"
    server=
    grep -v '^listening$' "$WORK/server.out"
}
