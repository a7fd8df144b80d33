"""Every route of zeusd's API, sent once each, with nothing but the standard
library (so it also runs as another user in a plain `python3` child:
`python3 routesweep.py SOCKET_PATH` or `python3 routesweep.py HOST:PORT`).

sweep() sends each route on a fresh connection, then GET /time, and raises
DaemonGone naming the route after which the daemon stopped answering. Both
streams are held open together for a moment (until their first bytes or
HOLD_S), then for as long again. A status is not
judged here: a disabled group's 404, a policy's 403 and a write's 200 are
all answers; a closed connection without one is not.
"""
import socket
import sys
import time

HOLD_S = 0.3     # a few sampling periods (GPUs 20 Hz, CPUs 10 Hz by default)

# every route of src/http/router.c, with parameters that make a write do
# something (GPU 0 of the simulator, values inside its ranges)
ROUTES = [
    ("GET", "/discover"),
    ("GET", "/time"),
    ("GET", "/auth/whoami"),
    ("POST", "/gpu/set_power_limit?gpu_ids=0&block=true"
             "&power_limit_mw=250000"),
    ("POST", "/gpu/set_persistence_mode?gpu_ids=0&block=true&enabled=true"),
    ("POST", "/gpu/set_gpu_locked_clocks?gpu_ids=0&block=true"
             "&min_clock_mhz=500&max_clock_mhz=1000"),
    ("POST", "/gpu/reset_gpu_locked_clocks?gpu_ids=0&block=true"),
    ("POST", "/gpu/set_mem_locked_clocks?gpu_ids=0&block=true"
             "&min_clock_mhz=500&max_clock_mhz=1000"),
    ("POST", "/gpu/reset_mem_locked_clocks?gpu_ids=0&block=true"),
    ("POST", "/gpu/reset_locked_clocks?gpu_ids=0&block=false"),
    ("GET", "/gpu/get_power"),
    ("GET", "/gpu/get_cumulative_energy"),
    ("GET", "/gpu/get_power_limit"),
    ("GET", "/gpu/get_power_limit_constraints"),
    ("GET", "/gpu/get_persistence_mode"),
    ("GET", "/gpu/leases"),
    ("GET", "/cpu/get_cumulative_energy?cpu=true&dram=true"),
    ("GET", "/cpu/get_power"),
    ("GET", "/metrics"),
    ("POST", "/gpu/release?gpu_ids=0"),
    ("POST", "/slurm/step_start?job=1&step=0&uid=0&gpu_ids=0"),
    ("POST", "/slurm/step_end?job=1&step=0"),
]
STREAMS = ["/gpu/stream_power", "/cpu/stream_power"]


class DaemonGone(AssertionError):
    pass


def connect(addr, timeout):
    """addr: a Unix socket path, or (host, port)."""
    if isinstance(addr, tuple):
        return socket.create_connection(addr, timeout)
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    try:
        s.connect(addr)
    except OSError:
        s.close()
        raise
    return s


def send(addr, method, target, timeout=10):
    """One request on a connection of its own; its status line's code."""
    with connect(addr, timeout) as s:
        s.sendall(f"{method} {target} HTTP/1.1\r\nHost: localhost\r\n"
                  "Content-Length: 0\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    if not data.startswith(b"HTTP/1.1 "):
        raise DaemonGone(f"{method} {target}: no answer ({data[:60]!r})")
    return int(data.split(b" ", 2)[1])


def open_stream(addr, path):
    """A stream request whose first bytes (an answer) were read, or
    whatever came within HOLD_S; the socket stays open."""
    s = connect(addr, 10)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    s.settimeout(HOLD_S)
    try:
        s.recv(4096)
    except socket.timeout:
        pass
    return s


def alive(addr, after):
    try:
        code = send(addr, "GET", "/time")
    except OSError as e:
        raise DaemonGone(f"after {after}: {e}") from None
    if code != 200:
        raise DaemonGone(f"after {after}: GET /time answered {code}")


def sweep(addr):
    """Every route, then both streams held open together; {target:
    status} of the routes."""
    statuses = {}
    for method, target in ROUTES:
        try:
            statuses[target] = send(addr, method, target)
        except OSError as e:
            raise DaemonGone(f"{method} {target}: {e}") from None
        alive(addr, f"{method} {target}")
    held = [open_stream(addr, p) for p in STREAMS]
    try:
        time.sleep(HOLD_S)
        alive(addr, "the streams")
    finally:
        for s in held:
            s.close()
    alive(addr, "the streams' close")
    return statuses


if __name__ == "__main__":
    where = sys.argv[1]
    if where.startswith("/"):
        sweep(where)
    else:
        host, _, port = where.rpartition(":")
        sweep((host, int(port)))
