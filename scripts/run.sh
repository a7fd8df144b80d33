#!/bin/sh
# `make run`: start zeusd in the foreground over TCP 127.0.0.1:4938.
# Without an NVIDIA driver on this machine it runs on the simulator
# (simulated GPUs and RAPL packages), which needs no root.
set -eu
build="${1:-build}"
addr=127.0.0.1:4938
set -- serve --mode tcp --tcp-bind-address "$addr"
if ! ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1'; then
	echo "no NVIDIA driver found: running on simulated devices (--simulate)"
	set -- "$@" --simulate
elif [ "$(id -u)" -ne 0 ]; then
	echo "not root: enabling only gpu-read (gpu-control and cpu-read need root)"
	set -- "$@" --enable gpu-read
fi
echo "try:  curl -s http://$addr/discover"
echo "      curl -s 'http://$addr/gpu/get_power'"
echo "stop with Ctrl-C"
exec "$build/zeusd" "$@"
