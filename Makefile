# Thin front door; the real build is meson.build (one per folder).
#   make run    build and start zeusd on TCP 127.0.0.1:4938 (simulated
#               devices when this machine has no NVIDIA driver)
#   make check  every test: unit + black-box, then again under ASan+UBSan
#   make package  Debian packages in build-deb/ (from a copy of the tree),
#               lintian, and their tests (about a minute)
#   make windows  the Windows cross build in build-win/ (mingw-w64; the
#               static libraries it needs: scripts/win-deps.sh; docs/windows.md)
#   make bench  benchmarks (docs/performance.md): bench-http (against
#               nginx), bench-metrics (scrapes), bench-privsep (against
#               the build before), bench-streams (SSE, long),
#               bench-journal (the lease journal's cost; root);
#               alone: bench-lease-write BENCH_BEFORE=DIR (a lease
#               holder's writes against another build; root)
BUILD ?= build
ASAN ?= build-asan

.PHONY: all deps run check package windows bench bench-http bench-streams bench-metrics \
	bench-privsep bench-journal bench-lease-write clean fuzz

all: deps
	@[ -f $(BUILD)/build.ninja ] || meson setup $(BUILD) >/dev/null
	ninja -C $(BUILD)

deps:
	@scripts/deps.sh build

run: all
	@scripts/run.sh $(BUILD)

check:
	@scripts/deps.sh test
	@scripts/check.sh

package:
	@scripts/deps.sh package
	@scripts/package.sh

# scripts/win-deps.sh: the cross toolchain, wine, and the static libraries
# (cached in $ZEUS_WIN_CACHE, default /var/cache/zeus-win as root)
windows:
	@scripts/win-deps.sh >/dev/null
	@[ -f build-win/build.ninja ] || meson setup build-win \
	    --cross-file meson/cross-mingw64.ini \
	    --cross-file "$$(scripts/win-deps.sh prefix)/paths.ini" >/dev/null
	ninja -C build-win

bench: bench-http bench-metrics bench-privsep bench-streams bench-journal

bench-http:
	@scripts/deps.sh bench
	@bench/run.sh

# build-bench: a release build without the tests, with the benchmark
# programs (-Dbench=true: sse_ref, sse_load; also set on an older build-bench)
bench-metrics bench-streams: all
	@[ -f build-bench/build.ninja ] || meson setup build-bench -Dtests=false --buildtype=release >/dev/null
	@meson configure build-bench -Dbench=true >/dev/null
	@ninja -C build-bench >/dev/null
	@bench/$(subst streams,stream,$(@:bench-%=%))_bench.sh build-bench

# builds build-bench/ itself, as bench/run.sh does
bench-privsep:
	@scripts/deps.sh build
	@bench/privsep_bench.sh

# build/ (make all), as root: it acts as nobody
bench-journal: all
	@bench/journal_bench.sh

# build/ against BENCH_BEFORE=<another build dir>, as root
bench-lease-write: all
	@bench/lease_write_bench.sh

fuzz:
	@scripts/fuzz.sh

clean:
	rm -rf $(BUILD) $(ASAN) build-fuzz build-deb build-win
