# SMC-ERM (bench/erm.c): one-sided writes beside the socket path and the physical limit.
# Writes of 64 KB to 4 MB into memory the peer shares (usmc_erm_alloc()) against a bare memcpy()
# of the same size and against streaming the same sizes through the socket (TCP and usmc); the
# same into the peer's own memory (the kernel's process_vm_writev()). A 64-byte write with a
# remote completion each way, both sides busy-polling their completion queues, against a
# ping-pong through the socket (usmc busy-polling) and the bare memfd ring. What registering
# 1 MB costs, the first time and again.
WL_TITLE="SMC-ERM: one-sided writes, latency, registration"
WL_UNIT="MiB/s for writes, usec for latency and registration"
WL_BETTER="higher throughput and lower times are better"
WL_MODES="tcp usmc usmc-bp erm erm-vm memcpy bare"
WL_CASES=(write-65536 write-262144 write-1048576 write-4194304 oneway-64 rtt-64 reg-1048576 rereg-1048576)
WL_TARGETS=()
for _s in 65536 262144 1048576 4194304; do
    WL_TARGETS+=("write-$_s erm >= 0.9 memcpy" "write-$_s erm >= 2 usmc")
done
WL_TARGETS+=("oneway-64 erm <= 0.3 abs" "rtt-64 erm <= 0.6 abs" "rereg-1048576 erm <= 1 abs")

wl_label() {
    local size=${1##*-}
    case $1 in
        write-*) echo "write $((size >> 10)) KB, MiB/s" ;;
        oneway-*) echo "$size B one way, usec" ;;
        rtt-*) echo "$size B round trip, usec" ;;
        reg-*) echo "register $((size >> 20)) MB, usec" ;;
        rereg-*) echo "register $((size >> 20)) MB again, usec" ;;
    esac
}

wl_lower() { [[ $1 != write-* ]]; }

wl_server() {
    case $1 in memcpy) return 0 ;; esac
    serve "$BIN/erm" server "$(endpoint)"
}

# _erm_op MODE CASE: the erm client's operation, `local` for a bare memcpy, `bare` for the
# bare ring, or nothing when the mode has nothing to measure in the case
_erm_op() {
    case $1:${2%-*} in
        tcp:write | usmc:write) echo stream ;;
        erm:write) echo write ;;
        erm-vm:write) echo write-vm ;;
        memcpy:write) echo local ;;
        tcp:oneway | usmc:oneway | usmc-bp:oneway) echo oneway ;;
        tcp:rtt | usmc:rtt | usmc-bp:rtt) echo pingpong ;;
        erm:oneway) echo erm-oneway ;;
        erm-vm:oneway) echo erm-oneway-vm ;;
        erm:rtt) echo erm-pingpong ;;
        erm-vm:rtt) echo erm-pingpong-vm ;;
        bare:oneway | bare:rtt) echo bare ;;
        erm:reg) echo reg ;;
        erm-vm:reg) echo reg-vm ;;
        erm:rereg) echo rereg ;;
        erm-vm:rereg) echo rereg-vm ;;
    esac
}

wl_client() {
    local op size=${2##*-}
    op=$(_erm_op "$1" "$2")
    case $op in
        '') echo - ;;
        local) client "$BIN/erm" local memcpy "$size" "$SECS" && cat "$CLIENT_OUT" ;;
        # the bare ring reports one way, as sockperf does
        bare) bare_client bare latency "$size" | awk -v rtt="${2%-*}" '
                $1 > 0 { printf "%.3f\n", rtt == "rtt" ? 2 * $1 : $1 }' ;;
        *) client "$BIN/erm" client "$(endpoint)" "$op" "$size" "$SECS" && cat "$CLIENT_OUT" ;;
    esac
}
