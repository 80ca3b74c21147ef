#!/usr/bin/env bash
# python: an asyncio echo server with 50 concurrent clients in one interpreter, then
# subprocesses started from its event loop (vfork and exec, twice: the second once hung).
. "$(dirname "$0")/lib.sh"
app_begin python
need python3

out=$WORK/python.log
client acc python3 "$(dirname "$0")/asyncio_echo.py" >"$out" 2>&1 ||
    { cat "$out"; fail "the asyncio scenario failed"; }
cat "$out"
grep -qx 'echoes: 50 of 50 right' "$out" || fail "echoes were wrong"
[ "$(grep -c '^subprocess: ' "$out")" -eq 2 ] || fail "the subprocesses did not both run"
expect_accelerated $((50 * 200000))
log "python: ok"
