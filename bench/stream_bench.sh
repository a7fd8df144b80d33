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
# server CPU (% of one core, /proc/PID/stat utime+stime), RSS, events
# delivered vs expected, inter-event gaps (p50/p99/p99.9), dropped streams.
# Environment: DURATION, WARMUP, SCENARIOS ("a b"), CONNS_A, CONNS_B.
# The load generator runs on the same machine and competes for its CPUs.
set -eu

BUILD=${1:-build}
DURATION=${DURATION:-30}
WARMUP=${WARMUP:-3}
SCENARIOS=${SCENARIOS:-"a b"}
CONNS_A=${CONNS_A:-1000}
CONNS_B=${CONNS_B:-10000}
HZ=20

for b in zeusd sse_ref sse_load libnvml-sim.so; do
	if [ ! -e "$BUILD/$b" ]; then
		echo "stream_bench: $BUILD/$b missing (ninja -C $BUILD)" >&2
		exit 1
	fi
done
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
	if [ "$server" = zeusd ]; then
		ZEUSD_LOG=warn ZEUS_SIM_GPUS=8 ZEUSD_MAX_CONNS_PER_PEER=0 \
		    "$BUILD/zeusd" serve --simulate \
		    --socket-path "$sock" --gpu-power-poll-hz $HZ \
		    >"$TMP/server.log" 2>&1 &
	else
		"$BUILD/sse_ref" --socket-path "$sock" --devices $devs --hz $HZ \
		    --memory-limit 12288 >"$TMP/server.log" 2>&1 &
	fi
	PID=$!
	wait_sock "$sock"
	res=$("$BUILD/sse_load" --socket "$sock" --path "$path" \
	    --conns "$conns" --devices $devs --hz $HZ --duration "$DURATION" \
	    --warmup "$WARMUP" --pid "$PID" 2>"$TMP/load.err") || {
		cat "$TMP/load.err" "$TMP/server.log" >&2
		exit 1
	}
	up=$(sed -n 's/.*streams up in \([0-9.]*\) s.*/\1/p' "$TMP/load.err")
	kill "$PID"
	rc=0
	wait "$PID" 2>/dev/null || rc=$?
	PID=
	[ "$rc" = 0 ] || { echo "stream_bench: $server exited $rc" >&2; \
	    cat "$TMP/server.log" >&2; }
	rm -f "$sock"
	printf '%-2s %-8s %s up_s=%s\n' "$sc" "$server" "$res" "${up:-?}"
}

echo "# stream_bench: $(nproc) CPUs, ${DURATION}s windows, ${HZ} Hz," \
    "$(date -u +%Y-%m-%dT%H:%MZ)"
for sc in $SCENARIOS; do
	run zeusd "$sc"
	run sse_ref "$sc"
done
