# NVMe/TCP reads at queue depth 128 from a namespace in memory (usmc nvme target --mem), so that
# the transport is measured, not a disk: usmc nvme perf, one job, random reads. Each size with
# its payload placed straight into the reader's buffers (ddp) or copied through the queue's
# staging buffer (copy), without and with data digests (dgst: header and data CRC32C, summed in
# the placing copy, or after the staging copy): the comparisons of Linux's NVMe/TCP receive
# offload (its cover letter: +32 % and +55 % for 64 KB and 512 KB reads, +107 % and +138 % with
# data digests), over plain TCP and through usmc's shared memory. The notes give the IOPS, the
# host's processor time per I/O (its queue's thread, busy-polling included under usmc) and
# latency percentiles; without busy-polling (usmc, sleeping), the processor time is the work.
WL_TITLE="NVMe/TCP random reads, queue depth 128, namespace in memory"
WL_UNIT="MB/s"
WL_BETTER=higher
WL_MODES="tcp usmc usmc-sleep"
WL_CASES=(4K-ddp 64K-copy 64K-ddp 64K-copy-dgst 64K-ddp-dgst 512K-copy 512K-ddp 512K-copy-dgst 512K-ddp-dgst)
WL_TARGETS=(
    "64K-ddp usmc >= 1.32 usmc 64K-copy"
    "512K-ddp usmc >= 1.55 usmc 512K-copy"
    "64K-ddp-dgst usmc >= 2.07 usmc 64K-copy-dgst"
    "512K-ddp-dgst usmc >= 2.38 usmc 512K-copy-dgst"
    "64K-ddp tcp >= 1.32 tcp 64K-copy"
    "512K-ddp tcp >= 1.55 tcp 512K-copy"
    "64K-ddp-dgst tcp >= 2.07 tcp 64K-copy-dgst"
    "512K-ddp-dgst tcp >= 2.38 tcp 512K-copy-dgst"
    "64K-ddp-dgst usmc >= 3 tcp"
)

wl_label() {
    local size="${1%%K-*} KiB" rest=${1#*-}
    case $rest in
        ddp) echo "$size, placed" ;;
        copy) echo "$size, copied" ;;
        ddp-dgst) echo "$size, placed, digests fused" ;;
        copy-dgst) echo "$size, copied, digests after" ;;
    esac
}

# Both ends count into the mode's runtime directory, the plain ones too (the program is linked
# with the library).
wl_server() {
    USMC_RUNDIR=$RD serve "$USMC_BUILD/bin/usmc-nvme" target --mem 1G -p "$PORT" --discovery-port 0
}

wl_client() {
    local size=${2%%-*} args=(--ddp on)
    [[ $2 = *copy* ]] && args=(--ddp off)
    [[ $2 = *dgst ]] && args+=(--digest)
    USMC_RUNDIR=$RD client "$USMC_BUILD/bin/usmc-nvme" perf -r "trsvcid:$PORT" -q 128 -o "$size" \
        -w randread -t "$SECS" "${args[@]}" || return 1
    awk '$1 == "mbps" { print $2 }' "$CLIENT_OUT"
    awk '{ v[$1] = $2 } END { printf "iops %s; host cpu %s us/io; latency p50 %s us, p99 %s us\n",
        v["iops"], v["cpu_us_per_io"], v["lat_p50_us"], v["lat_p99_us"] }' "$CLIENT_OUT"
}
