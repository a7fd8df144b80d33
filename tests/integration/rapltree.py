"""A fake powercap RAPL tree for black-box tests of zeusd's /cpu/* routes.

RaplTree writes `intel-rapl:N` package zones (with an optional `dram`
subzone found by name, as on real machines) under a directory that the
daemon is pointed at with `--rapl-dir`. zeusd keeps `energy_uj` open and
re-reads it with pread, so counters are rewritten IN PLACE: fixed-width,
zero-padded values written over the old bytes of a descriptor opened
without O_TRUNC (see docs/rapl.md). A rename or truncation would be either
invisible to the daemon or a window where it reads an empty file.

Advancer is a background thread that moves counters at a known rate,
following the monotonic clock (not the nominal step). On a loaded machine
that thread can stall for tens of milliseconds, so tests do not compare
against the nominal rate: every write is logged with the times around it,
and power_bounds() says what a reader could have reported from what was
really written while its request was in flight.

ReadWatch sees the daemon's own reads of a counter file (inotify
IN_ACCESS), so a test can move a counter only once the daemon has read the
previous value, however late the daemon's threads run.
"""
import bisect
import ctypes
import os
import select
import struct
import threading
import time
from pathlib import Path

WIDTH = 20                      # digits of a counter value (u64 fits)
DEFAULT_MAX = 262143328850      # a common real max_energy_range_uj


def counter_bytes(value):
    return b"%0*d\n" % (WIDTH, value)


class RaplTree:
    """packages: {N: {"dram": bool, "max": int, "dram_max": int,
    "cpu": int, "dram_uj": int, "name": str}}; every key optional."""

    def __init__(self, root, packages):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.max = {}           # (N, zone) -> max_energy_range_uj
        self._fds = {}          # (N, zone) -> O_WRONLY fd on energy_uj
        for n, spec in packages.items():
            pkg = self.root / f"intel-rapl:{n}"
            self._zone(pkg, spec.get("name", f"package-{n}"), n, "cpu",
                       spec.get("cpu", 0), spec.get("max", DEFAULT_MAX))
            # A "core" subzone first, so DRAM is not simply the first one.
            self._zone(pkg / f"intel-rapl:{n}:0", "core", None, None, 0,
                       spec.get("max", DEFAULT_MAX))
            if spec.get("dram", False):
                self._zone(pkg / f"intel-rapl:{n}:1", "dram", n, "dram",
                           spec.get("dram_uj", 0),
                           spec.get("dram_max", DEFAULT_MAX))

    def _zone(self, d, name, n, zone, value, maximum):
        d.mkdir(parents=True, exist_ok=True)
        (d / "name").write_text(name + "\n")
        (d / "max_energy_range_uj").write_text(f"{maximum}\n")
        (d / "energy_uj").write_bytes(counter_bytes(value))
        if zone is not None:
            self.max[(n, zone)] = maximum

    def path(self, n, zone="cpu"):
        """The energy_uj file of package n's `zone` ("cpu" or "dram")."""
        pkg = self.root / f"intel-rapl:{n}"
        return pkg / "energy_uj" if zone == "cpu" else \
            pkg / f"intel-rapl:{n}:1" / "energy_uj"

    def set(self, n, cpu=None, dram=None):
        """Rewrites package n's counters in place (None leaves one alone)."""
        for zone, v in (("cpu", cpu), ("dram", dram)):
            if v is not None:
                assert 0 <= v <= self.max[(n, zone)], (n, zone, v)
                self.write_raw(n, zone, counter_bytes(v))

    def write_raw(self, n, zone, data):
        """Writes bytes over the start of a counter file, no truncation."""
        key = (n, zone)
        if key not in self._fds:
            self._fds[key] = os.open(self.path(n, zone), os.O_WRONLY)
        os.pwrite(self._fds[key], data, 0)

    def close(self):
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


class Advancer(threading.Thread):
    """Advances counters at fixed rates: rates = {(N, zone): watts}.

    Each step writes base + watts * elapsed (wrapped into 0..max), where
    elapsed is measured on the monotonic clock, but never more than a
    quarter of the range past the previous write: after a stall the counter
    catches up over a few steps instead of jumping over a whole wrap, which
    no reader could tell from a small step. log[(N, zone)] holds
    (ns before, ns after, unwrapped µJ) for every write, the initial value
    first."""

    def __init__(self, tree, rates, step_s=0.001):
        super().__init__(daemon=True)
        self.tree = tree
        self.rates = dict(rates)
        self.step_s = step_s
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self.base = {k: int(tree.path(*k).read_bytes()) for k in self.rates}
        self.max_step = {k: (tree.max[k] + 1) // 4 for k in self.rates}
        self.last = dict(self.base)
        for (n, zone), v in self.base.items():
            tree.set(n, **{zone: v})    # opens the fds in this thread
        # The initial values were in the files before anyone looked.
        self.log = {k: [(0, 0, v)] for k, v in self.base.items()}
        self.t0 = time.monotonic_ns()

    def run(self):
        while not self._halt.is_set():
            for (n, zone), watts in self.rates.items():
                key = (n, zone)
                # W = J/s = µJ/µs; elapsed ns * W / 1000 = µJ
                ideal = self.base[key] + \
                    (time.monotonic_ns() - self.t0) * watts // 1000
                uj = min(ideal, self.last[key] + self.max_step[key])
                before = time.monotonic_ns()
                self.tree.set(n, **{zone: uj % (self.tree.max[key] + 1)})
                after = time.monotonic_ns()
                self.last[key] = uj
                with self._lock:
                    self.log[key].append((before, after, uj))
            time.sleep(self.step_s)

    def power_bounds(self, key, t0_ns, t1_ns, period_ns):
        """(low, high) watts that a reader can report for `key` when it
        reads the counter twice within [t0_ns, t1_ns] (monotonic), at least
        period_ns apart, and divides the difference by its own gap between
        the reads' timestamps (period_ns .. t1_ns - t0_ns), as zeusd's
        /cpu/get_power does. Derived from the writes actually made, so a
        stalled writer or a slow request widens the bounds instead of
        failing the test; on an idle machine they are within a few % of
        the nominal rate."""
        with self._lock:
            log = list(self.log[key])
        began = [b for b, _, _ in log]
        ended = [a for _, a, _ in log]
        vals = [v for _, _, v in log]

        def most(t):        # the newest value any read at t could see
            return vals[bisect.bisect_right(began, t) - 1]

        def least(t):       # the oldest value a read at t could still see
            return vals[bisect.bisect_right(ended, t) - 1]

        span = t1_ns - t0_ns
        e_high = most(t1_ns) - least(t0_ns)
        # The first read at ta, the second at ta + period or later; the
        # smallest difference starts where `most` steps up (or at t0).
        starts = [t0_ns] + [b for b in began
                            if t0_ns <= b <= t1_ns - period_ns]
        e_low = min((least(ta + period_ns) - most(ta) for ta in starts),
                    default=0) if span >= period_ns else 0
        e_low = max(e_low, 0)
        # µJ per ns is kW
        return (e_low * 1000 / span, e_high * 1000 / period_ns)

    def stop(self):
        self._halt.set()
        self.join()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


_libc = ctypes.CDLL(None, use_errno=True)
_IN_ACCESS = 0x1
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC


class ReadWatch:
    """Counts reads of one file by anyone (inotify IN_ACCESS)."""

    def __init__(self, path):
        self.fd = _libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if _libc.inotify_add_watch(self.fd, str(path).encode(),
                                   _IN_ACCESS) < 0:
            os.close(self.fd)
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")

    def drain(self):
        """Reads the pending events; returns how many there were."""
        n = 0
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return n
            off = 0
            while off < len(buf):
                length = struct.unpack_from("iIII", buf, off)[3]
                off += 16 + length
                n += 1

    def wait_reads(self, count, timeout_s):
        """Waits for `count` more reads (events after the last drain)."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        while seen < count:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            select.select([self.fd], [], [], left)
            seen += self.drain()
        return True

    def read_after_write(self, write, timeout_s=30):
        """Calls write(), then waits until a read that began after it has
        finished. An event is sent when a read ends, so the first one
        after the drain may come from a read that began before the write;
        the reader (one thread, reading in turn) finishing a second read
        proves it."""
        write()
        self.drain()
        return self.wait_reads(2, timeout_s)

    def close(self):
        os.close(self.fd)
