# Shared by the scripts in report/ (sourced, not run): the processes a script started, free
# ports, waiting for a server, and the nginx configuration the server benchmarks use.
# A script defines die() before it calls any of these.
# shellcheck shell=bash

# PIDs of every process the script started; stop_started kills and reaps exactly those.
pids=()

stop_started() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}

# make_tmp NAME: sets `tmp` to a new temporary directory and arranges that on any exit,
# Ctrl-C included, the script's `before_cleanup` runs (when it defines one), the processes
# in `pids` are stopped, and `tmp` is removed; the exit status is kept.
make_tmp() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    trap _cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

_cleanup() {
    local rc=$?
    if declare -F before_cleanup >/dev/null; then
        before_cleanup
    fi
    stop_started
    rm -rf "$tmp"
    exit "$rc"
}

# free_port IP [PREFIX...]: a TCP port on IP that nobody listens on right now, found by the
# command PREFIX (e.g. `ip netns exec NS`) so that it is free where the server will run.
free_port() {
    local ip=$1
    shift
    "$@" python3 -c 'import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.bind((sys.argv[1], 0))
print(s.getsockname()[1])' "$ip"
}

# listen_addr FILE PROTO PID: waits (about 10 s) for the `listening PROTO ADDR` line that
# rpcbench-echo and examples/crr_ref print on stdout into FILE, and prints ADDR.
listen_addr() {
    local file=$1 proto=$2 pid=$3 addr
    for _ in $(seq 100); do
        addr=$(awk -v p="$proto" '$1 == "listening" && $2 == p { print $3; exit }' "$file")
        if [[ -n $addr ]]; then
            printf '%s\n' "$addr"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null || die "server exited: $(cat "$file.err" 2>/dev/null)"
        sleep 0.1
    done
    die "no 'listening $proto' line in $file"
}

# write_nginx_conf DIR BODY_BYTES LISTEN...: DIR/nginx.conf for one worker answering every
# request with 200 and BODY_BYTES bytes of 'x', logging nothing per request, with a
# `listen LISTEN;` for each LISTEN (`127.0.0.1:PORT`, or `127.0.0.1:PORT http2` for h2c by
# prior knowledge).
write_nginx_conf() {
    local dir=$1 body listen listens=""
    body=$(printf '%*s' "$2" '' | tr ' ' 'x')
    shift 2
    for listen in "$@"; do
        listens+="        listen $listen;"$'\n'
    done
    mkdir -p "$dir"
    {
        echo "# Written by report/lib.sh; one worker, nothing logged per request."
        cat <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events {
    worker_connections 1024;
}
http {
    access_log off;
    # hyper has no per-connection request limit; nginx's default of 1000 would add
    # reconnects that rpcbench-echo never pays.
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    client_body_temp_path $dir/client_body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    server {
${listens%$'\n'}
        location / {
            default_type application/octet-stream;
            return 200 "$body";
        }
    }
}
EOF
    } >"$dir/nginx.conf"
}
