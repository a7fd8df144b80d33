"""Helpers for tests that drive the NVML simulator (docs/simulator.md).

SimLog reads the simulator's call log (ZEUS_SIM_LOG): one line per NVML
call, `<start_ns> <function> <gpu|-> [args...] rc=<CODE> end_ns=<end_ns>`,
with CLOCK_MONOTONIC timestamps, the same clock as time.monotonic_ns().
write_control() replaces the control file (ZEUS_SIM_CONTROL) the way the
simulator wants it changed: a new file renamed over the old one.
"""
import os
import time
from collections import namedtuple
from pathlib import Path

Call = namedtuple("Call", "start_ns fn gpu args rc end_ns")

# Every NVML function that changes a GPU's state.
WRITE_FNS = frozenset({
    "nvmlDeviceSetPowerManagementLimit", "nvmlDeviceSetPersistenceMode",
    "nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks",
    "nvmlDeviceSetMemoryLockedClocks", "nvmlDeviceResetMemoryLockedClocks",
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
