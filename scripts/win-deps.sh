#!/bin/sh
# Cross toolchain and static Windows libraries for `make windows` (issue 31,
# docs/windows.md).
#
#   scripts/win-deps.sh [tools|libs|all|fetch|sources|prefix]  (default: all)
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
# fetch: only downloads (and checks) the tarballs into $ZEUS_WIN_CACHE/src.
# sources: prints the archives the tarballs are fetched from, best first.
# prefix: prints that folder.
#
# Where the tarballs come from: the machine's own apt sources, as apt reads
# them (`apt-get indextargets`: sources.list and sources.list.d, one-line
# .list and deb822 .sources, deb and deb-src entries alike), so a local
# mirror is used; no host is written here. Debian's main archive comes
# first (the entries whose Release file says Label: Debian, then those apt
# has no Release file for yet, unless their suite is a -security or
# -backports one), the rest (security, backports, other archives) after
# it; each is tried in turn for pool/main/<prefix>/<source>/<tarball>.
# ZEUS_DEBIAN_MIRROR, a base URI, replaces that list. The download is
# apt's own (apt-helper download-file, unprivileged as _apt when root), so
# apt's proxy settings (Acquire::http(s)::Proxy, Proxy-Auto-Detect), its
# auth.conf and its URI methods apply; the sha256 pinned below is checked
# whichever archive answered.
#
# Windows facilities instead of ported libraries: curl's TLS is Schannel.
# HMAC-SHA256 stays nettle for now (the same source as on Linux,
# src/access/auth.c); BCrypt is the better home on Windows and is named in
# docs/windows.md as not done yet.
set -eu

TRIPLE=x86_64-w64-mingw32
APT_HELPER=/usr/lib/apt/apt-helper

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

# The archives' base URIs, one a line, best first (see the top).
sources() {
	if [ -n "${ZEUS_DEBIAN_MIRROR:-}" ]; then
		echo "${ZEUS_DEBIAN_MIRROR%/}/"
		return 0
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "win-deps: no apt-get: the Debian archive is taken from apt's sources (or set ZEUS_DEBIAN_MIRROR)" >&2
		return 1
	fi
	# with release info: only entries apt has a Release file for, and
	# their Label; without: every entry, and its suite. ($(...) are
	# apt's fields, not the shell's.)
	# shellcheck disable=SC2016
	if ! labels=$(apt-get indextargets \
	        --format 'L $(REPO_URI) $(LABEL)' </dev/null) ||
	    ! suites=$(apt-get indextargets --no-release-info \
	        --format 'S $(REPO_URI) $(RELEASE)' </dev/null); then
		echo "win-deps: apt-get indextargets failed (apt's sources: above)" >&2
		return 1
	fi
	printf '%s\n%s\n' "$labels" "$suites" | awk '
	$1 == "L" {
		label = $0
		sub(/^L [^ ]* /, "", label)
		if (label == "Debian")
			debian[$2] = 1
		else if (label != "$(LABEL)")	# (that: apt knows no Label)
			other[$2] = 1
		next
	}
	$1 == "S" && NF >= 2 {
		if (!($2 in seen)) {
			seen[$2] = 1
			order[++n] = $2
		}
		if ($3 !~ /-(security|backports)/)
			plain[$2] = 1
	}
	END {
		for (i = 1; i <= n; i++) {
			u = order[i]
			if (u in debian)
				rank[i] = 0
			else if ((u in plain) && !(u in other))
				rank[i] = 1
			else
				rank[i] = 2
		}
		for (r = 0; r <= 2; r++)
			for (i = 1; i <= n; i++)
				if (rank[i] == r)
					print order[i]
	}'
}

# sources(), or a clear error when apt has none
archives() {
	list=$(sources) || exit 1
	if [ -z "$list" ]; then
		echo "win-deps: apt has no source to fetch Debian's source tarballs from: add the Debian archive (a deb or deb-src entry, or a local mirror of it) to /etc/apt/sources.list or /etc/apt/sources.list.d/, or set ZEUS_DEBIAN_MIRROR to one" >&2
		exit 1
	fi
	echo "$list"
}

fetch() { # tarball pool sha256
	mkdir -p "$SRC"
	f=$SRC/$1
	if [ -f "$f" ] && echo "$3  $f" | sha256sum -c --status; then
		return 0
	fi
	# once per run (the libraries are fetched in one subshell)
	if [ -z "${ARCHIVES:-}" ]; then
		ARCHIVES=$(archives) || exit 1
	fi
	if [ ! -x "$APT_HELPER" ]; then
		echo "win-deps: $APT_HELPER missing (Debian's apt package): it downloads with apt's settings" >&2
		exit 1
	fi
	tmp=$(mktemp -d "$SRC/.fetch.XXXXXX")
	# apt downloads as its sandbox user when run as root, if it can write
	# there (otherwise it warns and downloads as root)
	if [ "$(id -u)" -eq 0 ]; then
		sandbox=_apt
		eval "$(apt-config shell sandbox APT::Sandbox::User 2>/dev/null)" || :
		chown "$sandbox" "$tmp" 2>/dev/null || :
	fi
	set -f	# one URI a word, no globbing
	for base in $ARCHIVES; do
		url=${base%/}/pool/main/$2/$1
		echo "fetching $url" >&2
		if "$APT_HELPER" download-file "$url" "$tmp/$1" "SHA256:$3" \
		    </dev/null >"$tmp/log" 2>&1 && [ -f "$tmp/$1" ] &&
		    echo "$3  $tmp/$1" | sha256sum -c --status; then
			chown "$(id -u):$(id -g)" "$tmp/$1"
			mv "$tmp/$1" "$f"
			rm -rf "$tmp"
			set +f
			return 0
		fi
		# apt's reason (not found, hash mismatch, proxy refused, ...)
		grep '^E:' "$tmp/log" | grep -v '^E: Download Failed' |
		    sed 's/^/  /' >&2 || :
		rm -f "$tmp/$1"
	done
	set +f
	rm -rf "$tmp"
	echo "win-deps: could not fetch $1 (sha256 $3) from any of apt's sources (reasons above):" \
	    "$(echo "$ARCHIVES" | tr '\n' ' ')" >&2
	exit 1
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

fetchall() {
	echo "$PKGS" | while read -r name ver tarball pool sum; do
		[ -n "$name" ] || continue
		fetch "$tarball" "$pool" "$sum"
	done
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
fetch) fetchall ;;
sources) archives ;;
prefix) echo "$PREFIX" ;;
*) echo "usage: $0 [tools|libs|all|fetch|sources|prefix]" >&2; exit 2 ;;
esac
