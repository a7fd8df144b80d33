"""Helpers for tests that drive the NVML and AMD SMI simulators
(docs/simulator.md).

SimLog reads the simulator's call log (ZEUS_SIM_LOG): one line per library
call, `<start_ns> <function> <gpu|-> [args...] rc=<CODE> end_ns=<end_ns>`,
with CLOCK_MONOTONIC timestamps, the same clock as time.monotonic_ns().
write_control() replaces the control file (ZEUS_SIM_CONTROL) the way the
simulator wants it changed: a new file renamed over the old one. PROFILES
are the simulated GPU models (ZEUS_SIM_PROFILE) with the facts tests check.
"""
import os
import time
from collections import namedtuple
from pathlib import Path

Call = namedtuple("Call", "start_ns fn gpu args rc end_ns")

# A simulated GPU model: limits in mW, clocks in MHz (sim/model.c).
Profile = namedtuple("Profile", "key name arch default_limit min_limit "
                     "max_limit gpu_clocks mem_clocks energy gpu_locked "
                     "mem_locked")

PROFILES = {p.key: p for p in (
    Profile("a100", "NVIDIA A100-SXM4-80GB", "ampere", 400_000, 100_000,
            400_000, (210, 1410), (405, 1593), True, True, True),
    Profile("v100", "Tesla V100-SXM2-32GB", "volta", 300_000, 150_000,
            300_000, (135, 1530), (877, 877), True, True, False),
    Profile("h100", "NVIDIA H100 80GB HBM3", "hopper", 700_000, 200_000,
            700_000, (345, 1980), (2619, 2619), True, True, True),
    Profile("h200", "NVIDIA H200", "hopper", 700_000, 200_000, 700_000,
            (345, 1980), (3201, 3201), True, True, True),
    Profile("rtx4090", "NVIDIA GeForce RTX 4090", "ada", 450_000, 150_000,
            600_000, (210, 3105), (405, 10501), True, True, True),
    Profile("p100", "Tesla P100-PCIE-16GB", "pascal", 250_000, 125_000,
            250_000, (545, 1325), (715, 715), False, False, False),
)}
# ZEUS_SIM_PROFILE=mixed
MIXED = ("v100", "a100", "h100", "rtx4090")

# Every NVML and AMD SMI function that changes a GPU's state (the AMD SMI
# simulator's call log has the same format).
WRITE_FNS = frozenset({
    "nvmlDeviceSetPowerManagementLimit", "nvmlDeviceSetPersistenceMode",
    "nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks",
    "nvmlDeviceSetMemoryLockedClocks", "nvmlDeviceResetMemoryLockedClocks",
    "amdsmi_set_power_cap", "amdsmi_set_gpu_clk_limit",
    "amdsmi_set_gpu_perf_level",
})


def parse_line(line):
    parts = line.split()
    if len(parts) < 5 or not parts[-2].startswith("rc=") or \
            not parts[-1].startswith("end_ns="):
        raise ValueError(f"malformed sim log line: {line!r}")
    return Call(start_ns=int(parts[0]), fn=parts[1],
                gpu=None if parts[2] == "-" else int(parts[2]),
                args=parts[3:-2], rc=parts[-2][3:],
                end_ns=int(parts[-1][7:]))


class SimLog:
    """The simulator's call log; mark() remembers a point to read from."""

    def __init__(self, path):
        self.path = Path(path)

    def _text(self):
        try:
            return self.path.read_text()
        except FileNotFoundError:
            return ""

    def mark(self):
        """An offset for calls(since=...): only calls logged after now."""
        return len(self._text())

    def calls(self, fn=None, gpu=None, since=0):
        """Calls (oldest first), optionally of one function / one GPU. A
        line still being written (no newline yet) is left out."""
        text = self._text()[since:]
        out = []
        for line in text.splitlines(keepends=True):
            if not line.endswith("\n"):
                break
            c = parse_line(line)
            if (fn is None or c.fn == fn) and (gpu is None or c.gpu == gpu):
                out.append(c)
        return out

    def writes(self, since=0):
        """Every state-changing call, as (fn, gpu, args) tuples."""
        return [(c.fn, c.gpu, c.args) for c in self.calls(since=since)
                if c.fn in WRITE_FNS]

    def wait_for(self, fn, gpu=None, since=0, count=1, timeout=5.0):
        """Waits until at least `count` matching calls are logged."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.calls(fn, gpu, since)
            if len(got) >= count or time.monotonic() > deadline:
                return got
            time.sleep(0.01)


def write_control(path, *rules):
    """Replaces the control file with these rule lines (none: no rules)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(r + "\n" for r in rules))
    os.replace(tmp, path)
