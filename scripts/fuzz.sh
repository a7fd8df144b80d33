#!/bin/sh
# `make fuzz`: builds every libFuzzer target with clang (ASan+UBSan) and runs
# each for FUZZ_SECONDS (default 30) on its own corpus under build-fuzz/.
set -eu
cd "$(dirname "$0")/.."
secs="${FUZZ_SECONDS:-30}"
command -v clang >/dev/null || { echo "needs clang (apt-get install clang)" >&2; exit 1; }
# b_lundef=false: the sanitizer runtime is only linked into executables, so
# the instrumented shared libzeus has undefined __asan_* symbols until then.
[ -f build-fuzz/build.ninja ] ||
	CC=clang meson setup build-fuzz -Dfuzz=true -Dtests=false \
	    -Db_lundef=false >/dev/null
ninja -C build-fuzz
for f in build-fuzz/fuzz/fuzz_*; do
	[ -x "$f" ] && [ -f "$f" ] || continue
	name=$(basename "$f")
	mkdir -p "build-fuzz/corpus/$name"
	echo "== $name (${secs}s)"
	"$f" -max_total_time="$secs" -print_final_stats=0 "build-fuzz/corpus/$name" 2>&1 | tail -1
done
