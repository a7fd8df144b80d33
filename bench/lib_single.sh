# shellcheck shell=bash
# bench/lib_single.sh - sourced by the benchmarks that run one zeusd at a
# time (pinned_ab.sh, ab_bench.sh, logrelay_bench.sh).
#
# bench_single_setup NAME ROOT: a temporary folder $tmp (/tmp/zeusd-NAME.*,
# mode 755 so that a socket below it passes zeusd's path check), removed on
# exit together with the daemon whose pid the script keeps in $pid, and the
# load generator (ROOT/bench/loadgen.c, `cc -O2`) built as $lg.

bench_single_cleanup() {
	if [ -n "${pid:-}" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}

bench_single_setup() {
	tmp=$(mktemp -d "/tmp/zeusd-$1.XXXXXX")
	chmod 755 "$tmp"
	pid=
	trap bench_single_cleanup EXIT
	lg=$tmp/loadgen
	cc -O2 -std=c17 -D_GNU_SOURCE -Wall -Wextra -o "$lg" \
	    "$2/bench/loadgen.c"
}
