#!/usr/bin/env bash
# php-fpm behind nginx: nginx passes each request to php-fpm over FastCGI on TCP, on a connection
# of its own, and php-fpm's workers (two, as nobody) sleep in a blocking accept() on the one
# listening socket their master opened. Both sides run under usmc. The workers take turns, so a
# connection often reaches the worker that does not hold its proposal: the other one, asleep in
# accept(), must hand it over. Every response must be right, and no connection may fall back.
# Then php-fpm stops gracefully (SIGQUIT), which its workers do by closing their listener in
# the signal's handler: they must all exit.
. "$(dirname "$0")/lib.sh"
app_begin php_fpm
need nginx wrk
fpm=$(compgen -G '/usr/sbin/php-fpm*' | sort -V | tail -n 1) ||
    fail "php-fpm is not installed (scripts/install-deps.sh)"

# The workers, as nobody, read the script.
chmod 711 "$WORK"
mkdir -p "$WORK/fpm" "$WORK/nginx/www"
printf '<?php echo str_repeat("usmc\\n", 200);\n' >"$WORK/nginx/www/page.php"
for _ in $(seq 200); do echo usmc; done >"$WORK/page.expected"
chmod -R a+rX "$WORK/nginx"

fpm_port=$(pick_port)
cat >"$WORK/fpm/php-fpm.conf" <<CONF
[global]
pid = $WORK/fpm/php-fpm.pid
error_log = $WORK/fpm/error.log
daemonize = no
[pool]
user = nobody
group = nogroup
listen = 127.0.0.1:$fpm_port
pm = static
pm.max_children = 2
CONF
# No php.ini, and so no extension: PHP loads them with RTLD_DEEPBIND, which a sanitizer's
# runtime refuses.
serve php-fpm "$fpm_port" acc "$fpm" --nodaemonize --no-php-ini --fpm-config "$WORK/fpm/php-fpm.conf"

port=$(pick_port)
NGINX_SERVER="location ~ \\.php\$ {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_pass 127.0.0.1:$fpm_port;
        }" start_nginx nginx 127.0.0.1 "$port" acc

# Two requests at a time: one keeps a worker busy while the other's connection reaches the
# second worker.
run_wrk fastcgi "http://127.0.0.1:$port/page.php" "$WORK/page.expected" -c2 -d3s
stop nginx
# A graceful stop: each worker closes its listener in its SIGQUIT handler, which must end its
# accept() and let it exit.
kill -QUIT "${_server_pid[php-fpm]}"
server_done php-fpm || fail "php-fpm's graceful stop failed"
nginx_clean nginx
grep -E '(ERROR|ALERT): ' "$WORK/fpm/error.log" && fail "php-fpm logged errors"

expect_accelerated 1000
if accelerating; then
    log "stats: handoffs=$(stat_value handoffs)"
    for side in client server; do
        [ "$(stat_value ${side}_conn_fallback)" -eq 0 ] ||
            fail "$(stat_value ${side}_conn_fallback) connection(s) fell back on the $side side"
    done
fi
log "php_fpm: ok"
