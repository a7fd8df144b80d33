#!/bin/sh
# Cross toolchain and static Windows libraries for `make windows` (issue 31,
# docs/windows.md).
#
#   scripts/win-deps.sh [tools|libs|all|prefix]     (default: all)
#
# tools: Debian's mingw-w64 cross compiler, wine (for the tests) and cmake
#        (jansson's build), through apt-get --no-install-recommends, when
#        missing (as root; otherwise it prints the command and fails, like
#        scripts/deps.sh).
# libs:  libmicrohttpd, jansson, nettle and pcre2 (zeusd's) and libcurl
#        (libzeus's), cross-built as static x86_64-w64-mingw32 libraries
#        from the upstream tarballs of Debian's own source packages (the
#        .orig tarballs its bookworm .dsc files name), pinned by version
#        and sha256 below, into
#
#          $ZEUS_WIN_CACHE/<triple>/{include,lib,lib/pkgconfig}
#
#        ZEUS_WIN_CACHE defaults to /var/cache/zeus-win (root) or
#        ~/.cache/zeus-win; CI keeps that folder between runs. The
#        tarballs are kept under $ZEUS_WIN_CACHE/src. A library whose stamp
#        (version + sha256 + this script's build flags) is already in the
#        cache is not rebuilt, so a warm run only checks stamps. Also
#        writes $PREFIX/paths.ini, the cross file naming the pkg-config
#        folder. Cold: about 5-10 min on 2 cores; warm: under a second.
# prefix: prints that folder.
#
# Windows facilities instead of ported libraries: curl's TLS is Schannel.
# HMAC-SHA256 stays nettle for now (the same source as on Linux,
# src/access/auth.c); BCrypt is the better home on Windows and is named in
# docs/windows.md as not done yet.
set -eu

TRIPLE=x86_64-w64-mingw32
MIRROR=${ZEUS_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# name version tarball pool-path sha256 (from the bookworm .dsc files:
# libmicrohttpd 0.9.75-6, jansson 2.14-2, nettle 3.8.1-2, pcre2 10.42-1,
# curl 7.88.1-10+deb12u15 for libzeus)
PKGS="
libmicrohttpd 0.9.75 libmicrohttpd_0.9.75.orig.tar.xz libm/libmicrohttpd 796e7e217a4802679fcac667a4e98501c53185dcf50ca0583870e84192620131
jansson 2.14 jansson_2.14.orig.tar.gz j/jansson c739578bf6b764aa0752db9a2fdadcfe921c78f1228c7ec0bb47fa804c55d17b
nettle 3.8.1 nettle_3.8.1.orig.tar.gz n/nettle 364f3e2b77cd7dcde83fd7c45219c834e54b0c75e428b6f894a23d12dd41cbfe
pcre2 10.42 pcre2_10.42.orig.tar.gz p/pcre2 c33b418e3b936ee3153de2c61cc638e7e4fe3156022a5c77d0711bcbb9d64f1f
curl 7.88.1 curl_7.88.1.orig.tar.gz c/curl cdb38b72e36bc5d33d5b8810f8018ece1baa29a8f215b4495e495ded82bbf3c7
"

if [ -z "${ZEUS_WIN_CACHE:-}" ]; then
	if [ "$(id -u)" -eq 0 ]; then
		ZEUS_WIN_CACHE=/var/cache/zeus-win
	else
		ZEUS_WIN_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/zeus-win
	fi
fi
PREFIX=$ZEUS_WIN_CACHE/$TRIPLE
SRC=$ZEUS_WIN_CACHE/src
JOBS=$(nproc 2>/dev/null || echo 2)

tools() {
	want="gcc-mingw-w64-x86-64 binutils-mingw-w64-x86-64 wine wine64 make cmake xz-utils curl ca-certificates"
	missing=""
	for p in $want; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
		    grep -q "install ok installed" || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages:$missing" >&2
		echo "run as root: apt-get update && apt-get install -y --no-install-recommends$missing" >&2
		exit 1
	fi
	echo "installing:$missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

fetch() { # tarball pool sha256
	mkdir -p "$SRC"
	f=$SRC/$1
	if [ ! -f "$f" ] || ! echo "$3  $f" | sha256sum -c --status; then
		echo "fetching $MIRROR/pool/main/$2/$1" >&2
		curl -fsSL -o "$f.part" "$MIRROR/pool/main/$2/$1"
		mv "$f.part" "$f"
	fi
	if ! echo "$3  $f" | sha256sum -c --status; then
		echo "win-deps: $1: sha256 mismatch (want $3)" >&2
		rm -f "$f"
		exit 1
	fi
}

# configure flags per library: static only, no docs/examples/tests, nothing
# the daemon does not use (no HTTPS in MHD: zeusd serves plain HTTP behind
# a proxy, as on Linux; no public-key nettle, so no GMP).
flags() {
	case $1 in
	libmicrohttpd) echo "--disable-https --disable-doc --disable-examples --disable-curl --disable-nls --without-gnutls --disable-tools" ;;
	jansson) echo "cmake -DJANSSON_BUILD_DOCS=OFF -DJANSSON_EXAMPLES=OFF -DJANSSON_WITHOUT_TESTS=ON -DJANSSON_BUILD_SHARED_LIBS=OFF" ;;
	nettle) echo "--disable-public-key --disable-openssl --disable-documentation --disable-assembler" ;;
	# libzeus's HTTP client: HTTP and HTTPS (Windows' own TLS, Schannel)
	# and nothing else
	curl) echo "--with-schannel --without-zlib --without-brotli --without-zstd --without-nghttp2 --without-libidn2 --without-libpsl --without-librtmp --without-libssh2 --disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet --disable-tftp --disable-pop3 --disable-imap --disable-smb --disable-smtp --disable-gopher --disable-mqtt --disable-manual --disable-docs CPPFLAGS=-DCURL_STATICLIB" ;;
	pcre2) echo "--disable-pcre2-16 --disable-pcre2-32 --disable-pcre2grep-libz --disable-pcre2grep-libbz2 --disable-jit CPPFLAGS=-DPCRE2_STATIC" ;;
	esac
}

build() { # name version tarball pool sha256
	stamp="$PREFIX/.stamp-$1"
	want="$2 $5 $(flags "$1")"
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
		return 0
	fi
	fetch "$3" "$4" "$5"
	work=$(mktemp -d "${TMPDIR:-/tmp}/zeus-win-$1.XXXXXX")
	tar -xf "$SRC/$3" -C "$work"
	dir=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
	echo "building $1 $2 for $TRIPLE" >&2
	# jansson's upstream tarball has no configure (Debian runs autoreconf);
	# it is built with its CMakeLists instead.
	case $(flags "$1") in
	cmake*)
		# shellcheck disable=SC2046
		(cd "$dir" && mkdir -p _b && cd _b &&
		    cmake .. -DCMAKE_SYSTEM_NAME=Windows \
		        -DCMAKE_C_COMPILER=$TRIPLE-gcc \
		        -DCMAKE_RC_COMPILER=$TRIPLE-windres \
		        -DCMAKE_BUILD_TYPE=Release \
		        -DCMAKE_INSTALL_PREFIX="$PREFIX" \
		        $(flags "$1" | cut -d' ' -f2-) >"$work/configure.log" 2>&1 &&
		    make -j"$JOBS" >"$work/make.log" 2>&1 &&
		    make install >"$work/install.log" 2>&1) ;;
	*)
		# shellcheck disable=SC2046
		(cd "$dir" &&
		    ./configure --host=$TRIPLE --prefix="$PREFIX" \
		        --enable-static --disable-shared $(flags "$1") \
		        CFLAGS="-O2" >"$work/configure.log" 2>&1 &&
		    make -j"$JOBS" >"$work/make.log" 2>&1 &&
		    make install >"$work/install.log" 2>&1) ;;
	esac || {
		echo "win-deps: building $1 failed; logs in $work" >&2
		exit 1
	}
	echo "$want" >"$stamp"
	rm -rf "$work"
}

libs() {
	command -v $TRIPLE-gcc >/dev/null || {
		echo "win-deps: $TRIPLE-gcc missing: run $0 tools" >&2
		exit 1
	}
	mkdir -p "$PREFIX"
	echo "$PKGS" | while read -r name ver tarball pool sum; do
		[ -n "$name" ] || continue
		build "$name" "$ver" "$tarball" "$pool" "$sum"
	done
	# the second cross file `make windows` gives meson
	printf "[properties]\npkg_config_libdir = '%s'\n" \
	    "$PREFIX/lib/pkgconfig" >"$PREFIX/paths.ini"
	echo "$PREFIX"
}

case "${1:-all}" in
tools) tools ;;
libs) libs ;;
all) tools; libs ;;
prefix) echo "$PREFIX" ;;
*) echo "usage: $0 [tools|libs|all|prefix]" >&2; exit 2 ;;
esac
