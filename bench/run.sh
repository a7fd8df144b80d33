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
# and the cost of info-level request logging. Ends with markdown tables and
# the verdicts on issue 34's targets (docs/performance.md, "HTTP requests"),
# printed by bench/run_report.py.
#
# zeusd's figures (CPU per request, RSS, idle CPU and wake-ups) are sums
# over all of its processes: the main pid (the device process) and its
# descendants (the network process, which answers /time and, in a split
# daemon, most reads alone, and the socket janitor), as
# bench/privsep_bench.sh does.
#
# Environment: BENCH_ROUNDS (3), BENCH_DURATION seconds per run (1.5),
# BENCH_IDLE_S (10), BENCH_BUILD (build-bench), BENCH_KEEP=1 keeps the
# temporary directory (raw results, logs).
# shellcheck disable=SC2086 # the z*p lists of pids are split on purpose
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

# procs PID: the pid and all its descendants (for zeusd: the device
# process, the network process and, with a socket file, the janitor).
procs() {
	local all=$1 todo=$1 p kids
	while [ -n "$todo" ]; do
		kids=
		for p in $todo; do
			kids="$kids $(cat /proc/"$p"/task/*/children 2>/dev/null || true)"
		done
		todo=$(echo "$kids" | xargs)
		if [ -n "$todo" ]; then all="$all $todo"; fi
	done
	echo "$all"
}

# The figures below are sums over the processes given.
# CPU ticks (utime+stime); field positions after the last ')'.
cpu_ticks() {
	local p
	for p in "$@"; do sed 's/.*) //' "/proc/$p/stat"; done |
	    awk '{ s += $12 + $13 } END { printf "%.0f\n", s }'
}
sum_status() {	# FIELD PIDS...: a kB field of /proc/PID/status
	local f=$1 p
	shift
	for p in "$@"; do awk -v f="$f:" '$1 == f { print $2 }' "/proc/$p/status"; done |
	    awk '{ s += $1 } END { printf "%.0f\n", s }'
}
rss_kib() { sum_status VmRSS "$@"; }
# Of that RSS: anonymous memory (the daemon's own) and the proportional
# set size (shared library pages divided among the processes mapping them).
anon_kib() { sum_status RssAnon "$@"; }
pss_kib() {
	local p
	for p in "$@"; do awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup"; done |
	    awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# Nanoseconds on CPU and voluntary context switches summed over all
# threads: finer than clock ticks, and the switches show who wakes up.
sched_ns() {
	local p
	for p in "$@"; do cat /proc/"$p"/task/*/schedstat; done |
	    awk '{ s += $1 } END { printf "%.0f\n", s }'
}
wakeups() {
	local p
	for p in "$@"; do cat /proc/"$p"/task/*/status; done |
	    awk '/^voluntary_ctxt_switches/ { s += $2 } END { printf "%.0f\n", s }'
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
# every process of each daemon, once it answers (the split is done by then)
zup=$(procs "$zu")
zgp=$(procs "$zg")
ztp=$(procs "$zt")
n_procs() { echo $#; }
{
	echo "procs_uds=$(n_procs $zup)"
	echo "procs_gpuonly=$(n_procs $zgp)"
	echo "procs_tcp=$(n_procs $ztp)"
} >>"$facts"

# --- idle: RSS after startup, CPU over idle_s seconds ----------------------------
sleep 1
{
	echo "rss_idle_kib=$(rss_kib $zup)"
	echo "anon_idle_kib=$(anon_kib $zup)"
	echo "pss_idle_kib=$(pss_kib $zup)"
} >>"$facts"
echo "rss_idle_gpuonly_kib=$(rss_kib $zgp)" >>"$facts"
echo "bench: measuring ${idle_s} s of idleness" >&2
t0u=$(cpu_ticks $zup); t0g=$(cpu_ticks $zgp)
n0u=$(sched_ns $zup); n0g=$(sched_ns $zgp)
w0u=$(wakeups $zup); w0g=$(wakeups $zgp)
sleep "$idle_s"
t1u=$(cpu_ticks $zup); t1g=$(cpu_ticks $zgp)
n1u=$(sched_ns $zup); n1g=$(sched_ns $zgp)
w1u=$(wakeups $zup); w1g=$(wakeups $zgp)
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

# run LABEL PIDS ADDR_FLAG ADDR CONNS METHOD PATH NAME [unpinned]
# PIDS: the server's processes, one word (space-separated); the load
# generator sums their CPU time, and pinning pins them all.
run() {
	local label=$1 spids=$2 af=$3 addr=$4 conns=$5 method=$6 path=$7 name=$8
	local pin=() line p P=()
	for p in $spids; do P+=(-P "$p"); done
	if [ "$conns" = 1 ] && [ "${9:-}" != unpinned ]; then
		for p in $spids; do
			taskset -a -p -c "$pin_cpu" "$p" >/dev/null
		done
		pin=(taskset -c "$pin_cpu")
	fi
	line=$("${pin[@]}" "$lg" "$af" "$addr" -c "$conns" -d "$dur" -w "$warm" \
	    -m "$method" -p "$path" "${P[@]}" -l "$label")
	if [ ${#pin[@]} -gt 0 ]; then
		for p in $spids; do
			taskset -a -p -c "$all_cpus" "$p" >/dev/null
		done
	fi
	echo "$line endpoint=$name" >>"$results"
}

# The info-level instance: same as zeusd-uds but logging every request.
zi=$(start_zeusd zeusd-info info --socket-path "$tmp/zeusd-info.sock")
pids+=("$zi")
wait_ready -u "$tmp/zeusd-info.sock"
zip_=$(procs "$zi")

endpoints="time power setpl energy"
for r in $(seq "$rounds"); do
	echo "bench: round $r of $rounds" >&2
	for tr in uds tcp; do
		if [ "$tr" = uds ]; then
			zaf=-u; zaddr=$tmp/zeusd.sock; zpid=$zup
			naf=-u; naddr=$tmp/nginx.sock
		else
			zaf=-t; zaddr=127.0.0.1:$tcp_z; zpid=$ztp
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
		run zeusd "$zup" -u "$tmp/zeusd.sock" 1 GET "$p" "$e-unpinned" unpinned
		run nginx "$ng" -u "$tmp/nginx.sock" 1 GET "$p" "$e-unpinned" unpinned
	done
	for c in 1 50; do
		run zeusd-info "$zip_" -u "$tmp/zeusd-info.sock" "$c" GET "$path_time" time
		run zeusd "$zup" -u "$tmp/zeusd.sock" "$c" GET "$path_time" time-paired
	done
done
{
	echo "rss_load_kib=$(rss_kib $zup)"
	echo "anon_load_kib=$(anon_kib $zup)"
	echo "rss_load_tcp_kib=$(rss_kib $ztp)"
	echo "rss_load_info_kib=$(rss_kib $zip_)"
} >>"$facts"

# --- report ----------------------------------------------------------------------------
if [ "${BENCH_KEEP:-0}" = 1 ]; then
	echo "bench: the summary again: bench/run_report.py $results $facts $rounds $dur" >&2
fi
python3 "$root/bench/run_report.py" "$results" "$facts" "$rounds" "$dur"
