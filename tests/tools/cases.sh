#!/usr/bin/env bash
# The cases of tests/tools/run.sh, one function each; `cases.sh NAME` runs case_NAME with a fresh
# work directory and runtime directory (tests/apps/lib.sh), cleaning up on every way out.
# Exit status: 0 pass, 1 fail, 77 skipped.
. "$(dirname "$0")/../apps/lib.sh"

PEER=$USMC_BUILD/tests/tools/peer
SCHEMAS=$ROOT/docs/schema

# server NAME MODE ADDR: a test peer accepting on ADDR; its port in PORT_<NAME>.
server() {
    local port
    port=$(pick_port)
    serve "$1" "$port" "$2" "$PEER" server "$3" "$port"
    printf -v "PORT_$1" %s "$port"
}

# peer_client NAME MODE ADDR PORT BYTES [specials]: a client that made its exchange and keeps its
# connection open until the case ends; stopped like a server.
peer_client() {
    hold "$1" "$2" ok "$PEER" client "${@:3}"
}

pid_of() { echo "${_server_pid[$1]:?unknown peer $1}"; }

# usmc_json SCHEMA OUT SUBCOMMAND ARGS...: runs the subcommand with --json into OUT and checks
# the document against docs/schema/usmc-SCHEMA.schema.json. The exit status is kept in RC.
usmc_json() {
    local schema=$SCHEMAS/usmc-$1.schema.json out=$2
    shift 2
    RC=0
    "$USMC" "$@" --json >"$out" || RC=$?
    python3 - "$schema" "$out" <<'PY' || fail "usmc $* --json does not match $schema: $(cat "$out")"
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft7Validator.check_schema(schema)
jsonschema.Draft7Validator(schema).validate(json.load(open(sys.argv[2])))
PY
}

# jget FILE EXPR: a Python expression over the JSON document d in FILE.
jget() {
    python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))
PY
}

expect() {
    [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
    log "$1: $2"
}

sockets() { "$USMC" ss --rundir "$RD" "$@" || fail "usmc ss $* failed"; }

# ---------------------------------------------------------------------------- cases

case_ss_accelerated() {
    export USMC_RING_SIZE=65536
    server srv acc 127.0.0.1
    peer_client cli acc 127.0.0.1 "$PORT_srv" 100000
    local s c j=$WORK/ss.json
    s=$(pid_of srv) c=$(pid_of cli)

    usmc_json ss "$j" ss --rundir "$RD"
    expect "connections" "$(jget "$j" 'sorted((x["side"], x["pid"], x["mode"], x["state"]) for x in d["sockets"])')" \
        "[('client', $c, 'SMCD', 'ESTAB'), ('server', $s, 'SMCD', 'ESTAB')]"
    expect "the client's peer is the server's port" \
        "$(jget "$j" '[x["peer"] for x in d["sockets"] if x["side"] == "client"]')" "['127.0.0.1:$PORT_srv']"
    usmc_json ss "$j" ss --rundir "$RD" -l
    expect "listening only" "$(jget "$j" '[(x["side"], x["pid"], x["state"], x["local"], x["mode"]) for x in d["sockets"]]')" \
        "[('listener', $s, 'LISTEN', '127.0.0.1:$PORT_srv', 'SMCD')]"
    usmc_json ss "$j" ss --rundir "$RD" -a
    expect "all" "$(jget "$j" 'len(d["sockets"])')" 3

    # Text: a header, then one line per socket, mode last.
    expect "text lines" "$(sockets | tail -n +2 | awk '{ print $NF }' | sort | uniq -c | xargs)" "2 SMCD"
    expect "text listening" "$(sockets -l | tail -n +2 | awk '{ print $1, $3 }')" "LISTEN $s"

    # The cursors come from the live segment: the 4-byte header and 100000 bytes each way, all
    # read (a ring that rewound counts the gap it left in its cursors too, so: at least that).
    usmc_json ss "$j" ss --rundir "$RD" -d
    expect "client rings" "$(jget "$j" '[(x["detail"]["tx_ring_size"], x["detail"]["segment"]["state"], x["detail"]["segment"]["tx"]["prod"] >= 100004, x["detail"]["segment"]["tx"]["prod"] == x["detail"]["segment"]["tx"]["cons"], x["detail"]["segment"]["rx"]["prod"] >= 100000) for x in d["sockets"] if x["side"] == "client"]')" \
        "[(65536, 'attached', True, True, True)]"
    expect "server rings" "$(jget "$j" '[(x["detail"]["rx_ring_size"], x["detail"]["segment"]["rx"]["cons"] >= 100004, x["detail"]["segment"]["tx"]["prod"] >= 100000) for x in d["sockets"] if x["side"] == "server"]')" \
        "[(65536, True, True)]"
    expect "text -d" "$(sockets -d | grep -c ' attached tx:')" 2

    # A killed process disappears, with its table.
    kill -KILL "$c"
    _reap "$c"
    unset "_server_pid[cli]"
    usmc_json ss "$j" ss --rundir "$RD" -a
    expect "after the kill" "$(jget "$j" 'sorted(set(x["pid"] for x in d["sockets"]))')" "[$s]"
    [ -z "$(ls "$RD/socks" | grep "^$c-")" ] || fail "the killed client's table is still there"
}

case_ss_fallback() {
    server accsrv acc 127.0.0.1
    peer_client plaincli plain 127.0.0.1 "$PORT_accsrv" 1000
    server plainsrv plain 127.0.0.1
    peer_client acccli acc 127.0.0.1 "$PORT_plainsrv" 1000
    local j=$WORK/ss.json
    usmc_json ss "$j" ss --rundir "$RD"
    expect "fallen back" "$(jget "$j" 'sorted((x["side"], x["pid"], x["mode"], x["decline"]["code"], x["decline"]["name"]) for x in d["sockets"])')" \
        "[('client', $(pid_of acccli), 'TCP', '0x03010000', 'peer_not_usmc'), ('server', $(pid_of accsrv), 'TCP', '0x03010000', 'client_not_usmc')]"
    grep -q ' TCP 0x03010000 peer_not_usmc$' <<<"$(sockets)" || fail "no text line for the client's fallback"
    grep -q ' TCP 0x03010000 client_not_usmc$' <<<"$(sockets)" || fail "no text line for the server's fallback"
    usmc_json ss "$j" ss --rundir "$RD" -d
    expect "no rings when fallen back" "$(jget "$j" '[x["detail"] for x in d["sockets"]]')" "[None, None]"
}

# Counters by side, the special calls and the ring histogram, surviving exit, then reset.
case_stats() {
    server accsrv acc 127.0.0.1
    peer_client special acc 127.0.0.1 "$PORT_accsrv" 5000 specials
    peer_client plaincli plain 127.0.0.1 "$PORT_accsrv" 1000
    server plainsrv plain 127.0.0.1
    peer_client acccli acc 127.0.0.1 "$PORT_plainsrv" 1000
    local j=$WORK/stats.json
    usmc_json stats "$j" stats --rundir "$RD"
    expect "client side" "$(jget "$j" '(d["client"]["conn_accelerated"], d["client"]["conn_fallback"], [(r["name"], r["code"], r["count"]) for r in d["client"]["fallback_reasons"]])')" \
        "(1, 1, [('peer_not_usmc', '0x03010000', 1)])"
    expect "server side" "$(jget "$j" '(d["server"]["conn_accelerated"], d["server"]["conn_fallback"], [(r["name"], r["count"]) for r in d["server"]["fallback_reasons"]])')" \
        "(1, 1, [('client_not_usmc', 1)])"
    expect "rings" "$(jget "$j" '(d["client"]["ring_tx"]["256K"], d["client"]["ring_rx"]["256K"], d["server"]["ring_tx"]["256K"], sum(d["server"]["ring_rx"].values()))')" \
        "(1, 1, 1, 1)"
    # (spin_core_lost counts how busy the machine was: only its presence is checked.)
    expect "special calls" "$(jget "$j" '{k: v for k, v in d["special_calls"].items() if k != "spin_core_lost"}, "spin_core_lost" in d["special_calls"]')" \
        "({'peek_calls': 1, 'urgent_calls': 1, 'sendfile_calls': 1, 'splice_calls': 1, 'sigurg_sent': 0, 'sigurg_unverified': 0, 'sigurg_denied': 0}, True)"
    expect "totals" "$(jget "$j" '(d["total"]["conn_accelerated"], d["total"]["conn_fallback"], d["total"]["bytes_sent_shm"] >= 2 * 5004, d["running"])')" \
        "(2, 2, True, 3)"
    # The lines other tests parse keep their names.
    expect "plain lines" "$("$USMC" stats --rundir "$RD" | awk '$1 ~ /^(conn_accelerated|conn_fallback|fallback_peer_not_usmc|fallback_client_not_usmc|server_fallback_client_not_usmc|peek_calls)$/ { printf "%s=%s ", $1, $2 }')" \
        "conn_accelerated=2 conn_fallback=2 fallback_peer_not_usmc=1 fallback_client_not_usmc=1 peek_calls=1 server_fallback_client_not_usmc=1 "

    # Counters outlive their processes.
    for name in special plaincli acccli accsrv plainsrv; do stop "$name"; done
    usmc_json stats "$j" stats --rundir "$RD"
    expect "after exit" "$(jget "$j" '(d["total"]["conn_accelerated"], d["total"]["conn_fallback"], d["running"])')" "(2, 2, 0)"

    # Reset zeroes only the caller's own: a file of another owner stays, and is never counted.
    local own foreign=
    own=$(ls "$RD/stats" | head -n 1)
    if [ "$(id -u)" -eq 0 ]; then
        foreign=$RD/stats/foreign
        cp "$RD/stats/$own" "$foreign"
        chown 65534 "$foreign"
    fi
    if [ -n "$foreign" ]; then
        "$USMC" stats --rundir "$RD" >/dev/null 2>"$WORK/err" || fail "usmc stats failed"
        grep -q "holds the counters of 1 processes of another user, left out" "$WORK/err" ||
            fail "usmc stats did not say it left another user's counters out: $(cat "$WORK/err")"
    fi
    "$USMC" stats --rundir "$RD" reset || fail "reset failed"
    usmc_json stats "$j" stats --rundir "$RD"
    expect "after reset" "$(jget "$j" '(d["total"]["conn_accelerated"], d["total"]["conn_fallback"], d["processes"], sum(d["special_calls"].values()))')" "(0, 0, 0, 0)"
    if [ -n "$foreign" ]; then
        [ -f "$foreign" ] || fail "reset removed another user's file"
        rm -f "$foreign"
    fi

    # A running process keeps counting after a reset, from zero.
    server srv2 acc 127.0.0.1
    peer_client cli2 acc 127.0.0.1 "$PORT_srv2" 100
    "$USMC" stats --rundir "$RD" reset || fail "reset failed"
    peer_client cli3 acc 127.0.0.1 "$PORT_srv2" 100
    usmc_json stats "$j" stats --rundir "$RD"
    expect "counted after a reset" "$(jget "$j" '(d["client"]["conn_accelerated"], d["server"]["conn_accelerated"], d["running"])')" "(1, 1, 3)"
}

# Every byte counted once: more threads than the counters have slots, half of them at once,
# then as many more in the slots the first left, then 70 forked children that leave theirs
# taken (peer.c `threads`): 271 exchanges of 1000 bytes out (and a 4-byte header) and back.
case_stats_threads() {
    server accsrv acc 127.0.0.1
    peer_client many acc 127.0.0.1 "$PORT_accsrv" 1000 threads
    local j=$WORK/stats.json
    usmc_json stats "$j" stats --rundir "$RD"
    expect "bytes of every thread" "$(jget "$j" '(d["total"]["conn_accelerated"], d["total"]["bytes_sent_shm"], d["total"]["bytes_recv_shm"])')" \
        "(542, 543084, 543084)"
}

case_check() {
    local j=$WORK/check.json port
    server accsrv acc 127.0.0.1
    usmc_json check "$j" check --rundir "$RD" "127.0.0.1:$PORT_accsrv"
    expect "accelerated: status" "$RC" 0
    expect "accelerated" "$(jget "$j" '(d["registry"]["verdict"], d["connection"]["result"], d["accelerated"])')" \
        "('registered', 'accelerated', True)"
    usmc_json check "$j" check --rundir "$RD" --no-connect "127.0.0.1:$PORT_accsrv"
    expect "registry only: status" "$RC" 0
    expect "registry only" "$(jget "$j" '(d["registry"]["verdict"], d["connection"])')" "('registered', None)"
    grep -qx 'verdict: *accelerated' <<<"$("$USMC" check --rundir "$RD" "127.0.0.1:$PORT_accsrv")" ||
        fail "no text verdict"
    # The probe connected for real, and the server took it through shared memory.
    expect "the probe's connection" "$(stat_value server_conn_accelerated)" 2

    server plainsrv plain 127.0.0.1
    usmc_json check "$j" check --rundir "$RD" "localhost:$PORT_plainsrv"
    expect "plain server: status" "$RC" 1
    expect "plain server" "$(jget "$j" '(d["registry"]["verdict"], d["connection"]["result"], d["connection"]["decline"], d["accelerated"])')" \
        "('not_registered', 'fallback', {'code': '0x03010000', 'name': 'peer_not_usmc'}, False)"

    port=$(pick_port)
    usmc_json check "$j" check --rundir "$RD" "127.0.0.1:$port"
    expect "nobody listens: status" "$RC" 1
    expect "nobody listens" "$(jget "$j" '(d["registry"]["verdict"], d["connection"]["result"])')" "('not_registered', 'error')"

    # The policy: judged from the registry, then applied by the real connection.
    USMC_POLICY="exclude port $PORT_accsrv" usmc_json check "$j" check --rundir "$RD" "127.0.0.1:$PORT_accsrv"
    expect "policy: status" "$RC" 1
    expect "policy" "$(jget "$j" '(d["registry"]["verdict"], d["connection"]["result"], d["connection"]["decline"]["name"])')" \
        "('policy', 'fallback', 'policy')"
    USMC_POLICY="include proto smc; default none" usmc_json check "$j" check --rundir "$RD" --no-connect "127.0.0.1:$PORT_accsrv"
    expect "policy for plain sockets only" "$(jget "$j" '(d["registry"]["verdict"], "IPPROTO_SMC sockets are admitted" in d["registry"]["detail"])')" \
        "('policy', True)"
    USMC_POLICY="exclude peer 10.0.0.0/8" usmc_json check "$j" check --rundir "$RD" --no-connect "127.0.0.1:$PORT_accsrv"
    expect "policy elsewhere" "$(jget "$j" 'd["registry"]["verdict"]')" registered

    # A runtime directory others can write: judged as usmc run judges it, and not tried.
    local open=$WORK/open
    mkdir "$open" && chmod 777 "$open"
    usmc_json check "$j" check --rundir "$open" "127.0.0.1:$PORT_accsrv"
    expect "open runtime directory: status" "$RC" 1
    expect "open runtime directory" "$(jget "$j" '(d["registry"]["verdict"], d["registry"]["detail"], d["connection"]["result"], d["connection"]["detail"])')" \
        "('rundir_unusable', 'runtime directory $open is writable by others (mode 777): nothing is accelerated in it', 'error', 'not tried: the library would not use the runtime directory')"

    usmc_json check "$j" check --rundir "$RD" --no-connect "127.0.0.2:$PORT_accsrv"
    expect "another address: status" "$RC" 1
    expect "another address" "$(jget "$j" 'd["registry"]["verdict"]')" other_address

    for bad in "" "127.0.0.1" "::1:80" "127.0.0.1:0" "127.0.0.1:70000" "[::1]80" "--bogus 127.0.0.1:80"; do
        RC=0
        # shellcheck disable=SC2086
        "$USMC" check --rundir "$RD" $bad >/dev/null 2>&1 || RC=$?
        expect "usage error '$bad'" "$RC" 2
    done

    if ip -6 addr show dev lo 2>/dev/null | grep -q 'inet6 ::1'; then
        server v6srv acc ::1
        usmc_json check "$j" check --rundir "$RD" "[::1]:$PORT_v6srv"
        expect "IPv6: status" "$RC" 0
        expect "IPv6" "$(jget "$j" '(d["address"], d["connection"]["result"])')" "('::1', 'accelerated')"
    fi
}

# A listener in another network namespace is registered in the same runtime directory, but
# loopback here does not reach it.
case_check_netns() {
    local j=$WORK/check.json
    new_netns "usmc-tools-$$"
    NETNS=usmc-tools-$$ server nssrv acc 127.0.0.1
    usmc_json check "$j" check --rundir "$RD" "127.0.0.1:$PORT_nssrv"
    expect "status" "$RC" 1
    expect "other namespace" "$(jget "$j" '(d["registry"]["verdict"], d["connection"]["result"])')" \
        "('other_netns', 'error')"
}

# usmc region: a region made and shown (its JSON against the schema), a listener and the peer
# attached to it seen there, and what the tools and the library say of regions that cannot
# be used: missing, too small, truncated below what its header says, of another format
# version, not readable.
case_region() {
    . "$ROOT/tests/lib/sanitizer.sh"
    local r=$WORK/region j=$WORK/region.json bad out
    "$USMC" region create "$r" --size 16M --lease 2000 >/dev/null || fail "region create"
    RC=0
    "$USMC" region create "$r" --size 16M >/dev/null 2>"$WORK/err" || RC=$?
    expect "create over a region: status" "$RC" 1
    grep -q "holds a region already" "$WORK/err" || fail "create over a region: $(cat "$WORK/err")"
    USMC_DEVICE=ivshmem:$r server regsrv acc 127.0.0.1
    usmc_json region "$j" region status "$r"
    expect "status" "$RC" 0
    expect "a peer and its listener" "$(jget "$j" '(d["lease_ms"], d["mapping"]["kind"], len(d["peers"]) >= 1, [l["port"] for l in d["listeners"]] == [int("'"$PORT_regsrv"'")])')" \
        "(2000, 'file', True, True)"
    "$USMC" region status "$r" | grep -q "^$PORT_regsrv " || fail "status lists no listener"
    stop regsrv

    # check_bad WHAT FILE MESSAGE: usmc run refuses it (status 2), usmc region status too
    # (status 1), saying MESSAGE; the library says it once and runs without the region.
    check_bad() {
        RC=0
        "$USMC" run --rundir "$RD" --device "ivshmem:$2" -- true 2>"$WORK/err" || RC=$?
        expect "usmc run, $1: status" "$RC" 2
        grep -q "$3" "$WORK/err" || fail "usmc run, $1: $(cat "$WORK/err")"
        RC=0
        "$USMC" region status "$2" >/dev/null 2>"$WORK/err" || RC=$?
        expect "usmc region status, $1: status" "$RC" 1
        grep -q "$3" "$WORK/err" || fail "usmc region status, $1: $(cat "$WORK/err")"
        out=$(USMC_DEVICE=ivshmem:$2 LD_PRELOAD=$(san_preload "$USMC_BUILD") USMC_RUNDIR=$RD \
            "$PEER" server 127.0.0.1 "$(pick_port)" 2>&1 & sleep 0.5; kill $! 2>/dev/null || true)
        grep -q "$3" <<<"$out" || fail "the library, $1: '$out'"
    }
    check_bad missing "$WORK/none" "No such file or directory"
    bad=$WORK/small && head -c 1000 /dev/zero >"$bad"
    check_bad "too small" "$bad" "too small to hold a region"
    bad=$WORK/truncated && cp "$r" "$bad" && truncate -s 8M "$bad"
    check_bad truncated "$bad" "smaller than its header claims"
    bad=$WORK/version && cp "$r" "$bad" && printf '\x09' | dd of="$bad" bs=1 seek=8 conv=notrunc 2>/dev/null
    check_bad "another version" "$bad" "another format version"
    bad=$WORK/other && head -c $((8 << 20)) /dev/urandom >"$bad"
    check_bad "not a region" "$bad" "not a usmc region"
    if [ "$(id -u)" -eq 0 ] && command -v runuser >/dev/null; then
        bad=$WORK/private && cp "$r" "$bad" && chmod 600 "$bad" && chmod 755 "$WORK"
        RC=0
        runuser -u nobody -- "$USMC" region status "$bad" >/dev/null 2>"$WORK/err" || RC=$?
        expect "usmc region status, not readable: status" "$RC" 1
        grep -q "Permission denied" "$WORK/err" || fail "not readable: $(cat "$WORK/err")"
    fi
}

name=${1:?usage: cases.sh CASE}
declare -F "case_$name" >/dev/null || fail "no case $name"
app_begin "tools-$name"
"case_$name"
log "$name: ok"
