#!/bin/bash
# stream_memory.sh - memory of each zeusd process with many streams open:
# the per-process breakdown behind stream_bench.sh's summed RSS.
#
#   bench/stream_memory.sh [BUILD_DIR] [-- ZEUSD_SERVE_ARGS...]
#
# Starts BUILD_DIR/zeusd serve --simulate (8 GPUs, 20 Hz) with the extra
# arguments (e.g. --gpu-leases), opens CONNS (10000) streams of one GPU
# each with BUILD_DIR/sse_load, waits until they are all up and SETTLE (8)
# seconds more, and prints VmRSS, Pss and Anonymous of every process of the
# daemon, then their sums. Needs the hard RLIMIT_NOFILE above CONNS + 64.
set -eu
BUILD=${1:-build}
[ $# -gt 0 ] && shift
[ "${1:-}" = -- ] && shift
CONNS=${CONNS:-10000}
SETTLE=${SETTLE:-8}
for b in zeusd sse_load; do
	[ -x "$BUILD/$b" ] || { echo "stream_memory: $BUILD/$b missing" \
	    "(-Dbench=true or -Dtests=true)" >&2; exit 1; }
done
ulimit -Sn "$(ulimit -Hn)"
tmp=$(mktemp -d)
pid= load=
cleanup() {
	[ -n "$load" ] && kill "$load" 2>/dev/null
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
ZEUSD_LOG=warn ZEUS_SIM_GPUS=8 ZEUSD_MAX_CONNS_PER_PEER=0 \
    "$BUILD/zeusd" serve --simulate --socket-path "$tmp/z.sock" \
    --gpu-power-poll-hz 20 "$@" >"$tmp/zeusd.log" 2>&1 &
pid=$!
for _ in $(seq 200); do [ -S "$tmp/z.sock" ] && break; sleep 0.05; done
"$BUILD/sse_load" --socket "$tmp/z.sock" \
    --path '/gpu/stream_power?gpu_ids=0' --conns "$CONNS" --devices 1 \
    --hz 20 --duration $((SETTLE + 10)) --warmup 1 >"$tmp/load.out" 2>&1 &
load=$!
for _ in $(seq 1200); do
	grep -q "streams up" "$tmp/load.out" && break
	kill -0 "$load" 2>/dev/null || { cat "$tmp/load.out" >&2; exit 1; }
	sleep 0.1
done
sleep "$SETTLE"
echo "# stream_memory: $CONNS streams, zeusd serve --simulate $*;" \
    "$(grep -o 'streams up in [0-9.]* s' "$tmp/load.out")"
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
rss=0 pss=0 anon=0
for p in $pid $(pgrep -P "$pid" || true); do
	r=$(awk '/^VmRSS:/{print $2}' "/proc/$p/status")
	s=$(awk '/^Pss:/{print $2}' "/proc/$p/smaps_rollup")
	a=$(awk '/^Anonymous:/{print $2}' "/proc/$p/smaps_rollup")
	echo "pid=$p rss_mib=$(mib "$r") pss_mib=$(mib "$s")" \
	    "anon_mib=$(mib "$a")"
	rss=$((rss + r)) pss=$((pss + s)) anon=$((anon + a))
done
echo "sum rss_mib=$(mib "$rss") pss_mib=$(mib "$pss") anon_mib=$(mib "$anon")"
