# Sourced first by the suites that build programs of their own (conformance, faults, vm), from
# their run.sh: sets here (the suite's directory), root (the repository, now the working
# directory), build (USMC_BUILD made absolute; default build) and out (build/tests/SUITE).
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root" || exit 1
build=${USMC_BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
out=$build/tests/$(basename "$here")
