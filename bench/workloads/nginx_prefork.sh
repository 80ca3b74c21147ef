# nginx as it usually runs: a master and 2 workers accepting on one socket. The kernel hands a
# connection to either worker, and the one whose sibling holds its proposal is handed it
# (src/core/handoff.c). The same file and clients as the nginx workload.
NGINX_WORKERS=2
. "$WL_DIR/nginx.sh"
WL_TITLE="nginx + wrk, master and 2 workers, 1 KB file"
WL_CASES=(keepalive-100 close-100)
WL_TARGETS=("keepalive-100 usmc >= 1.5" "close-100 usmc >= 1.0")
