# pick_port: prints a TCP port that nothing uses, below the kernel's ephemeral range so no client
# connection can take it meanwhile, and distinct from the ports this shell already took.
_ports=()
pick_port() {
    local port ephemeral
    read -r ephemeral _ </proc/sys/net/ipv4/ip_local_port_range
    while :; do
        port=$((10000 + RANDOM % (ephemeral - 10000)))
        case " ${_ports[*]} " in *" $port "*) continue ;; esac
        if [ -z "$(ss -Htan "( sport = :$port )")" ]; then
            _ports+=("$port")
            echo "$port"
            return
        fi
    done
}
