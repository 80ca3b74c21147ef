#!/usr/bin/env bash
# What stays on TCP between kernels sharing a region (two network namespaces over veth, each
# with a runtime directory of its own, as in region.sh): a plain server, a plain client, a
# client behind address translation (as a guest on QEMU's user networking is), and a client
# attached to another region. Each stays plain TCP byte for byte, its fallback counted by reason.
. "$(dirname "$0")/lib.sh"
app_begin region_fallback
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
accelerating || skip "plain mode: there is nothing to fall back from"
need ip iptables redis-server redis-cli

ns=usmcf$$
REGION=$(mktemp /dev/shm/usmc-app-region.XXXXXX)
OTHER=$(mktemp /dev/shm/usmc-app-region.XXXXXX)
_region_cleanup() {
    local rc=$?
    rm -f "$REGION" "$OTHER"
    (exit "$rc")
    _cleanup
}
trap _region_cleanup EXIT
"$USMC" region create "$REGION" --size 64M --force >/dev/null || fail "cannot make the region"
"$USMC" region create "$OTHER" --size 64M --force >/dev/null || fail "cannot make the other region"
export USMC_DEVICE=ivshmem:$REGION
value=$((256 * 1024))

# phase NAME SERVER_MODE CLIENT_MODE CLIENT_DEVICE SERVER_SIDE_REASON CLIENT_SIDE_REASON: a
# byte-exact round trip through a server on the router's far side when NAT is set, else next
# door, then the fallbacks each side counted.
phase() {
    local name=$1 port srv=10.79.0.1 dst=10.79.0.1
    RD_SRV=$WORK/$name-server RD_CLI=$WORK/$name-client
    mkdir -m 700 "$RD_SRV" "$RD_CLI"
    port=$(pick_port)
    if [ -n "${NAT-}" ]; then
        srv=10.79.2.2 dst=10.79.1.1
        ip netns exec "${ns}gw" iptables -t nat -A PREROUTING -d "$dst" -p tcp --dport "$port" \
            -j DNAT --to-destination "$srv:$port"
    fi
    NETNS=$server_ns RD=$RD_SRV start_redis "$name" "$srv" "$port" "$2"
    USMC_DEVICE=$4 NETNS=$client_ns RD=$RD_CLI redis_roundtrip "$3" "$dst" "$port" "$name" "$value"
    stop "$name"
    expect_side "$RD_SRV" server "$5"
    expect_side "$RD_CLI" client "$6"
}

# expect_side RUNDIR SIDE REASON: nothing accelerated there, and the side's fallbacks (if it ran
# under usmc: REASON not -) all for REASON.
expect_side() {
    local RD=$1 acc n
    [ "$3" = - ] && return 0
    acc=$(stat_value conn_accelerated)
    n=$(stat_value "$2_fallback_$3")
    log "$2: conn_accelerated=$acc $2_fallback_$3=$n"
    [ "$acc" -eq 0 ] || fail "$2: $acc connections accelerated"
    [ "$n" -gt 0 ] || { stats; fail "$2: no fallback for $3"; }
}

new_netns "${ns}s"
new_netns "${ns}c"
veth "${ns}s" eth0 10.79.0.1/24 "${ns}c" eth0 10.79.0.2/24
server_ns=${ns}s client_ns=${ns}c

log "a server without usmc"
phase plain_server plain acc "$USMC_DEVICE" - peer_not_usmc
log "a client without usmc"
phase plain_client acc plain "$USMC_DEVICE" client_not_usmc -
log "a client attached to another region"
phase other_region acc acc "ivshmem:$OTHER" client_not_usmc peer_not_usmc

log "NAT: 10.79.1.2 -> 10.79.1.1 (router, DNAT + MASQUERADE) -> 10.79.2.2"
new_netns "${ns}ns"
new_netns "${ns}nc"
new_netns "${ns}gw"
veth "${ns}nc" eth0 10.79.1.2/24 "${ns}gw" in0 10.79.1.1/24
veth "${ns}gw" out0 10.79.2.1/24 "${ns}ns" eth0 10.79.2.2/24
ip -n "${ns}nc" route add default via 10.79.1.1
ip -n "${ns}ns" route add default via 10.79.2.1
ip netns exec "${ns}gw" sysctl -qw net.ipv4.ip_forward=1
ip netns exec "${ns}gw" iptables -t nat -A POSTROUTING -o out0 -j MASQUERADE
server_ns=${ns}ns client_ns=${ns}nc NAT=1
phase nat acc acc "$USMC_DEVICE" client_not_usmc peer_not_usmc
log "region_fallback: ok"
