# Streams through event loops whose consumer works on what it reads (bench/stream.c): four
# connections, one thread a side serving them all through epoll; the consumer checksums each MiB
# ("hash"), or sleeps 100 us after every 64 KiB, as a pause for garbage collection does
# ("pause"). The producer is stopped whenever the buffering between the two runs out while the
# consumer is busy elsewhere; TCP's grows to megabytes. The pauses bound "pause" for every
# transport (a read of 64 KiB costs a tenth of the sleep that follows it): it shows whether a
# transport loses there, and carries no target.
WL_TITLE="streams through event loops, 4 connections, consumer at work"
WL_UNIT="MBps"
WL_BETTER=higher
WL_MODES="tcp unix usmc usmc-bp"
WL_CASES=(hash pause)
WL_TARGETS=("hash usmc >= 1.3")

wl_label() { if [ "$1" = hash ]; then echo "checksum of each MiB"; else echo "100 us pause every 64 KiB"; fi; }

wl_server() { serve "$BIN/stream" server "$(endpoint)"; }

wl_client() { client "$BIN/stream" client "$(endpoint)" "$SECS" 4 "$2" && cat "$CLIENT_OUT"; }
