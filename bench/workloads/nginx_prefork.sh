# nginx as it usually runs: a master and 2 workers accepting on one socket. The kernel hands a
# connection to either worker, and the one whose sibling holds its proposal is handed it
# (src/core/handoff.c). The same file and clients as the nginx workload. A plain wrk against
# the workers under usmc shows what a prefork server's fallback costs: its workers must not ask
# each other about connections no client proposed.
NGINX_WORKERS=2
. "$WL_DIR/nginx.sh"
WL_TITLE="nginx + wrk, master and 2 workers, 1 KB file"
WL_MODES="tcp usmc usmc-bp fallback-server"
WL_CASES=(keepalive-100 close-100)
WL_TARGETS=("keepalive-100 usmc >= 1.5" "close-100 usmc >= 1.0" "close-100 fallback-server >= 0.99")
