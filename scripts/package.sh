#!/bin/sh
# `make package`: builds the Debian packages (debian/) from a copy of the
# tree in a temporary directory, so that dpkg-buildpackage's ../*.deb and
# debian/ build files never land in the checkout, runs lintian on them, and
# runs tests/integration/test_packaging.py against the result.
# Output: build-deb/*.deb, build-deb/lintian.txt, build-deb/build.log.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
out="$root/build-deb"
work=$(mktemp -d "${TMPDIR:-/tmp}/zeus-package.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
rm -rf "$out"
mkdir -p "$out"

# The tree as git would ship it, without build directories or git itself
# (dpkg-buildpackage must not need git).
version=$(dpkg-parsechangelog -S Version)
src="$work/zeus-$version"
mkdir -p "$src"
tar -C "$root" --exclude=./.git --exclude='./build*' --exclude=__pycache__ \
	--exclude=.pytest_cache --exclude=./tests/integration/.tmp -cf - . |
	tar -C "$src" -xf -

start=$(date +%s)
echo "== dpkg-buildpackage (log: build-deb/build.log)"
if ! (cd "$src" && dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1; then
	tail -40 "$out/build.log"
	exit 1
fi
echo "built in $(($(date +%s) - start)) s"
cp "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$out/"

echo "== lintian"
lintian --info --display-level '>=info' "$out"/*.changes >"$out/lintian.txt" 2>&1 ||
	true
cat "$out/lintian.txt"

echo "== package tests"
ZEUS_DEB_DIR="$out" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
	tests/integration/test_packaging.py
