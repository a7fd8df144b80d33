#!/bin/sh
# make_rapl_tree.sh - writes a fake powercap RAPL tree for tests and manual
# runs of `zeusd serve --rapl-dir DIR`, and optionally advances its counters.
#
#   sim/make_rapl_tree.sh DIR [PACKAGES] [MAX_UJ]
#       Creates DIR/intel-rapl:N (N = 0..PACKAGES-1, default 2), each with
#       name, energy_uj, max_energy_range_uj (default 262143328850) and a
#       "core" subzone intel-rapl:N:0; even N also get a "dram" subzone
#       intel-rapl:N:1. Counters start at 0.
#
#   sim/make_rapl_tree.sh --advance DIR CPU_W DRAM_W [PERIOD_MS]
#       Forever: every PERIOD_MS (default 100) adds CPU_W / DRAM_W times
#       the time elapsed (GNU date) to every package / DRAM counter,
#       wrapping at max_energy_range_uj as hardware does (0..max). The
#       average rate is exact; a window shorter than a few steps is not.
#
# Counters are rewritten in place, zero-padded to a fixed width and without
# truncation: zeusd keeps energy_uj open and re-reads it, so replacing a
# file by rename would not be seen, and truncate-then-write would let a read
# land on an empty file.
set -eu

usage() {
	sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

zone() {	# dir name energy max
	mkdir -p "$1"
	printf '%s\n' "$2" > "$1/name"
	printf '%s\n' "$3" > "$1/energy_uj"
	printf '%s\n' "$4" > "$1/max_energy_range_uj"
}

make_tree() {
	dir=$1 n=${2:-2} max=${3:-262143328850}
	mkdir -p "$dir"
	i=0
	while [ "$i" -lt "$n" ]; do
		p="$dir/intel-rapl:$i"
		zone "$p" "package-$i" 0 "$max"
		zone "$p/intel-rapl:$i:0" core 0 "$max"
		if [ $((i % 2)) -eq 0 ]; then
			zone "$p/intel-rapl:$i:1" dram 0 "$max"
		fi
		i=$((i + 1))
	done
}

bump() {	# zone-dir microjoules
	cur=$(cat "$1/energy_uj") max=$(cat "$1/max_energy_range_uj")
	cur=${cur#"${cur%%[!0]*}"}	# no leading zeros: $((...)) reads octal
	# Fixed width, written over the old bytes without truncating, so a
	# reader never sees an empty or half-written file (zeusd accepts
	# leading zeros).
	printf '%020d\n' $(((${cur:-0} + $2) % (max + 1))) 1<> "$1/energy_uj"
}

advance() {
	dir=$1 cpu_w=$2 dram_w=$3 ms=${4:-100}
	sec=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
	prev=$(date +%s%N)
	while :; do
		sleep "$sec"
		# Energy follows the clock (GNU date), not the nominal period,
		# so the average rate is exact however long a step took.
		now=$(date +%s%N)
		ns=$((now - prev)) prev=$now
		for p in "$dir"/intel-rapl:*; do
			case ${p##*/} in *:*:*) continue ;; esac
			bump "$p" $((cpu_w * ns / 1000))
			for s in "$p"/intel-rapl:*:*; do
				[ -d "$s" ] || continue
				[ "$(cat "$s/name")" = dram ] || continue
				bump "$s" $((dram_w * ns / 1000))
			done
		done
	done
}

[ $# -ge 1 ] || usage
case $1 in
--advance) [ $# -ge 4 ] || usage; shift; advance "$@" ;;
-h|--help) usage ;;
*) make_tree "$@" ;;
esac
