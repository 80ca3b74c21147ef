#!/usr/bin/env bash
# Containers: network namespaces sharing one rundir. Joined by a veth pair the connection is
# accelerated; through a NAT router the two ends see different addresses, so it must stay plain.
. "$(dirname "$0")/lib.sh"
app_begin containers
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
need ip iptables redis-server redis-cli

ns=usmc$$
value_size=$((1024 * 1024))

log "direct: veth pair 10.77.0.1 <-> 10.77.0.2"
new_netns "${ns}srv"
new_netns "${ns}cli"
veth "${ns}srv" eth0 10.77.0.1/24 "${ns}cli" eth0 10.77.0.2/24
port=$(pick_port)
NETNS=${ns}srv start_redis direct 10.77.0.1 "$port" acc
NETNS=${ns}cli redis_roundtrip acc 10.77.0.1 "$port" direct "$value_size"
stop direct
expect_accelerated $((2 * value_size))

log "NAT: 10.77.1.2 -> 10.77.1.1 (router, DNAT + MASQUERADE) -> 10.77.2.2"
fresh_rundir
new_netns "${ns}nsrv"
new_netns "${ns}ncli"
new_netns "${ns}gw"
veth "${ns}ncli" eth0 10.77.1.2/24 "${ns}gw" in0 10.77.1.1/24
veth "${ns}gw" out0 10.77.2.1/24 "${ns}nsrv" eth0 10.77.2.2/24
ip -n "${ns}ncli" route add default via 10.77.1.1
ip -n "${ns}nsrv" route add default via 10.77.2.1
ip netns exec "${ns}gw" sysctl -qw net.ipv4.ip_forward=1
port=$(pick_port)
ip netns exec "${ns}gw" iptables -t nat -A PREROUTING -d 10.77.1.1 -p tcp --dport "$port" \
    -j DNAT --to-destination "10.77.2.2:$port"
ip netns exec "${ns}gw" iptables -t nat -A POSTROUTING -o out0 -j MASQUERADE
NETNS=${ns}nsrv start_redis nat 10.77.2.2 "$port" acc
NETNS=${ns}ncli redis_roundtrip acc 10.77.1.1 "$port" nat "$value_size"
# The server must see the router's address, or this phase would not be testing NAT.
seen=$(NETNS=${ns}ncli client acc redis-cli -h 10.77.1.1 -p "$port" CLIENT INFO)
case $seen in
    *"addr=10.77.2.1:"*"laddr=10.77.2.2:$port "*) log "server sees the client as ${seen%% laddr*}" ;;
    *) fail "connection was not translated: $seen" ;;
esac
stop nat
expect_fallback
log "containers: ok"
