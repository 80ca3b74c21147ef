# nginx (one worker) passing every request to php-fpm over FastCGI on TCP, on a connection of its
# own, as nginx does by default; php-fpm runs a master and 2 workers, which sleep in a blocking
# accept() on the master's socket and hand each other the proposals of the connections that
# reach the other one (src/core/accept.c). wrk keeps its connections to nginx alive, so what
# differs is the short FastCGI connection per request. All of it on the server core.
. "$WL_DIR/nginx.sh"
WL_TITLE="nginx + php-fpm over FastCGI, 2 php-fpm workers, 1 KB page"
WL_NEEDS+=" php-fpm8.2:php-fpm"
WL_CASES=(keepalive-10)
WL_TARGETS=("keepalive-10 usmc >= 1.1")
_nginx_page=page.php

wl_server() {
    local front=$PORT fpm
    pick_port
    fpm=$PORT PORT=$front
    mkdir -p "$MODE_DIR/www"
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
    nginx_serve "location ~ \\.php\$ {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
            fastcgi_pass 127.0.0.1:$fpm;
        }"
}
