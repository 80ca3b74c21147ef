# CRC32C on one core over buffers of 4 KiB, 64 KiB and 1 MiB (bench/crc.c, one second a run,
# whatever BENCH_SECONDS says): ISA-L's crc32_iscsi, usmc's own kernel (VPCLMULQDQ folding,
# src/util/crc32c.c), usmc's copy that sums in the same pass (what the NVMe/TCP host places
# C2HData payload with), and memcpy, that copy's ceiling. The modes are the implementations.
WL_TITLE="CRC32C, one core"
WL_UNIT="GB/s"
WL_BETTER=higher
WL_MODES="isal own fused memcpy"
WL_CASES=(4096 65536 1048576)
WL_TARGETS=("65536 fused >= 0.8 memcpy")

wl_label() { echo "$(($1 >> 10)) KiB"; }

wl_server() { return 0; }

wl_client() { client "$BIN/crc" "$1" "$2" 1 && cat "$CLIENT_OUT"; }
