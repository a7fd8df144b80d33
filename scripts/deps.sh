#!/bin/sh
# Installs the Debian packages a target needs, when they are missing.
# Usage: scripts/deps.sh build|test|package|bench
# As root it runs apt-get; otherwise it prints the exact command and fails.
set -eu

build_pkgs="gcc meson ninja-build pkg-config libmicrohttpd-dev libjansson-dev
nettle-dev libpcre2-dev libseccomp-dev libcurl4-openssl-dev libcmocka-dev
libssl-dev scdoc"
test_pkgs="python3 python3-pytest python3-httpx python3-jwt python3-cryptography
util-linux valgrind systemd
prometheus-pushgateway prometheus python3-prometheus-client bash-completion
man-db libslurm-dev slurmctld slurmd slurm-client munge"
package_pkgs="dpkg-dev debhelper fakeroot lintian"
bench_pkgs="nginx-light"

case "${1:-build}" in
build) want="$build_pkgs" ;;
test) want="$build_pkgs $test_pkgs" ;;
package) want="$build_pkgs $test_pkgs $package_pkgs" ;;
bench) want="$build_pkgs $test_pkgs $bench_pkgs" ;;
*) echo "usage: $0 build|test|package|bench" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
	if ! dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
	    grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

cmd="apt-get install -y --no-install-recommends$missing"
if [ "$(id -u)" -ne 0 ]; then
	echo "missing packages:$missing" >&2
	echo "run as root: apt-get update && $cmd" >&2
	exit 1
fi
echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
