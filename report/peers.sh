#!/usr/bin/env bash
# rpcbench against established tools measuring the same thing, side by side in one run, so
# that rpcbench is shown not to be what it measures. Each pair runs back to back:
#
#   tcp             sockperf ping-pong --tcp -m 64 --full-rtt (its own server, sockperf sr);
#                   examples/tcp_ref.rs: a blocking client on one connection against its own
#                   single-threaded server (the smallest pair speaking rpcbench's frames)
#   tcp-connect     examples/crr_ref.rs: a blocking std::net connect-per-call client, against
#                   its own thread-per-connection server, and against rpcbench-echo;
#                   tcp_ref --connect against tcp_ref's single-threaded server
#   http-keepalive  1 / (requests/s) of wrk -t1 -c1, POST of 64 bytes to rpcbench-echo /echo
#   http-fresh      1 / (requests/s) of ab -n 20000 -c 1 (no -k), POST of 64 bytes, same server
#   curl-reuse      one curl process POSTing 64 bytes to the same URL 1000 times on one
#                   connection; the mean of its per-transfer %{time_total}
#   h2              h2load -c1 -m1 POSTing 64 bytes over HTTP/2 with prior knowledge: its
#                   mean "time for request"; and, from the same h2load run, 1 / (requests/s)
#                   against rpcbench's 1 / (calls/s): h2load's "time for request" starts
#                   as its HEADERS frame is written and ends as the stream closes, so it
#                   leaves out the client's own work before and after each request, which
#                   rpcbench's mean (the whole call) and both sides' 1/rps count
#                   h2_ref (examples/h2_ref.rs): a minimal client on the h2 crate's own
#                   client API (which grpc-stream's tonic client uses) against the same
#                   rpcbench-echo: its mean per call, timed as rpcbench times it;
#                   rpcbench's h2 drives the crate's frame layer itself, and this shows
#                   what leaving out the crate's stream state machine saves
#   quic            quic_ref (examples/quic_ref.rs): quinn alone, one stream per call on one
#                   QUIC connection, against the same rpcbench-echo --quic (both TLS 1.3):
#                   both means
#   h3              h3_ref (examples/h3_ref.rs): hyperium's h3 on h3-quinn alone, one
#                   request at a time on one HTTP/3 connection, against the same
#                   rpcbench-echo --quic (ALPN h3, both TLS 1.3): both means
#   h2-mux          h2load -c1 -m64 (64 streams on one connection) against rpcbench -c 64,
#                   and -m256 against -c 256: both as 1 / (requests/s)
#   grpc-stream     grpc_stream_ref (examples/grpc_stream_ref.rs): a minimal bidirectional
#                   stream on the h2 crate's client (grpc-stream runs on tonic's), one
#                   request message and its reply per call on one stream: both means
#   grpc-mux        rpcbench's own h2-mux at -c 16 (the same shared connection without gRPC):
#                   both means, so the ratio is what gRPC costs beyond HTTP/2 at 16 in flight
#   grpc            h2load -c1 -m1 POSTing one gRPC-framed EchoRequest (5-byte prefix and
#                   the message: seq 1, a 64-byte payload) to /rpcbench.v1.Echo/Call with
#                   content-type application/grpc and te: trailers: the same wire as
#                   rpcbench's grpc transport from a minimal client; its mean "time for
#                   request". h2load checks the HTTP status only, not grpc-status. Also
#                   1/rps against 1/rps, as for h2
#   udp             sockperf ping-pong --udp -m 64 --full-rtt (its own UDP server, sockperf sr)
#   unix            examples/unix_ref.rs: a blocking ping-pong client on one Unix socket
#                   connection, against its own thread-per-connection server
#
# and the server alone, against nginx (one worker, a fixed 100-byte body for every request,
# report/lib.sh's configuration) beside rpcbench-echo (--threads 1) answering
# GET /echo?reply_len=100: each under the same load generator, which runs on the other CPU
# than the servers whatever --pin says (on a machine with one CPU, on the same):
#
#   http-keepalive -c 64   wrk -t1 -c64, HTTP/1.1 keep-alive: 1 / (requests/s) against each
#   h2 -c 256              h2load -c16 -m16 (16 connections of 16 streams, h2c by prior
#                          knowledge): 1 / (requests/s) against each
#
# In these two pairs "rpcbench" is rpcbench-echo under the peer's load generator, not
# rpcbench's client; a ratio under 1 is the server ahead of nginx.
#
# and over TLS, against the same rpcbench-echo's --tls and --https listeners (its generated
# CA, which every client below is given and verifies with):
#
#   tcp-connect tls13         openssl s_time -new -tls1_3 on the raw-frames TLS port: a TCP
#                             connection and a full handshake each, no request; time per
#                             connection = the process's wall time / its connections
#   tcp-connect tls12-resume  openssl s_time -reuse -tls1_2, the same port: every connection
#                             but the first resumes (s_time prints r for each, counted)
#   http-fresh tls13          openssl s_time -new -tls1_3 -www '/echo?reply_len=64' on the
#                             HTTPS port: a connection, a full handshake and one HTTP/1.0 GET
#                             of 64 bytes each
#   http-fresh tls13-resume   the same with -reuse (TLS 1.3 resumes only after reading the
#                             ticket, which -www makes s_time do)
#   curl-fresh tls13          one curl process, --curl-fetches HTTP/1.1 POSTs of 64 bytes,
#                             each on a new connection (Connection: close) with a full TLS 1.3
#                             handshake (--no-sessionid); the mean of %{time_total}, with the
#                             handshake alone (%{time_appconnect} - %{time_connect}) printed
#                             beside rpcbench's tls phase
#   http-keepalive tls13      h2load --h1 -c1 -m1 over TLS (HTTP/1.1 by ALPN): mean "time for
#                             request"
#   h2 tls13                  h2load -c1 -m1 over TLS (h2 by ALPN): mean "time for request"
#
# openssl s_time checks the certificate chain (-verify) but, like every s_time, only prints
# a failure; it does the same signature checks rpcbench does. It hangs up right after its
# handshake without -www, before the server's TLS 1.3 session tickets are sent, so the
# server counts those handshakes as failed (`io`) in /stats.
#
# rpcbench runs `--names ip --transports T [--security S] -n CALLS --warmup 200 --format csv`
# against the same rpcbench-echo (--threads 1); its figure is the mean_us column of its one
# row.
#
# This script only measures: it writes every round's mean for both sides (--json FILE, the
# `Peers` shape of crates/analysis/src/analysis/peers.rs), and `rpcbench report --peers FILE` takes the medians and
# judges each pair against PEER_RATIO_LIMIT in crates/analysis/src/analysis/peers.rs, the one place the limit is
# written. The script ends by showing that verdict, from rpcbench itself. Peer ratios are
# benchmarks, not tests: host noise moves them.
#
# Debian packages it needs (for .ci/run): sockperf wrk apache2-utils curl nghttp2-client openssl python3
# iproute2 util-linux nginx-light (plus cargo to build rpcbench, rpcbench-echo and
# examples/crr_ref, unix_ref, h2_ref, tcp_ref and grpc_stream_ref).
#
# Usage: report/peers.sh [options]
#   --pin same|cross|none   same: servers and clients on CPU 0; cross: servers on CPU 0,
#                           clients on CPU 1; none: no pinning (default same)
#   --calls N               rpcbench calls per transport and crr_ref calls (default 20000)
#   --ab-requests N         ab -n (default 20000)
#   --curl-fetches N        curl transfers in its one process (default 1000)
#   --seconds S             sockperf -t and wrk -d (default 5)
#   --rounds R              measure every pair R times, the peer first in odd rounds and
#                           rpcbench first in even ones; the report takes the median of each
#                           side's R round means (default 1)
#   --raw DIR               also keep every tool's raw output (and rpcbench's JSON) in DIR
#   --json FILE             write the round means as JSON (the Peers shape of crates/analysis/src/analysis/peers.rs;
#                           without it they go to a temporary file, for the verdict only)
#   --server-ip IP          address the servers listen on and the clients call (default
#                           127.0.0.1)
#   --server-exec PREFIX    command prefix for the servers, e.g. "ip netns exec rb-srv"
#   --client-exec PREFIX    command prefix for the clients, e.g. "ip netns exec rb-cli"
#   --only LIST             measure only the pairs of these transports (comma-separated,
#                           e.g. h2,h2-mux,grpc)
#   --no-build              use the binaries already in target/release
#
# Many short connections: on loopback the kernel reuses TIME_WAIT ports (tcp_tw_reuse=2, the
# default); between namespaces it does not, and about 40000 client-closed connections to one
# port (rpcbench tcp-connect plus crr_ref against rpcbench-echo) within a minute can exhaust
# the default ephemeral range (28232 ports): set net.ipv4.tcp_tw_reuse=1 in the client's namespace there, or
# lower --calls.
#
# Exit status: 0 when every pair was measured (whatever the ratios: `rpcbench report --peers
# FILE` judges them, and not in its exit status either), 1 when a tool or a call failed,
# 2 bad usage.
#
# Servers listen on port 0 (rpcbench-echo and crr_ref print the port they got) or, for
# sockperf, on a port found free just before, never on a fixed port. Every process the script
# starts is killed by PID when it exits, also on failure.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

die() {
    echo "peers.sh: $*" >&2
    exit 1
}

pin=same
calls=20000
ab_requests=20000
curl_fetches=1000
secs=5
rounds=1
raw_dir=""
json_out=""
server_ip=127.0.0.1
server_exec=""
client_exec=""
build=1
only=""
while (($# > 0)); do
    case "$1" in
    --pin | --calls | --ab-requests | --curl-fetches | --seconds | --rounds | --raw | --json | \
        --server-ip | --server-exec | --client-exec | --only)
        (($# >= 2)) || die "$1 needs a value"
        case "$1" in
        --pin) pin=$2 ;;
        --calls) calls=$2 ;;
        --ab-requests) ab_requests=$2 ;;
        --curl-fetches) curl_fetches=$2 ;;
        --seconds) secs=$2 ;;
        --rounds) rounds=$2 ;;
        --raw) raw_dir=$2 ;;
        --json) json_out=$2 ;;
        --server-ip) server_ip=$2 ;;
        --only) only=$2 ;;
        --server-exec) server_exec=$2 ;;
        --client-exec) client_exec=$2 ;;
        esac
        shift 2
        ;;
    --no-build)
        build=0
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        echo "peers.sh: unknown argument: $1" >&2
        usage >&2
        exit 2
        ;;
    esac
done

for n in "$calls" "$ab_requests" "$curl_fetches" "$secs" "$rounds"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || {
        echo "peers.sh: counts and seconds must be positive integers, not '$n'" >&2
        exit 2
    }
done
case "$pin" in
same)
    server_cpu=0 client_cpu=0
    placement="same core (CPU 0)"
    ;;
cross)
    server_cpu=0 client_cpu=1
    placement="cross core (servers CPU 0, clients CPU 1)"
    ;;
none)
    server_cpu="" client_cpu=""
    placement="not pinned"
    ;;
*)
    echo "peers.sh: --pin must be same, cross or none" >&2
    exit 2
    ;;
esac
if [[ $pin == cross ]] && (($(nproc) < 2)); then
    die "--pin cross needs at least 2 CPUs"
fi

# The prefixes are split on blanks into words, like a shell would without quotes.
read -ra srv_exec <<<"$server_exec"
read -ra cli_exec <<<"$client_exec"
srv=("${srv_exec[@]}")
cli=("${cli_exec[@]}")
if [[ -n $server_cpu ]]; then
    srv+=(taskset -c "$server_cpu")
    cli+=(taskset -c "$client_cpu")
fi
# IPv6 literals need brackets in URLs and socket addresses.
if [[ $server_ip == *:* ]]; then host="[$server_ip]"; else host=$server_ip; fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=report/lib.sh
source "$root/report/lib.sh"

nginx_bin=/usr/sbin/nginx
for tool in taskset sockperf wrk ab curl h2load openssl python3 ss "$nginx_bin"; do
    command -v "$tool" >/dev/null || die "$tool is required (apt-get install -y sockperf wrk apache2-utils curl nghttp2-client openssl python3 iproute2 util-linux nginx-light)"
done

make_tmp peers
[[ -z $raw_dir ]] || mkdir -p "$raw_dir"

# Off loopback the kernel keeps each client-closed connection's port in TIME_WAIT for 60 s
# unless tcp_tw_reuse is 1 (2, the default, reuses on loopback only).
case "$server_ip" in
127.* | ::1) ;;
*)
    tw=$("${cli_exec[@]}" cat /proc/sys/net/ipv4/tcp_tw_reuse 2>/dev/null || echo "?")
    per_port=$(((calls + 200) * rounds + (calls + 100) * rounds))
    if [[ $tw != 1 ]] && ((per_port > 25000)); then
        echo "peers.sh: warning: about $per_port client-closed connections to one port within" \
            "minutes, with net.ipv4.tcp_tw_reuse=$tw on the client's side: connects may fail" \
            "for want of ephemeral ports (set it to 1 in the client's namespace, or lower --calls)" >&2
    fi
    ;;
esac

# Prints a command as one shell-quoted line.
show() {
    local out="" word
    for word in "$@"; do
        if [[ $word =~ ^[A-Za-z0-9_./:=@%,+-]+$ ]]; then
            out+="$word "
        else
            out+="$(printf '%q' "$word") "
        fi
    done
    printf '%s\n' "${out% }"
}

# ---- build ------------------------------------------------------------------------------
if ((build)); then
    echo "building (release) ..." >&2
    cargo build --release --quiet --bin rpcbench --bin rpcbench-echo --example crr_ref \
        --example unix_ref --example h2_ref --example tcp_ref --example grpc_stream_ref \
        --example quic_ref --example h3_ref
fi
rb_bin="$root/target/release/rpcbench"
echo_bin="$root/target/release/rpcbench-echo"
crr_bin="$root/target/release/examples/crr_ref"
unix_ref_bin="$root/target/release/examples/unix_ref"
h2_ref_bin="$root/target/release/examples/h2_ref"
tcp_ref_bin="$root/target/release/examples/tcp_ref"
grpc_stream_ref_bin="$root/target/release/examples/grpc_stream_ref"
quic_ref_bin="$root/target/release/examples/quic_ref"
h3_ref_bin="$root/target/release/examples/h3_ref"
for b in "$rb_bin" "$echo_bin" "$crr_bin" "$unix_ref_bin" "$h2_ref_bin" "$tcp_ref_bin" \
    "$grpc_stream_ref_bin" "$quic_ref_bin" "$h3_ref_bin"; do
    [[ -x $b ]] || die "$b is missing: build it (or drop --no-build)"
done

# ---- servers ----------------------------------------------------------------------------
# The port of the `listening PROTO ADDR` line in FILE.
listen_port() {
    local addr
    addr=$(listen_addr "$@")
    printf '%s\n' "${addr##*:}"
}

# The Unix sockets live in the temporary directory, which the servers and clients share
# (a network namespace does not change the file system).
echo_unix="$tmp/echo.sock"
echo_ca="$tmp/ca.pem"
echo_cmd=("${srv[@]}" "$echo_bin" --threads 1 --tcp "$host:0" --http "$host:0" --udp "$host:0"
    --unix "$echo_unix" --tls "$host:0" --https "$host:0" --quic "$host:0" --ca-out "$echo_ca")
"${echo_cmd[@]}" >"$tmp/echo.out" 2>"$tmp/echo.out.err" &
echo_pid=$!
pids+=("$echo_pid")
echo_tcp_port=$(listen_port "$tmp/echo.out" tcp "$echo_pid")
echo_http_port=$(listen_port "$tmp/echo.out" http "$echo_pid")
echo_udp_port=$(listen_port "$tmp/echo.out" udp "$echo_pid")
listen_addr "$tmp/echo.out" unix "$echo_pid" >/dev/null
echo_tls_port=$(listen_port "$tmp/echo.out" tls "$echo_pid")
echo_https_port=$(listen_port "$tmp/echo.out" https "$echo_pid")
echo_quic_port=$(listen_port "$tmp/echo.out" quic "$echo_pid")
# The generated CA is written before the listening lines are printed.
[[ -s $echo_ca ]] || die "rpcbench-echo wrote no CA to $echo_ca"

unix_ref_sock="$tmp/unix_ref.sock"
unix_srv_cmd=("${srv[@]}" "$unix_ref_bin" server "$unix_ref_sock")
"${unix_srv_cmd[@]}" >"$tmp/unix_ref.out" 2>"$tmp/unix_ref.out.err" &
unix_ref_pid=$!
pids+=("$unix_ref_pid")
listen_addr "$tmp/unix_ref.out" unix "$unix_ref_pid" >/dev/null

crr_srv_cmd=("${srv[@]}" "$crr_bin" server "$host:0")
"${crr_srv_cmd[@]}" >"$tmp/crr.out" 2>"$tmp/crr.out.err" &
crr_pid=$!
pids+=("$crr_pid")
crr_port=$(listen_port "$tmp/crr.out" tcp "$crr_pid")

tcp_ref_srv_cmd=("${srv[@]}" "$tcp_ref_bin" server "$host:0")
"${tcp_ref_srv_cmd[@]}" >"$tmp/tcp_ref.out" 2>"$tmp/tcp_ref.out.err" &
tcp_ref_pid=$!
pids+=("$tcp_ref_pid")
tcp_ref_port=$(listen_port "$tmp/tcp_ref.out" tcp "$tcp_ref_pid")

# The load generators of the server pairs run on the other CPU than the servers (both
# pinned whatever --pin says), as a server's throughput is what those pairs measure.
if (($(nproc) >= 2)); then
    load_cpu=1 server_pin=(taskset -c 0)
else
    load_cpu=0 server_pin=(taskset -c 0)
fi
load=("${cli_exec[@]}" taskset -c "$load_cpu")
server_reply_len=100
# nginx: one worker on the servers' CPU, HTTP/1.1 on one port and h2c (prior knowledge) on
# another, a port found free just before (nginx cannot listen on port 0).
nginx_port=$(free_port "$server_ip" "${srv_exec[@]}")
nginx_h2_port=$(free_port "$server_ip" "${srv_exec[@]}")
[[ $nginx_port != "$nginx_h2_port" ]] || nginx_h2_port=$(free_port "$server_ip" "${srv_exec[@]}")
write_nginx_conf "$tmp/nginx" "$server_reply_len" "$host:$nginx_port" "$host:$nginx_h2_port http2"
nginx_cmd=("${srv_exec[@]}" "${server_pin[@]}" "$nginx_bin" -p "$tmp/nginx/" -e "$tmp/nginx/error.log"
    -c "$tmp/nginx/nginx.conf")
"${nginx_cmd[@]}" >"$tmp/nginx.out" 2>&1 &
nginx_pid=$!
pids+=("$nginx_pid")
# The same rpcbench-echo as every other pair, pinned to the servers' CPU even under
# --pin none, is not what serves these pairs: a second one does, HTTP only, pinned.
echo_srv_cmd=("${srv_exec[@]}" "${server_pin[@]}" "$echo_bin" --threads 1 --tcp off --udp off
    --http "$host:0")
"${echo_srv_cmd[@]}" >"$tmp/echo_srv.out" 2>"$tmp/echo_srv.out.err" &
echo_srv_pid=$!
pids+=("$echo_srv_pid")
echo_srv_port=$(listen_port "$tmp/echo_srv.out" http "$echo_srv_pid")
for _ in $(seq 50); do
    [[ -n $("${srv_exec[@]}" ss -Hltn "sport = :$nginx_h2_port") ]] && break
    kill -0 "$nginx_pid" 2>/dev/null || die "nginx did not start: $(cat "$tmp/nginx.out" "$tmp/nginx/error.log" 2>/dev/null)"
    sleep 0.1
done
[[ -n $("${srv_exec[@]}" ss -Hltn "sport = :$nginx_h2_port") ]] || die "nginx is not listening"

# sockperf cannot listen on port 0: take a port free on the server's side just now, and try
# again with another if someone took it in between.
sockperf_port=""
for _ in 1 2 3; do
    port=$(free_port "$server_ip" "${srv_exec[@]}")
    sp_srv_cmd=("${srv[@]}" sockperf server --tcp -i "$server_ip" -p "$port")
    "${sp_srv_cmd[@]}" >"$tmp/sockperf_srv.out" 2>&1 &
    sp_pid=$!
    for _ in $(seq 50); do
        kill -0 "$sp_pid" 2>/dev/null || break
        if [[ -n $("${srv_exec[@]}" ss -Hltn "sport = :$port") ]]; then
            sockperf_port=$port
            break
        fi
        sleep 0.1
    done
    if [[ -n $sockperf_port ]]; then
        pids+=("$sp_pid")
        break
    fi
    kill "$sp_pid" 2>/dev/null || true
    wait "$sp_pid" 2>/dev/null || true
done
[[ -n $sockperf_port ]] || die "sockperf server did not start: $(cat "$tmp/sockperf_srv.out")"

# The same for sockperf's UDP server (its default protocol), checked with ss -u.
sockperf_udp_port=""
for _ in 1 2 3; do
    port=$(free_port "$server_ip" "${srv_exec[@]}")
    sp_udp_srv_cmd=("${srv[@]}" sockperf server -i "$server_ip" -p "$port")
    "${sp_udp_srv_cmd[@]}" >"$tmp/sockperf_udp_srv.out" 2>&1 &
    sp_udp_pid=$!
    for _ in $(seq 50); do
        kill -0 "$sp_udp_pid" 2>/dev/null || break
        if [[ -n $("${srv_exec[@]}" ss -Hlun "sport = :$port") ]]; then
            sockperf_udp_port=$port
            break
        fi
        sleep 0.1
    done
    if [[ -n $sockperf_udp_port ]]; then
        pids+=("$sp_udp_pid")
        break
    fi
    kill "$sp_udp_pid" 2>/dev/null || true
    wait "$sp_udp_pid" 2>/dev/null || true
done
[[ -n $sockperf_udp_port ]] ||
    die "sockperf UDP server did not start: $(cat "$tmp/sockperf_udp_srv.out")"

# ---- request bodies ---------------------------------------------------------------------
# 64 bytes, like rpcbench's default payload.
body_file="$tmp/body64"
printf '%064d' 0 >"$body_file"
echo_url="http://$host:$echo_http_port/echo"
# One gRPC message (flag 0, 4-byte big-endian length) holding the protobuf EchoRequest
# {seq: 1, payload: 64 bytes}: field 1 varint (08 01), field 4 bytes (22, length 0x40).
grpc_body_file="$tmp/grpc_body64"
python3 -c 'import sys; m = b"\x08\x01\x22\x40" + b"0" * 64
sys.stdout.buffer.write(b"\x00" + len(m).to_bytes(4, "big") + m)' >"$grpc_body_file"
grpc_url="http://$host:$echo_http_port/rpcbench.v1.Echo/Call"
wrk_lua="$tmp/post64.lua"
cat >"$wrk_lua" <<EOF
wrk.method = "POST"
wrk.body = string.rep("0", 64)
wrk.headers["Content-Type"] = "application/octet-stream"
EOF
curl_cfg="$tmp/curl.cfg"
{
    echo "silent"
    echo "data-binary = \"@$body_file\""
    echo "header = \"Content-Type: application/octet-stream\""
    # curl expands the \n itself.
    printf '%s\n' 'write-out = "%{http_code} %{time_total} %{num_connects}\n"'
    for _ in $(seq "$curl_fetches"); do
        echo "url = \"$echo_url\""
        echo 'output = "/dev/null"'
    done
} >"$curl_cfg"

# The same POST over HTTPS in HTTP/1.1 (as rpcbench's curl transports), each transfer on a
# new connection (the server closes after answering Connection: close) with a full TLS 1.3
# handshake (no session cache), verified against the server's CA.
echo_https_url="https://$host:$echo_https_port/echo"
curl_tls_cfg="$tmp/curl_tls.cfg"
{
    echo "silent"
    echo "data-binary = \"@$body_file\""
    echo "header = \"Content-Type: application/octet-stream\""
    echo "header = \"Connection: close\""
    echo "cacert = \"$echo_ca\""
    echo "no-sessionid"
    echo "http1.1"
    echo "tlsv1.3"
    echo "tls-max = \"1.3\""
    printf '%s\n' 'write-out = "%{http_code} %{time_total} %{num_connects} %{time_connect} %{time_appconnect}\n"'
    for _ in $(seq "$curl_fetches"); do
        echo "url = \"$echo_https_url\""
        echo 'output = "/dev/null"'
    done
} >"$curl_tls_cfg"

# ---- header -----------------------------------------------------------------------------
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
    commit="$commit (plus uncommitted changes)"
fi
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# (wrk -v exits 1; head may cut the others short.)
sp_version=$(sockperf --version 2>&1 | awk '/version/ { print $3; exit }' || true)
wrk_version=$(wrk -v 2>&1 | head -n 1 | sed 's/ Copyright.*//' || true)
ab_version=$(ab -V 2>&1 | head -n 1 | sed 's/^This is //' || true)
curl_version=$(curl --version | head -n 1 | cut -d' ' -f1-3 || true)
nginx_version=$("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //' || true)
cat <<EOF
# rpcbench against peers ($(date -u '+%Y-%m-%d %H:%M UTC'))
commit:     $commit
kernel:     $(uname -sr)
cpu:        ${cpu_model:-unknown} ($(nproc) CPUs online)
placement:  $placement
servers:    $(show "${echo_cmd[@]}")
            $(show "${crr_srv_cmd[@]}")
            $(show "${sp_srv_cmd[@]}")
            $(show "${sp_udp_srv_cmd[@]}")
            $(show "${unix_srv_cmd[@]}")
            $(show "${tcp_ref_srv_cmd[@]}")
            $(show "${nginx_cmd[@]}")
            $(show "${echo_srv_cmd[@]}")
tools:      sockperf $sp_version; $wrk_version; $ab_version; $curl_version; $nginx_version
rpcbench:   $("$rb_bin" --version)
load avg:   $load_before (before the runs)
rounds:     $rounds (rpcbench -n $calls --warmup 200 per transport and round)

EOF

# Busy (non-idle) jiffies per CPU, as "cpuN busy total" lines.
cpu_jiffies() {
    awk '$1 ~ /^cpu[0-9]+$/ { b = 0; for (i = 2; i <= NF; i++) b += $i; print $1, b - $5 - $6, b }' /proc/stat
}
cpu_before=$(cpu_jiffies)

# ---- measurements -----------------------------------------------------------------------
# Each function runs one measurement and prints the mean round trip in µs; the commands go
# to stderr, the raw outputs to $tmp (and to --raw DIR).

# Saves a raw output file under a name that says which round it came from.
keep() {
    [[ -z $raw_dir ]] || cp "$1" "$raw_dir/round${round}_$(basename "$1")"
}

# The name of rpcbench's files for a transport, security mode and workers:
# tcp-connect_tls13, h2-mux_plain_c256.
rb_name() {
    if ((${3:-1} > 1)); then printf '%s_%s_c%s\n' "$1" "$2" "$3"; else printf '%s_%s\n' "$1" "$2"; fi
}

# Runs rpcbench on one transport under one security mode (plain, tls13, ...) with WORKERS
# calls in flight (default 1); prints its mean call and 1e6 / calls_per_s, from the CSV row
# read by column name. With many calls in flight, 1 / (calls per second) is what the
# multiplexed pairs compare: time per completed call, which is what throughput means.
rb_run() {
    local transport=$1 security=$2 workers=${3:-1} name mean
    name=$(rb_name "$1" "$2" "$workers")
    local file="$tmp/rpcbench_$name.json" csv="$tmp/rpcbench_$name.csv"
    local tls_args=()
    if [[ $security != plain ]]; then
        tls_args=(--security "$security" --tls-port "$echo_tls_port" --https-port
            "$echo_https_port")
    fi
    local cmd=("${cli[@]}" "$rb_bin" --target "$server_ip" --tcp-port "$echo_tcp_port"
        --http-port "$echo_http_port" --udp-port "$echo_udp_port" --unix "$echo_unix"
        --quic-port "$echo_quic_port" --ca "$echo_ca" "${tls_args[@]}" --names ip --transports "$transport" -n "$calls"
        -c "$workers" --warmup 200 --format csv --out "$file" --no-progress)
    echo "  $(show "${cmd[@]}")" >&2
    "${cmd[@]}" >"$csv" || die "rpcbench $transport $security failed (exit $?)"
    keep "$file"
    # Both figures: the mean call, and 1 / (calls/s), the whole loop's time per call.
    mean=$(awk -F, -v calls="$calls" '
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $col["ok"] != calls { print "rpcbench " $1 " " $3 ": " $col["ok"] " ok of " calls " calls" > "/dev/stderr"; exit 1 }
        { printf "%s %.3f\n", $col["mean_us"], 1e6 / $col["calls_per_s"] }' "$csv") ||
        die "rpcbench $transport $security lost calls"
    [[ -n $mean ]] || die "cannot read rpcbench's CSV:"$'\n'"$(cat "$csv")"
    echo "$mean"
}

sp_cmd=("${cli[@]}" sockperf ping-pong --tcp -i "$server_ip" -p "$sockperf_port" -m 64
    --full-rtt -t "$secs")
# One sockperf ping-pong run (the command in the arguments, output to FILE): its mean full
# round trip in µs, after checking nothing was dropped, duplicated or reordered.
sockperf_run() {
    local file=$1 mean
    shift
    echo "  $(show "$@")" >&2
    "$@" >"$file" 2>&1 || die "sockperf failed: $(cat "$file")"
    sed -i 's/\x1b\[[0-9;]*m//g' "$file"
    keep "$file"
    mean=$(awk '/Summary: Round trip is/ { print $(NF - 1) }' "$file")
    [[ -n $mean ]] || die "cannot parse sockperf output:"$'\n'"$(cat "$file")"
    grep -q 'dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' \
        "$file" || die "sockperf lost messages: $(grep dropped "$file")"
    echo "$mean"
}
peer_tcp() { sockperf_run "$tmp/sockperf.out" "${sp_cmd[@]}"; }
# sockperf's datagram is 64 bytes of message; rpcbench's udp request is its 64-byte payload
# plus 4 to 6 bytes of postcard header, the reply the same plus the server time.
sp_udp_cmd=("${cli[@]}" sockperf ping-pong -i "$server_ip" -p "$sockperf_udp_port" -m 64
    --full-rtt -t "$secs")
peer_udp() { sockperf_run "$tmp/sockperf_udp.out" "${sp_udp_cmd[@]}"; }

# Runs one of the reference clients in examples/ (the command after the output file's name
# and the client's name); prints the `mean_us` line it ends with.
ref_run() {
    local file="$tmp/$1.out" name=$2 mean
    shift 2
    echo "  $(show "$@")" >&2
    "$@" >"$file" || die "$name failed"
    keep "$file"
    mean=$(awk '$1 == "mean_us" { print $2 }' "$file")
    [[ -n $mean ]] || die "cannot parse $name output:"$'\n'"$(cat "$file")"
    echo "$mean"
}

unix_client_cmd=("${cli[@]}" "$unix_ref_bin" client "$unix_ref_sock" "$calls")
peer_unix() { ref_run unix_ref_client "unix_ref client" "${unix_client_cmd[@]}"; }

# tcp_ref's client against its own single-threaded server: on one connection, and a
# connection per call.
tcp_ref_cmd=("${cli[@]}" "$tcp_ref_bin" client "$host:$tcp_ref_port" "$calls" --warmup 200)
tcp_ref_connect_cmd=("${tcp_ref_cmd[@]}" --connect)
peer_tcp_ref() { ref_run tcp_ref_client "tcp_ref client" "${tcp_ref_cmd[@]}"; }
peer_tcp_ref_connect() { ref_run tcp_ref_connect "tcp_ref client --connect" "${tcp_ref_connect_cmd[@]}"; }

crr_client_cmd() { show "${cli[@]}" "$crr_bin" client "$host:$1" "$calls"; }
crr_run() { ref_run "crr_$2" "crr_ref client" "${cli[@]}" "$crr_bin" client "$host:$1" "$calls"; }
peer_crr_own() { crr_run "$crr_port" own; }
peer_crr_echo() { crr_run "$echo_tcp_port" echo; }

wrk_cmd=("${cli[@]}" wrk -t1 -c1 -d"${secs}s" -s "$wrk_lua" "$echo_url")
peer_wrk() { wrk_run "$tmp/wrk.out" "${wrk_cmd[@]}"; }
# Runs wrk (output to FILE); checks it saw no error and prints 1e6 / its requests/s.
wrk_run() {
    local file=$1 rps
    shift
    echo "  $(show "$@")" >&2
    "$@" >"$file" 2>&1 || die "wrk failed: $(cat "$file")"
    keep "$file"
    rps=$(awk '$1 == "Requests/sec:" { print $2 }' "$file")
    [[ -n $rps ]] || die "cannot parse wrk output:"$'\n'"$(cat "$file")"
    if grep -Eq 'Non-2xx|Socket errors' "$file"; then
        die "wrk saw errors: $(grep -E 'Non-2xx|Socket errors' "$file")"
    fi
    awk -v r="$rps" 'BEGIN { printf "%.3f\n", 1e6 / r }'
}

ab_cmd=("${cli[@]}" ab -q -n "$ab_requests" -c 1 -p "$body_file" -T application/octet-stream
    "$echo_url")
peer_ab() {
    local file="$tmp/ab.out" rps failed
    echo "  $(show "${ab_cmd[@]}")" >&2
    "${ab_cmd[@]}" >"$file" 2>&1 || die "ab failed: $(cat "$file")"
    keep "$file"
    rps=$(awk '/^Requests per second:/ { print $4 }' "$file")
    failed=$(awk '/^Failed requests:/ { print $3 }' "$file")
    [[ -n $rps && $failed == 0 ]] || die "ab failed or cannot be parsed:"$'\n'"$(cat "$file")"
    if grep -q 'Non-2xx' "$file"; then
        die "ab saw errors: $(grep 'Non-2xx' "$file")"
    fi
    awk -v r="$rps" 'BEGIN { printf "%.3f\n", 1e6 / r }'
}

curl_cmd=("${cli[@]}" curl --config "$curl_cfg")
# Prints the mean of the per-transfer %{time_total}; leaves the wall time per transfer of
# the whole process in $tmp/curl.wall (the function runs in a subshell).
peer_curl() {
    local file="$tmp/curl.out" t0 t1 mean wall bad conns
    echo "  $(show "${curl_cmd[@]}")" >&2
    t0=$(date +%s%N)
    "${curl_cmd[@]}" >"$file" || die "curl failed (exit $?)"
    t1=$(date +%s%N)
    keep "$file"
    read -r mean wall bad conns < <(awk -v n="$curl_fetches" -v ns=$((t1 - t0)) '
        { t += $2; c += $3; if ($1 != "200") bad++; k++ }
        END { printf "%.3f %.3f %d %d\n", t / k * 1e6, ns / 1000 / n, bad + (k != n), c }' "$file")
    ((bad == 0)) || die "curl: $bad transfers without 200 (or a missing one)"
    echo "$wall $conns" >>"$tmp/curl.wall"
    echo "$mean"
}

# h2load (nghttp2) posting the same 64 bytes to /echo over HTTP/2 with prior knowledge.
h2load_cmd=("${cli[@]}" h2load -c1 -m1 -n "$calls" -d "$body_file"
    -H "content-type: application/octet-stream" "$echo_url")
# Many streams on one connection: h2load -m STREAMS against rpcbench's h2-mux -c STREAMS.
h2load_mux_cmd() {
    show "${cli[@]}" h2load -c1 -m"$1" -n "$calls" -d "$body_file" \
        -H "content-type: application/octet-stream" "$echo_url"
}
h2load_grpc_cmd=("${cli[@]}" h2load -c1 -m1 -n "$calls" -d "$grpc_body_file"
    -H "content-type: application/grpc" -H "te: trailers" "$grpc_url")
# Runs h2load; checks every request succeeded with a 2xx.
h2load_run() {
    local file=$1
    shift
    echo "  $(show "$@")" >&2
    "$@" >"$file" 2>&1 || die "h2load failed: $(cat "$file")"
    keep "$file"
    grep -q "$calls succeeded, 0 failed, 0 errored, 0 timeout" "$file" &&
        grep -q "status codes: $calls 2xx" "$file" ||
        die "h2load saw failures:"$'\n'"$(cat "$file")"
}
# One stream at a time: h2load's mean "time for request", in µs whatever unit it prints.
# Arguments: the output file's name and the command (default: the h2 pair's).
peer_h2load() {
    local file="$tmp/${1:-h2load}.out" mean
    if (($# > 1)); then
        h2load_run "$file" "${@:2}"
    else
        h2load_run "$file" "${h2load_cmd[@]}"
    fi
    mean=$(awk '$1 == "time" && $3 == "request:" {
        v = $6; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
        print (u == "ms" ? v * 1000 : (u == "s" ? v * 1e6 : v)); exit }' "$file")
    [[ -n $mean ]] || die "cannot parse h2load output:"$'\n'"$(cat "$file")"
    echo "$mean"
}
# The same, posting a gRPC call.
peer_h2load_grpc() { peer_h2load h2load_grpc "${h2load_grpc_cmd[@]}"; }
# 1e6 / req/s of the h2load run whose output is FILE.
h2load_rps_us() {
    local rps
    rps=$(awk '$1 == "finished" { gsub(/,/, "", $4); print $4; exit }' "$1")
    [[ -n $rps ]] || die "cannot parse h2load output:"$'\n'"$(cat "$1")"
    awk -v r="$rps" 'BEGIN { printf "%.3f\n", 1e6 / r }'
}
# The whole loop's time per request (1/rps) of the h2 and grpc pairs' h2load runs: the
# same run as their mean, which the pair before measured.
peer_h2load_rps() { h2load_rps_us "$tmp/h2load.out"; }
peer_h2load_grpc_rps() { h2load_rps_us "$tmp/h2load_grpc.out"; }
# Many streams on one connection: 1e6 / h2load's req/s.
h2load_mux_run() {
    local cmd=("${cli[@]}" h2load -c1 -m"$1" -n "$calls" -d "$body_file"
        -H "content-type: application/octet-stream" "$echo_url")
    h2load_run "$tmp/h2load_mux$1.out" "${cmd[@]}"
    h2load_rps_us "$tmp/h2load_mux$1.out"
}
peer_h2load_mux64() { h2load_mux_run 64; }
peer_h2load_mux256() { h2load_mux_run 256; }
# rpcbench's own h2-mux at 16 in flight, for grpc-mux at 16: its mean call.
peer_rb_h2_mux16() {
    local mean
    read -r mean _ < <(rb_run h2-mux plain 16) || die "rpcbench h2-mux -c 16 failed"
    echo "$mean"
}

# ---- the server against nginx -------------------------------------------------------------
# GET /echo?reply_len=100 from rpcbench-echo, any path from nginx: 100 bytes each.
server_url() { printf 'http://%s:%s/echo?reply_len=%s\n' "$host" "$1" "$server_reply_len"; }
wrk64_cmd() { printf '%s\n' "${load[@]}" wrk -t1 -c64 -d"${secs}s" "$(server_url "$1")"; }
h2load16_cmd() {
    printf '%s\n' "${load[@]}" h2load -c16 -m16 -D "$secs" "$(server_url "$1")"
}
# Runs a load generator given as lines (one word each), prints 1e6 / its requests/s twice
# (as rb_run prints a mean and a 1/rps, so that either side of a pair may call it).
server_load() {
    local file=$1 kind=$2 us cmd
    mapfile -t cmd < <("${@:3}")
    if [[ $kind == wrk ]]; then
        us=$(wrk_run "$file" "${cmd[@]}")
    else
        echo "  $(show "${cmd[@]}")" >&2
        "${cmd[@]}" >"$file" 2>&1 || die "h2load failed: $(cat "$file")"
        keep "$file"
        grep -q ' 0 failed, 0 errored, 0 timeout' "$file" &&
            awk '/^status codes:/ { exit !($3 > 0 && $5 == 0 && $7 == 0 && $9 == 0) }' "$file" ||
            die "h2load saw failures:"$'\n'"$(cat "$file")"
        us=$(h2load_rps_us "$file")
    fi
    echo "$us $us"
}
echo_wrk64() { server_load "$tmp/wrk64_echo.out" wrk wrk64_cmd "$echo_srv_port"; }
peer_nginx_wrk64() { read -r us _ < <(server_load "$tmp/wrk64_nginx.out" wrk wrk64_cmd "$nginx_port"); echo "$us"; }
echo_h2load16() { server_load "$tmp/h2load16_echo.out" h2load h2load16_cmd "$echo_srv_port"; }
peer_nginx_h2load16() { read -r us _ < <(server_load "$tmp/h2load16_nginx.out" h2load h2load16_cmd "$nginx_h2_port"); echo "$us"; }
# The h2 crate's client (examples/h2_ref.rs), one stream at a time on one connection: its mean.
h2_ref_cmd=("${cli[@]}" "$h2_ref_bin" "$host:$echo_http_port" "$calls")
# quinn alone (examples/quic_ref.rs), one stream at a time on one QUIC connection: its mean.
quic_ref_cmd=("${cli[@]}" env RPCBENCH_CA="$echo_ca" "$quic_ref_bin" "$host:$echo_quic_port" "$calls")
peer_quic_ref() { ref_run quic_ref quic_ref "${quic_ref_cmd[@]}"; }
# hyperium's h3 on h3-quinn alone (examples/h3_ref.rs), one request at a time: its mean.
h3_ref_cmd=("${cli[@]}" env RPCBENCH_CA="$echo_ca" "$h3_ref_bin" "$host:$echo_quic_port" "$calls")
peer_h3_ref() { ref_run h3_ref h3_ref "${h3_ref_cmd[@]}"; }
peer_h2_ref() { ref_run h2_ref h2_ref "${h2_ref_cmd[@]}"; }
# A bidirectional gRPC stream on the h2 crate's client (examples/grpc_stream_ref.rs): its mean.
grpc_stream_ref_cmd=("${cli[@]}" "$grpc_stream_ref_bin" "$host:$echo_http_port" "$calls")
peer_grpc_stream_ref() { ref_run grpc_stream_ref grpc_stream_ref "${grpc_stream_ref_cmd[@]}"; }

# ---- TLS peers ----------------------------------------------------------------------------
# openssl s_time on the raw-frames TLS port (a handshake per connection, no request) and on
# the HTTPS port (-www: one HTTP/1.0 GET of 64 bytes per connection).
stime=("${cli[@]}" openssl s_time -time "$secs" -verify 2 -CAfile "$echo_ca")
stime_new_cmd=("${stime[@]}" -connect "$host:$echo_tls_port" -new -tls1_3)
stime_reuse12_cmd=("${stime[@]}" -connect "$host:$echo_tls_port" -reuse -tls1_2)
stime_www_new_cmd=("${stime[@]}" -connect "$host:$echo_https_port" -new -tls1_3
    -www '/echo?reply_len=64')
stime_www_reuse_cmd=("${stime[@]}" -connect "$host:$echo_https_port" -reuse -tls1_3
    -www '/echo?reply_len=64')
# Runs s_time (output to FILE) and prints its wall time per connection in µs. s_time
# prints a mark per connection, r for a resumed one, * for a full TLS 1.2 or 1.3 one: WANT
# is the mark every connection must have (but the first one under -reuse, which makes the
# session), so that a -reuse run that did not resume is an error, not a figure.
stime_run() {
    local file=$1 want=$2 t0 t1 n marks
    shift 2
    echo "  $(show "$@")" >&2
    t0=$(date +%s%N)
    "$@" >"$file" 2>&1 || die "openssl s_time failed: $(tail -n 5 "$file")"
    t1=$(date +%s%N)
    keep "$file"
    n=$(awk '/ connections in [0-9.]+s;/ { print $1; exit }' "$file")
    [[ $n =~ ^[1-9][0-9]*$ ]] || die "cannot parse openssl s_time output:"$'\n'"$(tail -n 5 "$file")"
    marks=$(grep -E '^[*rt3]+$' "$file" | tr -cd "$want" | wc -c)
    ((marks >= n - 1)) ||
        die "openssl s_time: $marks of $n connections marked '$want' ($(show "$@"))"
    awk -v ns=$((t1 - t0)) -v n="$n" 'BEGIN { printf "%.3f\n", ns / 1000 / n }'
}
peer_stime_new() { stime_run "$tmp/stime_new.out" '*' "${stime_new_cmd[@]}"; }
peer_stime_reuse12() { stime_run "$tmp/stime_reuse12.out" r "${stime_reuse12_cmd[@]}"; }
peer_stime_www_new() { stime_run "$tmp/stime_www_new.out" '*' "${stime_www_new_cmd[@]}"; }
peer_stime_www_reuse() { stime_run "$tmp/stime_www_reuse.out" r "${stime_www_reuse_cmd[@]}"; }

curl_tls_cmd=("${cli[@]}" curl --config "$curl_tls_cfg")
# The mean %{time_total} of HTTPS transfers on fresh connections; checks each had its own
# connection and a 200, and leaves the mean handshake (%{time_appconnect} -
# %{time_connect}) in $tmp/curl_tls.handshake.
peer_curl_tls() {
    local file="$tmp/curl_tls.out" mean handshake bad
    echo "  $(show "${curl_tls_cmd[@]}")" >&2
    "${curl_tls_cmd[@]}" >"$file" || die "curl (TLS) failed (exit $?)"
    keep "$file"
    read -r mean handshake bad < <(awk -v n="$curl_fetches" '
        { t += $2; h += $5 - $4; if ($1 != "200" || $3 != 1) bad++; k++ }
        END { printf "%.3f %.3f %d\n", t / k * 1e6, h / k * 1e6, bad + (k != n) }' "$file")
    ((bad == 0)) || die "curl (TLS): $bad transfers without 200 on a new connection (or missing)"
    echo "$handshake" >>"$tmp/curl_tls.handshake"
    echo "$mean"
}

# h2load over TLS: HTTP/2 by ALPN, and HTTP/1.1 with --h1 (keep-alive, one connection).
h2load_tls_cmd=("${cli[@]}" h2load -c1 -m1 -n "$calls" -d "$body_file"
    -H "content-type: application/octet-stream" "$echo_https_url")
h2load_h1_tls_cmd=("${cli[@]}" h2load --h1 -c1 -m1 -n "$calls" -d "$body_file"
    -H "content-type: application/octet-stream" "$echo_https_url")
# peer_h2load, after checking h2load negotiated TLS 1.3 and the protocol asked for.
h2load_tls_run() {
    local name=$1 alpn=$2 mean
    shift 2
    mean=$(peer_h2load "$name" "$@")
    grep -q '^TLS Protocol: TLSv1.3' "$tmp/$name.out" &&
        grep -q "^Application protocol: $alpn\$" "$tmp/$name.out" ||
        die "h2load did not negotiate TLS 1.3 and $alpn:"$'\n'"$(grep -E '^(TLS|Application)' "$tmp/$name.out")"
    echo "$mean"
}
peer_h2load_tls() { h2load_tls_run h2load_tls h2 "${h2load_tls_cmd[@]}"; }
peer_h2load_h1_tls() { h2load_tls_run h2load_h1_tls http/1.1 "${h2load_h1_tls_cmd[@]}"; }

# The pairs: transport, its security mode, peer name, the function measuring the peer,
# rpcbench's figure compared (its mean call, or with `rps` its 1e6 / calls_per_s), its calls
# in flight (default 1), and the function measuring rpcbench's side (default rb_run: the
# client against rpcbench-echo; the server pairs' echo_wrk64 and echo_h2load16: rpcbench-echo
# under the peer's load generator).
pairs=(
    "tcp|plain|sockperf ping-pong|peer_tcp"
    "tcp|plain|tcp_ref (blocking client, single-threaded server)|peer_tcp_ref"
    "tcp-connect|plain|crr_ref (std::net client and server)|peer_crr_own"
    "tcp-connect|plain|crr_ref client against rpcbench-echo|peer_crr_echo"
    "tcp-connect|plain|tcp_ref --connect (its single-threaded server)|peer_tcp_ref_connect"
    "http-keepalive|plain|wrk -t1 -c1 (1/rps)|peer_wrk"
    "http-fresh|plain|ab -c 1, no -k (1/rps)|peer_ab"
    "curl-reuse|plain|curl, one process (mean %{time_total})|peer_curl"
    "h2|plain|h2load -c1 -m1 (mean time for request)|peer_h2load"
    "h2|plain|h2load -c1 -m1 (1/rps; rpcbench 1/rps)|peer_h2load_rps|rps"
    "h2|plain|h2_ref (the h2 crate's client, mean)|peer_h2_ref"
    "quic|tls13|quic_ref (quinn alone, mean)|peer_quic_ref"
    "h3|tls13|h3_ref (the h3 crate on quinn alone, mean)|peer_h3_ref"
    "h2-mux|plain|h2load -c1 -m64 (1/rps; rpcbench -c 64)|peer_h2load_mux64|rps|64"
    "h2-mux|plain|h2load -c1 -m256 (1/rps; rpcbench -c 256)|peer_h2load_mux256|rps|256"
    "grpc-stream|plain|grpc_stream_ref (one stream on the h2 crate's client, mean)|peer_grpc_stream_ref"
    "grpc-mux|plain|rpcbench h2-mux -c 16 (mean; grpc-mux -c 16)|peer_rb_h2_mux16||16"
    "grpc|plain|h2load -c1 -m1, gRPC-framed POST (mean)|peer_h2load_grpc"
    "grpc|plain|h2load gRPC-framed POST (1/rps; rpcbench 1/rps)|peer_h2load_grpc_rps|rps"
    "udp|plain|sockperf ping-pong --udp|peer_udp"
    "unix|plain|unix_ref (blocking Unix socket ping-pong)|peer_unix"
    "tcp-connect|tls13|openssl s_time -new (wall / connections)|peer_stime_new"
    "tcp-connect|tls12-resume|openssl s_time -reuse -tls1_2 (wall / connections)|peer_stime_reuse12"
    "http-fresh|tls13|openssl s_time -new -www (wall / connections)|peer_stime_www_new"
    "http-fresh|tls13-resume|openssl s_time -reuse -www (wall / connections)|peer_stime_www_reuse"
    "curl-fresh|tls13|curl, a connection per transfer (mean %{time_total})|peer_curl_tls"
    "http-keepalive|tls13|h2load --h1 -c1 -m1 over TLS (mean)|peer_h2load_h1_tls"
    "h2|tls13|h2load -c1 -m1 over TLS (mean)|peer_h2load_tls"
    "http-keepalive|plain|nginx, 1 worker, under wrk -t1 -c64 (1/rps; rpcbench-echo under the same)|peer_nginx_wrk64|rps|64|echo_wrk64"
    "h2|plain|nginx, 1 worker, under h2load -c16 -m16 (1/rps; rpcbench-echo under the same)|peer_nginx_h2load16|rps|256|echo_h2load16"
)
# A pair's fields (of P) into t, sec, name, fn, metric, workers and rbfn, with their
# defaults, and key: what identifies rpcbench's side, measured once per round whichever
# pairs read it.
read_pair() {
    IFS='|' read -r t sec name fn metric workers rbfn <<<"$1"
    workers=${workers:-1} rbfn=${rbfn:-rb_run}
    key="$t/$sec/$workers/$rbfn"
}
# Measures rpcbench's side of pair P for this round: its mean into rb_vals, its 1/rps into
# rb_rps.
rb_measure() {
    local t sec name fn metric workers rbfn key mean rps
    read_pair "$1"
    read -r mean rps < <("$rbfn" "$t" "$sec" "$workers") || die "rpcbench $t $sec failed"
    rb_vals[$key]+=" $mean"
    rb_rps[$key]+=" $rps"
    rb_done[$key]=1
}
# rpcbench's round figures that pair P compares: its means, or its 1/rps for an rps pair.
rb_figures() {
    local t sec name fn metric workers rbfn key
    read_pair "$1"
    if [[ $metric == rps ]]; then echo "${rb_rps[$key]}"; else echo "${rb_vals[$key]}"; fi
}

# Each pair's exact commands, in the pairs' order.
commands=(
    "server: $(show "${sp_srv_cmd[@]}"); client: $(show "${sp_cmd[@]}")"
    "server: $(show "${tcp_ref_srv_cmd[@]}"); client: $(show "${tcp_ref_cmd[@]}")"
    "server: $(show "${crr_srv_cmd[@]}"); client: $(crr_client_cmd "$crr_port")"
    "server: $(show "${echo_cmd[@]}"); client: $(crr_client_cmd "$echo_tcp_port")"
    "server: $(show "${tcp_ref_srv_cmd[@]}"); client: $(show "${tcp_ref_connect_cmd[@]}")"
    "$(show "${wrk_cmd[@]}") # $(basename "$wrk_lua"): wrk.method = \"POST\", wrk.body = 64 bytes, Content-Type: application/octet-stream"
    "$(show "${ab_cmd[@]}") # $(basename "$body_file"): 64 bytes"
    "$(show "${curl_cmd[@]}") # config: silent, data-binary = \"@$(basename "$body_file")\" (64 bytes), header = \"Content-Type: application/octet-stream\", write-out = \"%{http_code} %{time_total} %{num_connects}\\n\", then $curl_fetches times: url = \"$echo_url\", output = \"/dev/null\""
    "$(show "${h2load_cmd[@]}") # $(basename "$body_file"): 64 bytes"
    "the h2 pair's h2load run: 1e6 / its req/s"
    "$(show "${h2_ref_cmd[@]}")"
    "$(show "${quic_ref_cmd[@]}")"
    "$(show "${h3_ref_cmd[@]}")"
    "$(h2load_mux_cmd 64) # $(basename "$body_file"): 64 bytes"
    "$(h2load_mux_cmd 256) # $(basename "$body_file"): 64 bytes"
    "$(show "${grpc_stream_ref_cmd[@]}")"
    "rpcbench as for grpc-mux, with --transports h2-mux -c 16"
    "$(show "${h2load_grpc_cmd[@]}") # $(basename "$grpc_body_file"): one gRPC message, EchoRequest {seq: 1, payload: 64 bytes}"
    "the grpc pair's h2load run: 1e6 / its req/s"
    "server: $(show "${sp_udp_srv_cmd[@]}"); client: $(show "${sp_udp_cmd[@]}")"
    "server: $(show "${unix_srv_cmd[@]}"); client: $(show "${unix_client_cmd[@]}")"
    "$(show "${stime_new_cmd[@]}")"
    "$(show "${stime_reuse12_cmd[@]}")"
    "$(show "${stime_www_new_cmd[@]}")"
    "$(show "${stime_www_reuse_cmd[@]}")"
    "$(show "${curl_tls_cmd[@]}") # config: as curl-reuse's, to $echo_https_url, plus header = \"Connection: close\", cacert, no-sessionid, http1.1, tlsv1.3, tls-max = \"1.3\", write-out adding %{time_connect} %{time_appconnect}"
    "$(show "${h2load_h1_tls_cmd[@]}") # $(basename "$body_file"): 64 bytes"
    "$(show "${h2load_tls_cmd[@]}") # $(basename "$body_file"): 64 bytes"
    "servers: $(show "${nginx_cmd[@]}") (report/lib.sh's configuration) and $(show "${echo_srv_cmd[@]}"); load: $(wrk64_cmd PORT | paste -sd' ')"
    "servers as the pair before (nginx: listen ... http2); load: $(h2load16_cmd PORT | paste -sd' ')"
)
((${#commands[@]} == ${#pairs[@]})) || die "a pair without its command (or a command without its pair)"
# --only: the pairs of those transports, with their commands.
if [[ -n $only ]]; then
    kept=() kept_commands=()
    for i in "${!pairs[@]}"; do
        IFS='|' read -r t _ <<<"${pairs[$i]}"
        if [[ ,$only, == *,$t,* ]]; then
            kept+=("${pairs[$i]}") kept_commands+=("${commands[$i]}")
        fi
    done
    ((${#kept[@]} > 0)) || die "--only $only: no pair of those transports"
    pairs=("${kept[@]}") commands=("${kept_commands[@]}")
fi

declare -A peer_vals=() rb_vals=() rb_rps=() rb_done=()
for ((round = 1; round <= rounds; round++)); do
    # Odd rounds measure the peer first, even rounds rpcbench first.
    rb_done=()
    for p in "${pairs[@]}"; do
        read_pair "$p"
        echo "round $round: $t ($sec, -c $workers) against $name ..." >&2
        if ((round % 2 == 0)) && [[ -z ${rb_done[$key]:-} ]]; then
            rb_measure "$p"
        fi
        peer_vals[$fn]+=" $("$fn")"
        if [[ -z ${rb_done[$key]:-} ]]; then
            rb_measure "$p"
        fi
    done
done

# ---- figures ----------------------------------------------------------------------------
# The raw round means only; rpcbench judges them below.
printf '%-27s %-52s  %s\n' transport peer "round means µs: rpcbench | peer"
printf '%-27s %-52s  %s\n' --------------------------- \
    ---------------------------------------------------- --------------------------------
# Round means to the nanosecond, for reading (the JSON keeps them as measured).
ns() { awk '{ for (i = 1; i <= NF; i++) printf " %.3f", $i }' <<<"$1"; }
# A pair's transport as the report names it: `tcp-connect tls13`, or `tcp` when plain.
label() {
    local l=$1
    [[ $2 == plain ]] || l+=" $2"
    ((${3:-1} == 1)) || l+=" -c $3"
    echo "$l"
}
for p in "${pairs[@]}"; do
    read_pair "$p"
    printf '%-27s %-52s %s |%s\n' "$(label "$t" "$sec" "$workers")" "$name" "$(ns "$(rb_figures "$p")")" \
        "$(ns "${peer_vals[$fn]}")"
done
echo
if [[ -f $tmp/curl.wall ]]; then
    read -r curl_wall curl_conns < <(awk '{ w += $1; c += $2; n++ } END { printf "%.3f %d\n", w / n, c / n }' "$tmp/curl.wall")
    echo "curl-reuse peer: mean of curl's per-transfer %{time_total}; the wall time of the whole"
    echo "  curl process divided by $curl_fetches was $curl_wall µs ($curl_conns connect(s) per process)."
fi
if [[ -f $tmp/curl_tls.handshake ]]; then
    curl_tls_handshake=$(awk '{ h += $1; n++ } END { printf "%.3f", h / n }' "$tmp/curl_tls.handshake")
    rb_tls_phase=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        { print $col["tls_mean_us"] }' "$tmp/rpcbench_$(rb_name curl-fresh tls13).csv")
    echo "curl-fresh tls13 peer: the handshake alone (%{time_appconnect} - %{time_connect}) took"
    echo "  $curl_tls_handshake µs on average; rpcbench's tls phase, $rb_tls_phase µs (last round)."
fi
echo "load avg:   $(cut -d' ' -f1-3 /proc/loadavg) (after the runs)"
# How busy each CPU was while the pairs ran: with --pin same, CPU 1 should be near idle; much
# more means other tenants of the machine, which likely took CPU 0 time too.
echo "cpu busy:   $(join -j 1 <(echo "$cpu_before") <(cpu_jiffies) |
    awk '{ printf "%s%s %.0f%%", sep, $1, ($4 - $2) / ($5 - $3) * 100; sep = ", " }') (during the runs)"
echo
echo "peer commands:"
for i in "${!pairs[@]}"; do
    read_pair "${pairs[$i]}"
    printf '  %-27s %s\n' "$(label "$t" "$sec" "$workers")" "${commands[$i]}"
done

# ---- JSON -------------------------------------------------------------------------------
# A JSON string: backslashes, quotes and control characters escaped.
json_str() {
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\t'/\\t}
    s=${s//$'\n'/\\n}
    s=${s//$'\r'/\\r}
    printf '"%s"' "$s"
}
# A JSON array of the numbers in a blank-separated list.
json_nums() {
    local -a v
    read -ra v <<<"$1"
    local IFS=,
    printf '[%s]' "${v[*]}"
}
[[ -n $json_out ]] || json_out="$tmp/peers.json"
{
    printf '{\n  "placement": %s,\n  "pairs": [' "$(json_str "$placement")"
    sep=""
    for i in "${!pairs[@]}"; do
        read_pair "${pairs[$i]}"
        printf '%s\n    {\n      "transport": %s,\n' "$sep" "$(json_str "$t")"
        [[ $sec == plain ]] || printf '      "security": %s,\n' "$(json_str "$sec")"
        ((workers == 1)) || printf '      "workers": %s,\n' "$workers"
        printf '      "peer": %s,\n      "command": %s,\n' "$(json_str "$name")" \
            "$(json_str "${commands[$i]}")"
        printf '      "rpcbench_round_means_us": %s,\n      "peer_round_means_us": %s\n    }' \
            "$(json_nums "$(rb_figures "${pairs[$i]}")")" "$(json_nums "${peer_vals[$fn]}")"
        sep=","
    done
    printf '\n  ]\n}\n'
} >"$json_out"
echo "wrote $json_out" >&2

# ---- verdict ----------------------------------------------------------------------------
# rpcbench judges: the medians and the ratio limit live in crates/analysis/src/analysis/peers.rs only. Its last
# runs here are the report's inputs; only the peer lines are of interest.
rb_json=()
for key in "${!rb_done[@]}"; do
    # rpcbench's own runs only (not rpcbench-echo under another tool's load).
    IFS=/ read -r t sec workers rbfn <<<"$key"
    [[ $rbfn != rb_run ]] || rb_json+=("$tmp/rpcbench_$(rb_name "$t" "$sec" "$workers").json")
done
echo
"$rb_bin" report "${rb_json[@]}" --peers "$json_out" --out "$tmp/report" >"$tmp/report.out" ||
    die "rpcbench report failed: $(cat "$tmp/report.out")"
sed -n '/^peers (/,$p' "$tmp/report.out"
