#!/bin/sh
# stream_bench.sh - SSE power-stream benchmark: zeusd against the minimal
# reference server (bench/sse_ref.c) in one run, same event, same rate.
#
#   bench/stream_bench.sh [BUILD_DIR]        (default: build)
#
# Scenarios (each server in turn, one at a time, same load generator):
#   a  1,000 subscribers, each on all 8 simulated GPUs, 20 Hz
#   b  10,000 subscribers, each on one GPU, 20 Hz
# Each is measured over DURATION seconds (default 30) after WARMUP (3):
# server CPU (% of one core, /proc/PID/stat utime+stime), RSS (both summed
# over zeusd's processes: `procs=`), events
# delivered vs expected, inter-event gaps (p50/p99/p99.9), dropped streams,
# and the events zeusd's readers skipped for not keeping up (its /metrics).
# Environment: DURATION, WARMUP, SCENARIOS ("a b"), CONNS_A, CONNS_B,
# SERVERS ("zeusd sse_ref"), ROUNDS (1: each server once per scenario).
# BASE=DIR also runs DIR/zeusd (a previous build) as server "base" next to
# zeusd in every round (taking turns at going first), and prints zeusd's CPU
# and events over base's for each round: the side-by-side check of a change.
# The load generator runs on the same machine and competes for its CPUs.
set -eu

BUILD=${1:-build}
DURATION=${DURATION:-30}
WARMUP=${WARMUP:-3}
SCENARIOS=${SCENARIOS:-"a b"}
CONNS_A=${CONNS_A:-1000}
CONNS_B=${CONNS_B:-10000}
SERVERS=${SERVERS:-"zeusd sse_ref"}
ROUNDS=${ROUNDS:-1}
BASE=${BASE:-}
HZ=20

for b in zeusd sse_ref sse_load libnvml-sim.so; do
	if [ ! -e "$BUILD/$b" ]; then
		echo "stream_bench: $BUILD/$b missing (ninja -C $BUILD;" \
		    "sse_ref and sse_load need -Dtests=true or -Dbench=true)" >&2
		exit 1
	fi
done
if [ -n "$BASE" ] && [ ! -x "$BASE/zeusd" ]; then
	echo "stream_bench: $BASE/zeusd missing" >&2
	exit 1
fi
need=$((CONNS_B + 64))
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt "$need" ]; then
	echo "stream_bench: hard RLIMIT_NOFILE $(ulimit -Hn) < $need;" \
	    "lower CONNS_B or raise the limit" >&2
	exit 1
fi
ulimit -Sn "$(ulimit -Hn)"

TMP=$(mktemp -d /tmp/stream_bench.XXXXXX)
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

wait_sock() {
	i=0
	while [ ! -S "$1" ] && [ $i -lt 600 ] && kill -0 "$PID" 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
	done
	if [ ! -S "$1" ]; then
		echo "stream_bench: server did not start:" >&2
		cat "$TMP/server.log" >&2
		exit 1
	fi
}

# run SERVER SCENARIO: starts the server, loads it, prints one row.
run() {
	server=$1 sc=$2
	sock=$TMP/$server.sock
	if [ "$sc" = a ]; then
		conns=$CONNS_A devs=8 path=/gpu/stream_power
	else
		conns=$CONNS_B devs=1 path='/gpu/stream_power?gpu_ids=0'
	fi
	if [ "$server" = zeusd ] || [ "$server" = base ]; then
		bin=$BUILD/zeusd
		[ "$server" = base ] && bin=$BASE/zeusd
		# the simulator next to the binary, so base runs its own
		ZEUSD_LOG=warn ZEUS_SIM_GPUS=8 ZEUSD_MAX_CONNS_PER_PEER=0 \
		    "$bin" serve --simulate \
		    --socket-path "$sock" --gpu-power-poll-hz $HZ \
		    >"$TMP/server.log" 2>&1 &
	else
		"$BUILD/sse_ref" --socket-path "$sock" --devices $devs --hz $HZ \
		    --memory-limit 12288 >"$TMP/server.log" 2>&1 &
	fi
	PID=$!
	wait_sock "$sock"
	# zeusd is three processes (privilege separation): the device
	# process ($PID), the network process and the janitor; CPU and RSS
	# are their sums. The children exist once the network one answers.
	pids="--pid $PID"
	if [ "$server" != sse_ref ]; then
		i=0
		until curl -sf --unix-socket "$sock" -o /dev/null \
		    http://zeusd/discover || [ $i -ge 100 ]; do
			sleep 0.05
			i=$((i + 1))
		done
		sleep 0.2
		for c in $(pgrep -P "$PID" || true); do
			pids="$pids --pid $c"
		done
	fi
	nprocs=$(echo "$pids" | wc -w)
	nprocs=$((nprocs / 2))
	# shellcheck disable=SC2086 # $pids: one --pid option per process
	res=$("$BUILD/sse_load" --socket "$sock" --path "$path" \
	    --conns "$conns" --devices $devs --hz $HZ --duration "$DURATION" \
	    --warmup "$WARMUP" $pids 2>"$TMP/load.err") || {
		cat "$TMP/load.err" "$TMP/server.log" >&2
		exit 1
	}
	up=$(sed -n 's/.*streams up in \([0-9.]*\) s.*/\1/p' "$TMP/load.err")
	# zeusd's own count of events its readers skipped (none for sse_ref,
	# nor for a build without the counter): "-"
	skipped=
	if [ "$server" != sse_ref ] && command -v curl >/dev/null; then
		skipped=$(curl -s --unix-socket "$sock" http://zeusd/metrics |
		    sed -n 's/^zeusd_stream_events_skipped_total{kind="gpu"} //p')
	fi
	kill "$PID"
	rc=0
	wait "$PID" 2>/dev/null || rc=$?
	PID=
	[ "$rc" = 0 ] || { echo "stream_bench: $server exited $rc" >&2; \
	    cat "$TMP/server.log" >&2; }
	rm -f "$sock"
	printf '%-2s %-8s %s up_s=%s skipped=%s procs=%s\n' "$sc" "$server" \
	    "$res" "${up:-?}" "${skipped:--}" "$nprocs"
	eval "last_$server=\$res"
}

# field NAME ROW: the value of NAME= in a result row.
field() {
	echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

# ratio NAME FORMAT: zeusd's NAME over base's, in the last round.
ratio() {
	awk -v a="$(field "$1" "$last_zeusd")" \
	    -v b="$(field "$1" "$last_base")" -v f="$2" \
	    'BEGIN { printf f, (b > 0 ? a / b : 0) }'
}

echo "# stream_bench: $(nproc) CPUs, ${DURATION}s windows, ${HZ} Hz," \
    "$(date -u +%Y-%m-%dT%H:%MZ)"
for sc in $SCENARIOS; do
	r=1
	while [ $r -le "$ROUNDS" ]; do
		for server in $SERVERS; do
			if [ "$server" != zeusd ] || [ -z "$BASE" ]; then
				run "$server" "$sc"
				continue
			fi
			# alternate who goes first: the machine drifts
			if [ $((r % 2)) = 1 ]; then
				run zeusd "$sc"
				run base "$sc"
			else
				run base "$sc"
				run zeusd "$sc"
			fi
			printf '%-2s ratio    zeusd/base cpu=%s events=%s\n' "$sc" \
			    "$(ratio cpu_pct %.3f)" "$(ratio events %.4f)"
		done
		r=$((r + 1))
	done
done
