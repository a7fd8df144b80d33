#!/bin/sh
# `make check`: builds, runs every test (cmocka unit tests, then the pytest
# black-box tests against the real binaries), then does it all again in an
# ASan+UBSan build, and the unit tests once more under valgrind.
# Ends with the line "N passed, M failed".
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
out="$root/build-reports"
rm -rf "$out"
mkdir -p "$out"
status=0

build() { # dir, extra meson args...
	dir=$1
	shift
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" "$@" >"$out/setup-$dir.log" 2>&1 ||
			{ cat "$out/setup-$dir.log"; return 1; }
	fi
	ninja -C "$dir" >"$out/ninja-$dir.log" 2>&1 ||
		{ cat "$out/ninja-$dir.log"; return 1; }
}

unit() { # dir, tag, [wrapper]
	dir=$1 tag=$2
	shift 2
	echo "== unit tests ($tag)"
	meson test -C "$dir" --suite unit --print-errorlogs --num-processes 2 \
		--logbase "unit-$tag" "$@" || status=1
	cp "$dir/meson-logs/unit-$tag.json" "$out/" 2>/dev/null
}

blackbox() { # dir, tag
	echo "== black-box tests ($2)"
	ZEUSD_BUILD="$root/$1" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
		--junitxml="$out/pytest-$2.xml" tests/integration || status=1
}

# The Linux black-box tests of the GPU API against zeusd.exe under wine
# (ZEUSD_WINE=1; docs/windows.md says what they cover and what they add to
# this run): the tests of Linux-only behaviour skip, with their reason.
# Once, with the plain build; its own JUnit file, counted by summarize.py.
WINE_TESTS="test_gpu test_streams test_auth test_metrics test_foundation
test_queues test_http_hardening test_overrides test_tcp_host"
blackbox_wine() {
	if [ ! -f build-win/zeusd.exe ] || ! command -v wine >/dev/null; then
		echo "== black-box tests (zeusd.exe under wine): no build-win/zeusd.exe or no wine"
		return
	fi
	echo "== black-box tests (zeusd.exe under wine)"
	t0=$(date +%s)
	files=$(for f in $WINE_TESTS; do printf 'tests/integration/%s.py ' "$f"; done)
	# shellcheck disable=SC2086 # one word a file
	ZEUSD_WINE=1 ZEUSD_BUILD="$root/build" /usr/bin/python3 -m pytest -q \
		-p no:cacheprovider --junitxml="$out/pytest-wine.xml" $files ||
		status=1
	echo "   $(($(date +%s) - t0)) s"
}

build build || exit 1

# The Windows build (docs/windows.md): mingw-w64, with static libraries
# cross-built once and cached ($ZEUS_WIN_CACHE, scripts/win-deps.sh); its
# tests (tests/integration/test_windows.py, under wine) run in the plain
# black-box run below. A failed cross build fails the check.
echo "== windows cross build"
t0=$(date +%s)
if ! { scripts/win-deps.sh >"$out/win-deps.log" 2>&1 &&
    make -s windows >"$out/ninja-build-win.log" 2>&1; }; then
	tail -n 40 "$out/win-deps.log" "$out/ninja-build-win.log"
	status=1
fi
echo "   $(($(date +%s) - t0)) s"

unit build plain
blackbox build plain
blackbox_wine
unit build valgrind --wrap="valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=99"

# the release build (make bench, packagers' -O3): only that it compiles,
# since -O3 finds uninitialised-use warnings that -O2 does not
echo "== release build"
build build-release --buildtype=release -Dtests=false || exit 1

build build-asan -Db_sanitize=address,undefined -Db_lundef=false || exit 1
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=86"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87"
unit build-asan asan
blackbox build-asan asan

/usr/bin/python3 scripts/summarize.py "$out" || status=1
exit $status
