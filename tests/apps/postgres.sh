#!/usr/bin/env bash
# postgres: the postmaster forks a backend per connection and closes its copy of the socket.
# pgbench initialises its tables, then runs 8 clients on 2 threads for 20 s over TCP on
# 127.0.0.1; every transaction must succeed, and the books must balance afterwards (each
# TPC-B transaction adds the same amount to an account, a teller, a branch and the history).
# PostgreSQL refuses to run as root, so everything runs as the postgres user, with a runtime
# directory of its own.
. "$(dirname "$0")/lib.sh"
app_begin postgres
sanitized && skip "the postmaster does not start with a sanitizer runtime preloaded"
id postgres >/dev/null 2>&1 || fail "no postgres user (apt-get install postgresql)"
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$PGBIN/pgbench" ] || fail "PostgreSQL is not installed (scripts/install-deps.sh)"

as_pg() { runuser -u postgres -- "$@"; }
chmod 711 "$WORK"
chown postgres: "$RD"
# The runtime directory's files belong to postgres: only it can read them.
stats() { as_pg "$USMC" stats --rundir "$RD" || fail "usmc stats --rundir $RD failed"; }

mkdir -m 700 "$WORK/data" && chown postgres: "$WORK/data"
as_pg "$PGBIN/initdb" -D "$WORK/data" -U postgres -A trust >"$WORK/initdb.log" 2>&1 ||
    { cat "$WORK/initdb.log"; fail "initdb failed"; }
mkdir -m 700 "$WORK/sock" && chown postgres: "$WORK/sock"

port=$(pick_port)
serve postgres "$port" acc runuser -u postgres -- "$PGBIN/postgres" -D "$WORK/data" \
    -h 127.0.0.1 -p "$port" -k "$WORK/sock" -c fsync=off -c max_connections=30

pg() { client acc runuser -u postgres -- "$PGBIN/$1" -h 127.0.0.1 -p "$port" "${@:2}"; }
pg pgbench -i -q postgres >"$WORK/init.log" 2>&1 || { cat "$WORK/init.log"; fail "pgbench -i failed"; }
out=$WORK/pgbench.log
pg pgbench -c 8 -j 2 -T 20 postgres >"$out" 2>&1 || { cat "$out"; fail "pgbench failed"; }
cat "$out"
done_tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
failed_tx=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")
[ -n "$done_tx" ] && [ "$done_tx" -gt 0 ] || fail "pgbench processed no transaction"
[ "${failed_tx:-0}" -eq 0 ] || fail "$failed_tx transactions failed"

sums=$(pg psql -At -d postgres -c "select (select sum(abalance) from pgbench_accounts),
    (select sum(tbalance) from pgbench_tellers), (select sum(bbalance) from pgbench_branches),
    (select sum(delta) from pgbench_history), (select count(*) from pgbench_history)")
log "accounts|tellers|branches|history|transactions: $sums"
IFS='|' read -r acc tel bra hist count <<<"$sums"
[ "$acc" = "$tel" ] && [ "$tel" = "$bra" ] && [ "$bra" = "$hist" ] ||
    fail "the books do not balance: $sums"
[ "$count" -ge "$done_tx" ] || fail "history holds $count transactions, pgbench reported $done_tx"

# Each transaction is a few round trips of a few hundred bytes; every backend forked its own.
expect_accelerated $((done_tx * 100))
accelerating && log "server side accelerated: $(stat_value server_conn_accelerated) connections"
stop postgres
log "postgres: ok"
