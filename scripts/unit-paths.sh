#!/bin/sh
# Used by meson.build: writes a systemd unit (or defaults file) to stdout
# with its zeusd paths set to this build's. The sources name /usr/bin/zeusd
# and /etc/default/zeusd (a /usr install, the Debian package); a /usr/local
# install must run its own binary and read its own defaults file. @bindir@
# and @sysconfdir@ are replaced too. Only settings (Key=value lines) are
# rewritten, never comments.
# Usage: unit-paths.sh BINDIR SYSCONFDIR FILE
set -eu
[ $# -eq 3 ] || { echo "usage: $0 BINDIR SYSCONFDIR FILE" >&2; exit 2; }
exec sed -E \
	-e "s#@bindir@#$1#g" -e "s#@sysconfdir@#$2#g" \
	-e "/^[A-Za-z]+=/s#=([-@+!:]*)/usr/(local/)?bin/zeusd( |\$)#=\\1$1/zeusd\\3#" \
	-e "/^[A-Za-z]+=/s#=(-?)/etc/default/zeusd\$#=\\1$2/default/zeusd#" \
	"$3"
