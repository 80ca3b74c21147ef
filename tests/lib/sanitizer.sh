# shellcheck shell=bash
# The sanitizer a usmc build was made with (make SAN=...), for suites that build programs to run
# against it: a program that loads a sanitized library must carry the same runtime.

# san_of BUILD: asan, tsan, or nothing for a plain build, as BUILD/lib/libusmc.so was linked.
san_of() {
    case $(readelf -d "$1/lib/libusmc.so" 2>/dev/null) in
    *'[libasan.so'*) echo asan ;;
    *'[libtsan.so'*) echo tsan ;;
    esac
}

# san_cflags BUILD: the compiler flags that give a program the build's sanitizer.
san_cflags() {
    case $(san_of "$1") in
    asan) echo "-fsanitize=address,undefined -fno-sanitize-recover=all" ;;
    tsan) echo "-fsanitize=thread" ;;
    esac
}

# san_reports FILE...: succeeds when a sanitizer reported something in one of the logs.
san_reports() {
    grep -qE '^(==[0-9]+==ERROR: [A-Za-z]+Sanitizer|WARNING: ThreadSanitizer)|: runtime error: ' \
        "$@" 2>/dev/null
}

# san_preload BUILD: LD_PRELOAD that loads BUILD's library as usmc run does: a sanitizer's
# runtime before it (AddressSanitizer) or after it (ThreadSanitizer).
san_preload() {
    local lib=$1/lib/libusmc.so rt
    rt=$(readelf -d "$lib" | sed -n 's/.*Shared library: \[\(lib[at]san\.so[^]]*\)\].*/\1/p')
    case $(san_of "$1") in
    asan) echo "$rt:$lib" ;;
    tsan) echo "$lib:$rt" ;;
    *) echo "$lib" ;;
    esac
}
