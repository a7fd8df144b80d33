#!/bin/bash
# bench/run.sh - `make bench`: zeusd and nginx side by side, in one run.
#
# Builds a release zeusd (build-bench/, or $BENCH_BUILD) and the load
# generator (bench/loadgen.c, `cc -O2`), starts zeusd on the simulator
# (8 GPUs, 2 simulated RAPL packages) over UDS and TCP, and a master-less
# nginx (one worker, no access log) that answers the same paths with bodies
# of the same size. Every measurement runs $BENCH_ROUNDS times, zeusd and
# nginx interleaved, and the median is reported: the machine is shared, so
# the figures that mean something are the ratios measured side by side.
# Also measures zeusd's RSS (idle and after load), its CPU time while idle,
# and the cost of info-level request logging. Ends with a markdown table
# (docs/performance.md explains it).
#
# Environment: BENCH_ROUNDS (3), BENCH_DURATION seconds per run (1.5),
# BENCH_IDLE_S (10), BENCH_BUILD (build-bench), BENCH_KEEP=1 keeps the
# temporary directory (raw results, logs).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BENCH_BUILD:-$root/build-bench}
rounds=${BENCH_ROUNDS:-3}
dur=${BENCH_DURATION:-1.5}
idle_s=${BENCH_IDLE_S:-10}
warm=0.2
gpus=8

tmp=$(mktemp -d /tmp/zeusd-bench.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	# The daemons are not this shell's children (started inside $(...)):
	# wait until they are gone before removing their directory.
	for p in "${pids[@]}"; do
		for _ in $(seq 50); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
	done
	if [ "${BENCH_KEEP:-0}" = 1 ]; then
		echo "kept $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT

# --- build -------------------------------------------------------------------
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" "$root" -Dtests=false --buildtype=release >/dev/null
fi
ninja -C "$build" zeusd libnvml-sim.so >/dev/null
zeusd=$build/zeusd
lg=$tmp/loadgen
cc -O2 -std=c17 -D_GNU_SOURCE -Wall -Wextra -o "$lg" "$root/bench/loadgen.c"
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx_bin" ] || { echo "bench: nginx not found (scripts/deps.sh bench)" >&2; exit 1; }

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_ready ADDR_FLAGS...: until GET /time answers (5 s at most).
wait_ready() {
	for _ in $(seq 50); do
		if "$lg" "$@" -b -p /time >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	echo "bench: server did not come up ($*)" >&2
	exit 1
}

# start_zeusd NAME LOGLEVEL ARGS...: prints the pid.
start_zeusd() {
	local name=$1 level=$2
	shift 2
	ZEUS_SIM_GPUS=$gpus ZEUSD_LOG=$level "$zeusd" serve --simulate "$@" \
	    >"$tmp/$name.log" 2>&1 &
	echo $!
}

# CPU ticks (utime+stime) of a process; field positions after the last ')'.
cpu_ticks() {
	sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'
}

rss_kib() {
	awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}
# Of that RSS: anonymous memory (the daemon's own) and the proportional
# set size (shared library pages divided among the processes mapping them).
anon_kib() {
	awk '/^RssAnon:/ { print $2 }' "/proc/$1/status"
}
pss_kib() {
	awk '/^Pss:/ { print $2 }' "/proc/$1/smaps_rollup"
}

# Nanoseconds on CPU and voluntary context switches summed over all
# threads: finer than clock ticks, and the switches show who wakes up.
sched_ns() {
	cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { print s }'
}
wakeups() {
	cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt_switches/ { s += $2 } END { print s }'
}

hz=$(getconf CLK_TCK)
results=$tmp/results.txt
facts=$tmp/facts.txt
: >"$results"
: >"$facts"

# --- zeusd ---------------------------------------------------------------------
tcp_z=$(free_port)
zu=$(start_zeusd zeusd-uds warn --socket-path "$tmp/zeusd.sock")
pids+=("$zu")
zg=$(start_zeusd zeusd-gpuonly warn --socket-path "$tmp/zeusd-gpu.sock" \
    --enable gpu-control,gpu-read)
pids+=("$zg")
zt=$(start_zeusd zeusd-tcp warn --mode tcp --tcp-bind-address "127.0.0.1:$tcp_z")
pids+=("$zt")
wait_ready -u "$tmp/zeusd.sock"
wait_ready -u "$tmp/zeusd-gpu.sock"
wait_ready -t "127.0.0.1:$tcp_z"

# --- idle: RSS after startup, CPU over idle_s seconds ----------------------------
sleep 1
{
	echo "rss_idle_kib=$(rss_kib "$zu")"
	echo "anon_idle_kib=$(anon_kib "$zu")"
	echo "pss_idle_kib=$(pss_kib "$zu")"
} >>"$facts"
echo "rss_idle_gpuonly_kib=$(rss_kib "$zg")" >>"$facts"
echo "bench: measuring ${idle_s} s of idleness" >&2
t0u=$(cpu_ticks "$zu"); t0g=$(cpu_ticks "$zg")
n0u=$(sched_ns "$zu"); n0g=$(sched_ns "$zg")
w0u=$(wakeups "$zu"); w0g=$(wakeups "$zg")
sleep "$idle_s"
t1u=$(cpu_ticks "$zu"); t1g=$(cpu_ticks "$zg")
n1u=$(sched_ns "$zu"); n1g=$(sched_ns "$zg")
w1u=$(wakeups "$zu"); w1g=$(wakeups "$zg")
{
	echo "idle_s=$idle_s"
	echo "idle_ticks_ms=$(( (t1u - t0u) * 1000 / hz ))"
	echo "idle_gpuonly_ticks_ms=$(( (t1g - t0g) * 1000 / hz ))"
	echo "idle_sched_us=$(( (n1u - n0u) / 1000 ))"
	echo "idle_gpuonly_sched_us=$(( (n1g - n0g) / 1000 ))"
	echo "idle_wakeups=$(( w1u - w0u ))"
	echo "idle_gpuonly_wakeups=$(( w1g - w0g ))"
} >>"$facts"
kill "$zg"

# --- nginx: same paths, same-sized bodies ------------------------------------------
path_time=/time
path_power=/gpu/get_power
path_setpl='/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000&block=true'
path_energy='/cpu/get_cumulative_energy?cpu=true&dram=true'

# body PATH: zeusd's answer, checked to be safe inside an nginx '...' string.
body() {
	local b
	b=$("$lg" -u "$tmp/zeusd.sock" -b -p "$1")
	case $b in
	*"'"* | *'$'* | *\\*) echo "bench: unexpected body: $b" >&2; exit 1 ;;
	esac
	printf '%s' "$b"
}
b_time=$(body "$path_time")
b_power=$(body "$path_power")
b_energy=$(body "$path_energy")

tcp_n=$(free_port)
mkdir -p "$tmp/nginx"
cat >"$tmp/nginx/nginx.conf" <<EOF
# Generated by bench/run.sh: one master-less worker, no access log, fixed
# JSON of the same size as zeusd's answers.
daemon off;
master_process off;
worker_processes 1;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path $tmp/nginx/body;
	proxy_temp_path $tmp/nginx/proxy;
	fastcgi_temp_path $tmp/nginx/fastcgi;
	uwsgi_temp_path $tmp/nginx/uwsgi;
	scgi_temp_path $tmp/nginx/scgi;
	default_type application/json;
	keepalive_requests 1000000000;
	keepalive_timeout 60s;
	server {
		listen unix:$tmp/nginx.sock;
		listen 127.0.0.1:$tcp_n;
		location = /time { return 200 '$b_time'; }
		location = /gpu/get_power { return 200 '$b_power'; }
		location = /gpu/set_power_limit { return 200 ''; }
		location = /cpu/get_cumulative_energy { return 200 '$b_energy'; }
	}
}
EOF
"$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -e "$tmp/nginx/error.log" &
ng=$!
pids+=("$ng")
wait_ready -u "$tmp/nginx.sock"
wait_ready -t "127.0.0.1:$tcp_n"

# --- load ------------------------------------------------------------------------------
# One-connection runs put the server (all its threads) and the load
# generator on one core: on this kind of VM a wake-up across cores costs
# 70-100 us and the scheduler places the two processes on the same core
# or not at random, so unpinned one-connection latency is bimodal. Pinned,
# the figure is the server's own path length (context switches included).
ncpu=$(nproc)
pin_cpu=$(( ncpu - 1 ))
all_cpus=0-$pin_cpu

# run LABEL PID ADDR_FLAG ADDR CONNS METHOD PATH NAME [unpinned]
run() {
	local label=$1 pid=$2 af=$3 addr=$4 conns=$5 method=$6 path=$7 name=$8
	local pin=() line
	if [ "$conns" = 1 ] && [ "${9:-}" != unpinned ]; then
		taskset -a -p -c "$pin_cpu" "$pid" >/dev/null
		pin=(taskset -c "$pin_cpu")
	fi
	line=$("${pin[@]}" "$lg" "$af" "$addr" -c "$conns" -d "$dur" -w "$warm" \
	    -m "$method" -p "$path" -P "$pid" -l "$label")
	if [ ${#pin[@]} -gt 0 ]; then
		taskset -a -p -c "$all_cpus" "$pid" >/dev/null
	fi
	echo "$line endpoint=$name" >>"$results"
}

# The info-level instance: same as zeusd-uds but logging every request.
zi=$(start_zeusd zeusd-info info --socket-path "$tmp/zeusd-info.sock")
pids+=("$zi")
wait_ready -u "$tmp/zeusd-info.sock"

endpoints="time power setpl energy"
for r in $(seq "$rounds"); do
	echo "bench: round $r of $rounds" >&2
	for tr in uds tcp; do
		if [ "$tr" = uds ]; then
			zaf=-u; zaddr=$tmp/zeusd.sock; zpid=$zu
			naf=-u; naddr=$tmp/nginx.sock
		else
			zaf=-t; zaddr=127.0.0.1:$tcp_z; zpid=$zt
			naf=-t; naddr=127.0.0.1:$tcp_n
		fi
		for c in 1 50; do
			for e in $endpoints; do
				m=GET
				case $e in
				time) p=$path_time ;;
				power) p=$path_power ;;
				setpl) p=$path_setpl; m=POST ;;
				energy) p=$path_energy ;;
				esac
				run zeusd "$zpid" "$zaf" "$zaddr" "$c" "$m" "$p" "$e"
				run nginx "$ng" "$naf" "$naddr" "$c" "$m" "$p" "$e"
			done
		done
	done
	for e in time power; do
		[ $e = time ] && p=$path_time || p=$path_power
		run zeusd "$zu" -u "$tmp/zeusd.sock" 1 GET "$p" "$e-unpinned" unpinned
		run nginx "$ng" -u "$tmp/nginx.sock" 1 GET "$p" "$e-unpinned" unpinned
	done
	for c in 1 50; do
		run zeusd-info "$zi" -u "$tmp/zeusd-info.sock" "$c" GET "$path_time" time
		run zeusd "$zu" -u "$tmp/zeusd.sock" "$c" GET "$path_time" time-paired
	done
done
{
	echo "rss_load_kib=$(rss_kib "$zu")"
	echo "anon_load_kib=$(anon_kib "$zu")"
	echo "rss_load_tcp_kib=$(rss_kib "$zt")"
	echo "rss_load_info_kib=$(rss_kib "$zi")"
} >>"$facts"

# --- report ----------------------------------------------------------------------------
python3 - "$results" "$facts" "$rounds" "$dur" <<'EOF'
import statistics
import sys

results, facts, rounds, dur = sys.argv[1:5]
runs = []
for line in open(results):
    runs.append(dict(kv.split("=", 1) for kv in line.split()))
fact = dict(l.strip().split("=", 1) for l in open(facts) if "=" in l)

def med(label, endpoint, tr, conns, key):
    v = [float(r[key]) for r in runs
         if r["label"] == label and r["endpoint"] == endpoint
         and r["transport"] == tr and r["conns"] == str(conns) and key in r]
    return statistics.median(v) if v else float("nan")

names = {"time": "GET /time", "power": "GET /gpu/get_power",
         "setpl": "POST /gpu/set_power_limit (block=true)",
         "energy": "GET /cpu/get_cumulative_energy"}
print()
print(f"### HTTP requests: zeusd vs nginx, median of {rounds} rounds "
      f"of {dur} s")
print()
print("| request | transport | conns | zeusd req/s | nginx req/s | ratio "
      "| zeusd p50 / p99 µs | nginx p50 / p99 µs | zeusd CPU µs/req "
      "| nginx CPU µs/req |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for e in ("time", "power", "setpl", "energy"):
    for tr in ("uds", "tcp"):
        for c in (1, 50):
            z = lambda k: med("zeusd", e, tr, c, k)
            n = lambda k: med("nginx", e, tr, c, k)
            print(f"| {names[e]} | {tr.upper()} | {c} | {z('rps'):,.0f} "
                  f"| {n('rps'):,.0f} | {z('rps') / n('rps'):.2f}x "
                  f"| {z('p50_us'):.0f} / {z('p99_us'):.0f} "
                  f"| {n('p50_us'):.0f} / {n('p99_us'):.0f} "
                  f"| {z('server_cpu_us_per_req'):.1f} "
                  f"| {n('server_cpu_us_per_req'):.1f} |")

print()
print("One-connection rows run pinned to one core (server and load "
      "generator); unpinned, over UDS:")
print()
print("| request | zeusd p50 / p99 µs | nginx p50 / p99 µs | zeusd req/s "
      "| nginx req/s |")
print("|---|---:|---:|---:|---:|")
for e in ("time", "power"):
    z = lambda k: med("zeusd", e + "-unpinned", "uds", 1, k)
    n = lambda k: med("nginx", e + "-unpinned", "uds", 1, k)
    print(f"| {names[e]} | {z('p50_us'):.0f} / {z('p99_us'):.0f} "
          f"| {n('p50_us'):.0f} / {n('p99_us'):.0f} | {z('rps'):,.0f} "
          f"| {n('rps'):,.0f} |")

print()
print("### GET /cpu/get_cumulative_energy against GET /time (zeusd, UDS)")
print()
print("| figure | /time | /cpu/get_cumulative_energy | ratio |")
print("|---|---:|---:|---:|")
for label, c, k in (("p50 µs, 1 conn", 1, "p50_us"),
                    ("p99 µs, 1 conn", 1, "p99_us"),
                    ("req/s, 50 conns", 50, "rps"),
                    ("CPU µs/req, 50 conns", 50, "server_cpu_us_per_req")):
    t = med("zeusd", "time", "uds", c, k)
    en = med("zeusd", "energy", "uds", c, k)
    f = ",.0f" if k == "rps" else ",.1f"
    print(f"| {label} | {t:{f}} | {en:{f}} | {en / t:.2f}x |")

print()
print("### Request logging (GET /time over UDS, info vs warn level)")
print()
print("| conns | warn req/s | info req/s | ratio | warn CPU µs/req "
      "| info CPU µs/req |")
print("|---:|---:|---:|---:|---:|---:|")
for c in (1, 50):
    w = lambda k: med("zeusd", "time-paired", "uds", c, k)
    i = lambda k: med("zeusd-info", "time", "uds", c, k)
    print(f"| {c} | {w('rps'):,.0f} | {i('rps'):,.0f} "
          f"| {i('rps') / w('rps'):.2f}x | {w('server_cpu_us_per_req'):.1f} "
          f"| {i('server_cpu_us_per_req'):.1f} |")

kib = lambda k: int(fact[k]) / 1024
idle_s = fact["idle_s"]
print()
print(f"### Memory and idleness (8 simulated GPUs, 2 RAPL packages)")
print()
print("| figure | value |")
print("|---|---:|")
print(f"| RSS idle, after startup | {kib('rss_idle_kib'):.1f} MiB |")
print(f"| of which anonymous / PSS, idle | {kib('anon_idle_kib'):.1f} "
      f"/ {kib('pss_idle_kib'):.1f} MiB |")
print(f"| RSS after load (UDS / TCP instance) | {kib('rss_load_kib'):.1f} "
      f"/ {kib('rss_load_tcp_kib'):.1f} MiB |")
print(f"| anonymous after load (UDS instance) "
      f"| {kib('anon_load_kib'):.1f} MiB |")
print(f"| RSS idle, `--enable gpu-control,gpu-read` "
      f"| {kib('rss_idle_gpuonly_kib'):.1f} MiB |")
print(f"| CPU over {idle_s} s idle, all groups (utime+stime / scheduler) "
      f"| {fact['idle_ticks_ms']} ms / {int(fact['idle_sched_us']) / 1000:.1f}"
      f" ms, {fact['idle_wakeups']} wake-ups |")
print(f"| CPU over {idle_s} s idle, `--enable gpu-control,gpu-read` "
      f"| {fact['idle_gpuonly_ticks_ms']} ms / "
      f"{int(fact['idle_gpuonly_sched_us']) / 1000:.1f} ms, "
      f"{fact['idle_gpuonly_wakeups']} wake-ups |")

def verdict(ok):
    return "met" if ok else "MISSED"

t_rps = med("zeusd", "time", "uds", 50, "rps") / med("nginx", "time", "uds", 50, "rps")
p_p50 = med("zeusd", "power", "uds", 1, "p50_us") / med("nginx", "time", "uds", 1, "p50_us")
p_p50u = (med("zeusd", "power-unpinned", "uds", 1, "p50_us") /
          med("nginx", "time-unpinned", "uds", 1, "p50_us"))
rss = kib("rss_idle_kib")
idle_ms = int(fact["idle_sched_us"]) / 1000
print()
print("### Targets")
print()
print("| target | measured | |")
print("|---|---:|---|")
print(f"| /time over UDS, 50 conns: >= 0.8x nginx req/s | {t_rps:.2f}x "
      f"| {verdict(t_rps >= 0.8)} |")
print(f"| /gpu/get_power over UDS, 1 conn: p50 <= 1.5x nginx /time p50 "
      f"| {p_p50:.1f}x pinned, {p_p50u:.1f}x unpinned "
      f"| {verdict(p_p50 <= 1.5)} |")
print(f"| idle RSS with 8 GPUs <= 6 MiB | {rss:.1f} MiB "
      f"| {verdict(rss <= 6)} |")
gidle_ms = int(fact["idle_gpuonly_sched_us"]) / 1000
print(f"| no CPU time while idle (all groups; simulated RAPL keepalive) "
      f"| {idle_ms:.1f} ms, {fact['idle_wakeups']} wake-ups in {idle_s} s "
      f"| {verdict(int(fact['idle_wakeups']) == 0)} |")
print(f"| no CPU time while idle (`--enable gpu-control,gpu-read`) "
      f"| {gidle_ms:.1f} ms, {fact['idle_gpuonly_wakeups']} wake-ups "
      f"in {idle_s} s | {verdict(int(fact['idle_gpuonly_wakeups']) == 0)} |")

bad = [r for r in runs if int(r["non2xx"]) or int(r["transport_errors"])]
if bad:
    print()
    for r in bad:
        print(f"ERRORS: {r['label']} {r['transport']} c={r['conns']} "
              f"{r['method']} {r['target']}: non2xx={r['non2xx']} "
              f"transport_errors={r['transport_errors']}")
    sys.exit(1)
EOF
