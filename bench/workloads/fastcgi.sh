# nginx (one worker) passing every request to php-fpm over FastCGI on TCP, on a connection of its
# own, as nginx does by default; php-fpm runs a master and 2 workers, which sleep in a blocking
# accept() on the master's socket and hand each other the proposals of the connections that
# reach the other one (src/core/accept.c). wrk keeps its connections to nginx alive, so what
# differs is the short FastCGI connection per request. All of it on the server core.
WL_TITLE="nginx + php-fpm over FastCGI, 2 php-fpm workers, 1 KB page"
WL_UNIT="requests/s"
WL_BETTER=higher
WL_MODES="tcp usmc usmc-bp"
WL_NEEDS="nginx:nginx-light wrk:wrk php-fpm8.2:php-fpm"
WL_CASES=(keepalive-10)

wl_label() {
    echo "wrk keep-alive, ${1##*-} connections"
}

wl_server() {
    local front=$PORT fpm
    pick_port
    fpm=$PORT PORT=$front
    mkdir -p "$MODE_DIR/www" "$MODE_DIR/tmp"
    printf '<?php echo str_repeat("u", 1024);\n' >"$MODE_DIR/www/page.php"
    cat >"$MODE_DIR/php-fpm.conf" <<CONF
[global]
pid = $MODE_DIR/php-fpm.pid
error_log = $MODE_DIR/php-fpm.error.log
daemonize = no
[pool]
listen = 127.0.0.1:$fpm
listen.backlog = 4096
pm = static
pm.max_children = 2
CONF
    # No php.ini: the page needs no extension. As root, which php-fpm allows with -R only.
    serve_as php-fpm "$fpm" php-fpm8.2 --nodaemonize --no-php-ini --allow-to-run-as-root \
        --fpm-config "$MODE_DIR/php-fpm.conf" || return 1
    cat >"$MODE_DIR/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 8192;
pid $MODE_DIR/nginx.pid;
error_log $MODE_DIR/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 100000000;
    client_body_temp_path $MODE_DIR/tmp/body;
    proxy_temp_path $MODE_DIR/tmp/proxy;
    fastcgi_temp_path $MODE_DIR/tmp/fastcgi;
    uwsgi_temp_path $MODE_DIR/tmp/uwsgi;
    scgi_temp_path $MODE_DIR/tmp/scgi;
    server {
        listen 127.0.0.1:$PORT backlog=4096;
        root $MODE_DIR/www;
        location ~ \\.php\$ {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_pass 127.0.0.1:$fpm;
        }
    }
}
CONF
    serve nginx -p "$MODE_DIR" -c "$MODE_DIR/nginx.conf" -e "$MODE_DIR/error.log"
}

# A run whose responses were not all 2xx measured errors: it fails.
wl_client() {
    client wrk -t1 -c "${2##*-}" -d "${SECS}s" "http://127.0.0.1:$PORT/page.php" || return 1
    grep -q 'Non-2xx' "$CLIENT_OUT" && return 1
    sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$CLIENT_OUT"
}
