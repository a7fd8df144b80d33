#!/usr/bin/env bash
# nvidia.sh - the GPU acceptance run: zeusd against a real NVIDIA driver.
#
# Builds zeusd (and the raw-NVML probe tests/hw/nvml_bench.c), measures the
# raw NVML calls, starts zeusd on the driver's libnvidia-ml.so.1 over a
# private Unix socket, and runs tests/hw/check.py: every read, the writes
# that can be undone (power limit, persistence mode, locked clocks), each
# restored, and zeusd's get_power / get_cumulative_energy latency next to
# the raw call's. Prints a short report; exits 0 when nothing failed
# (operations a GPU or driver does not support are reported, not failed),
# 1 when something did, 2 on bad usage. docs/hardware.md says how to run it
# and what it leaves behind (nothing: limit and persistence as found,
# locked clocks reset).
#
# --nvml-library PATH points both at another NVML-ABI library, which is how
# tests/integration/test_hw_script.py runs this very script on the
# simulator.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build-hw
LIB=
NO_BUILD=0
ITER=1000
READ_ONLY=0
REPORT=

usage() {
	cat >&2 <<EOF
usage: $0 [--nvml-library PATH] [--build-dir DIR] [--no-build]
          [--iterations N] [--read-only] [--report FILE.json]
  --nvml-library PATH  NVML library to use (default: the driver's
                       libnvidia-ml.so.1)
  --build-dir DIR      meson build directory (default: build-hw)
  --no-build           use DIR as it is
  --iterations N       calls per latency measurement (default 1000)
  --read-only          no writes (no root needed)
  --report FILE.json   also write the results as JSON
EOF
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--nvml-library) [ $# -ge 2 ] || usage; LIB=$2; shift 2 ;;
	--build-dir) [ $# -ge 2 ] || usage; BUILD=$2; shift 2 ;;
	--no-build) NO_BUILD=1; shift ;;
	--iterations) [ $# -ge 2 ] || usage; ITER=$2; shift 2 ;;
	--read-only) READ_ONLY=1; shift ;;
	--report) [ $# -ge 2 ] || usage; REPORT=$2; shift 2 ;;
	-h|--help) usage ;;
	*) echo "nvidia.sh: unknown argument $1" >&2; usage ;;
	esac
done
case $ITER in
''|*[!0-9]*) echo "nvidia.sh: --iterations wants a number" >&2; exit 2 ;;
esac
if [ "$ITER" -lt 10 ] || [ "$ITER" -gt 100000 ]; then
	echo "nvidia.sh: --iterations must be 10..100000" >&2
	exit 2
fi
# zeusd refuses gpu-control without root, and NVML its writes.
if [ "$READ_ONLY" = 0 ] && [ "$(id -u)" != 0 ]; then
	echo "nvidia.sh: the writes need root: run as root, or pass" \
	    "--read-only" >&2
	exit 2
fi

if [ "$NO_BUILD" = 0 ]; then
	echo "== building zeusd in $BUILD" >&2
	if [ ! -f "$BUILD/build.ninja" ]; then
		meson setup "$BUILD" "$ROOT" -Dtests=false >&2
	fi
	ninja -C "$BUILD" zeusd hw_nvml_bench >&2
fi
for f in zeusd hw_nvml_bench; do
	if [ ! -x "$BUILD/$f" ]; then
		echo "nvidia.sh: $BUILD/$f missing (run without --no-build)" >&2
		exit 2
	fi
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/zeusd-hw.XXXXXX")
ZPID=
cleanup() {
	if [ -n "$ZPID" ] && kill -0 "$ZPID" 2>/dev/null; then
		kill -TERM "$ZPID" 2>/dev/null || true
		wait "$ZPID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

libargs=()
[ -n "$LIB" ] && libargs=(--nvml-library "$LIB")

echo "== raw NVML calls ($ITER each)" >&2
if ! "$BUILD/hw_nvml_bench" "${libargs[@]}" --iterations "$ITER" \
    >"$TMP/raw.json"; then
	echo "nvidia.sh: cannot use NVML (is the driver loaded?)" >&2
	exit 1
fi

groups=gpu-read,metrics
[ "$READ_ONLY" = 0 ] && groups=gpu-read,gpu-control,metrics
echo "== starting zeusd" >&2
ZEUSD_LOG=info "$BUILD/zeusd" serve --socket-path "$TMP/zeusd.sock" \
    --gpu-backend nvml "${libargs[@]}" --enable "$groups" \
    >"$TMP/zeusd.log" 2>&1 &
ZPID=$!
for _ in $(seq 100); do
	[ -S "$TMP/zeusd.sock" ] && break
	if ! kill -0 "$ZPID" 2>/dev/null; then
		echo "nvidia.sh: zeusd did not start:" >&2
		cat "$TMP/zeusd.log" >&2
		exit 1
	fi
	sleep 0.1
done
[ -S "$TMP/zeusd.sock" ] || { echo "nvidia.sh: no socket" >&2; exit 1; }

args=(--socket "$TMP/zeusd.sock" --raw "$TMP/raw.json"
    --zeusd-log "$TMP/zeusd.log" --iterations "$ITER"
    --library "${LIB:-libnvidia-ml.so.1}")
[ "$READ_ONLY" = 1 ] && args+=(--read-only)
[ -n "$REPORT" ] && args+=(--report "$REPORT")
rc=0
python3 "$ROOT/tests/hw/check.py" "${args[@]}" || rc=$?

kill -TERM "$ZPID"
if ! wait "$ZPID"; then
	echo "nvidia.sh: zeusd did not exit cleanly:" >&2
	tail -20 "$TMP/zeusd.log" >&2
	rc=1
fi
ZPID=
exit "$rc"
