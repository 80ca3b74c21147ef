# Sourced first by the suites that build programs of their own (conformance, faults, vm), from
# their run.sh: sets here (the suite's directory), root (the repository, now the working
# directory), build (USMC_BUILD made absolute; default build) and out (build/tests/SUITE).
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root" || exit 1
build=${USMC_BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
out=$build/tests/$(basename "$here")
# The transport is under test, not the short-connection policy (tests/policy covers it): a
# program's connections stay accelerated however many short ones it makes to one server.
export USMC_SHORT_CONN=${USMC_SHORT_CONN:-0}

# suite_programs SAN: the names of the suite's programs ($here/*.c but common.c); with SAN
# tsan, only those with a `/* threads */` line.
suite_programs() {
    local src name
    for src in "$here"/*.c; do
        name=${src##*/}
        name=${name%.c}
        [ "$name" = common ] && continue
        [ "$1" = tsan ] && ! grep -q '^/\* threads \*/$' "$src" && continue
        echo "$name"
    done
}
