#!/usr/bin/env bash
# grpc: a gRPC server (a thread pool behind grpcio's pollers) and 8 client threads, each on a
# channel of its own made while the others' pollers wait: 50 unary echoes and one stream of 20
# messages per channel, every payload checked, three rounds.
. "$(dirname "$0")/lib.sh"
app_begin grpc
python=/usr/bin/python3
"$python" -c 'import grpc' 2>/dev/null || fail "python3-grpcio is not installed (scripts/install-deps.sh)"

port=$(pick_port)
serve grpc "$port" acc "$python" "$APPS_DIR/grpc_echo.py" serve "$port"
out=$WORK/grpc.log
for round in 1 2 3; do
    client acc "$python" "$APPS_DIR/grpc_echo.py" clients "$port" 8 50 >"$out" 2>&1 ||
        { cat "$out"; fail "round $round: the gRPC clients failed"; }
    cat "$out"
    grep -qx 'calls: 408 of 408 right' "$out" || fail "round $round: calls were wrong"
done
expect_accelerated 1000000
log "grpc: ok"
