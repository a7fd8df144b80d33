"""A fake powercap RAPL tree for black-box tests of zeusd's /cpu/* routes.

RaplTree writes `intel-rapl:N` package zones (with an optional `dram`
subzone found by name, as on real machines) under a directory that the
daemon is pointed at with `--rapl-dir`. zeusd keeps `energy_uj` open and
re-reads it with pread, so counters are rewritten IN PLACE: fixed-width,
zero-padded values written over the old bytes of a descriptor opened
without O_TRUNC (see docs/rapl.md). A rename or truncation would be either
invisible to the daemon or a window where it reads an empty file.

Advancer is a background thread that moves counters at a known rate,
following the monotonic clock (not the nominal step), so the average power
between any two instants is exact up to one step.
"""
import os
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
    elapsed is measured on the monotonic clock, so the counter lags the
    ideal line by at most one step (~1 ms)."""

    def __init__(self, tree, rates, step_s=0.001):
        super().__init__(daemon=True)
        self.tree = tree
        self.rates = dict(rates)
        self.step_s = step_s
        self._halt = threading.Event()
        self.base = {k: int(tree.path(*k).read_bytes()) for k in self.rates}
        for (n, zone), v in self.base.items():
            tree.set(n, **{zone: v})    # opens the fds in this thread
        self.t0 = time.monotonic_ns()

    def run(self):
        while not self._halt.is_set():
            now = time.monotonic_ns()
            for (n, zone), watts in self.rates.items():
                # W = J/s = µJ/µs; elapsed ns * W / 1000 = µJ
                uj = self.base[(n, zone)] + (now - self.t0) * watts // 1000
                self.tree.set(n, **{zone: uj % (self.tree.max[(n, zone)] + 1)})
            time.sleep(self.step_s)

    def stop(self):
        self._halt.set()
        self.join()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
