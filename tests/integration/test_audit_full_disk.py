"""The audit log on a full file system (issue 30, item 6): black-box, the
real binary (split, so the network process's seccomp filter is in force)
writing its audit log on a small tmpfs that the test fills up.

A short write used to leave half a line, and the next line was glued to
it, while the GPU write went ahead. Now every line is whole or absent,
lost lines are counted on /metrics, and --audit-required refuses GPU
writes (503) while the log cannot be written.
"""
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import Zeusd
from simutil import SimLog
from zeushelp import audit_lines, metric

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="needs root to mount a tmpfs")

SET_PL = "nvmlDeviceSetPowerManagementLimit"
LIMIT = "/gpu/set_power_limit?block=true&gpu_ids=0&power_limit_mw={mw}"


@pytest.fixture
def small_fs():
    """A 64 KiB tmpfs; unmounted at the end."""
    d = Path(tempfile.mkdtemp(prefix="zeusd-fullfs-"))
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755",
                        "tmpfs", str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(d)
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    yield d
    subprocess.run(["umount", str(d)], check=False)
    os.rmdir(d)


def fill(fs):
    """Fills the file system to the last byte; returns the filler."""
    filler = fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (4096, 1):
            try:
                while True:
                    os.write(fd, b"x" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def start(tmp_path, fs, extra=()):
    sim = SimLog(tmp_path / "sim.log")
    d = Zeusd(tmp_path, "uds", ["--audit-log", str(fs / "audit.jsonl"),
                                *extra],
              env={"ZEUS_SIM_LOG": str(sim.path)}).wait_ready()
    return d, sim


def test_full_disk_keeps_every_audit_line_whole(tmp_path, small_fs):
    d, sim = start(tmp_path, small_fs)
    audit = small_fs / "audit.jsonl"
    try:
        assert d.post(LIMIT.format(mw=200000)).status_code == 200
        assert len(audit_lines(audit)) == 1
        filler = fill(small_fs)
        # enough lines (~250 bytes each) to cross the audit file's last
        # page: the old code wrote part of a line there
        for i in range(40):
            r = d.post(LIMIT.format(mw=150000 + 1000 * i))
            assert r.status_code == 200, r.text   # not --audit-required
        lines = audit_lines(audit)
        assert metric(d.get("/metrics").text,
                      "zeusd_audit_write_failures_total") > 0
        assert metric(d.get("/metrics").text, "zeusd_audit_writable") == 0
        assert 1 <= len(lines) < 41
        # room again: the next line is whole, nothing glued to the last
        filler.unlink()
        assert d.post(LIMIT.format(mw=222000)).status_code == 200
        lines = audit_lines(audit)
        assert lines[-1]["requested"] == {"power_limit_mw": 222000}
        assert lines[-1]["result"] == "ok"
        assert metric(d.get("/metrics").text, "zeusd_audit_writable") == 1
        assert "event=audit_write_failed" in d.logs()
    finally:
        assert d.stop() == 0, d.logs()


def test_audit_required_refuses_gpu_writes_on_full_disk(tmp_path, small_fs):
    d, sim = start(tmp_path, small_fs, ["--audit-required"])
    audit = small_fs / "audit.jsonl"
    try:
        assert d.post(LIMIT.format(mw=200000)).status_code == 200
        assert len(sim.wait_for(SET_PL)) == 1
        filler = fill(small_fs)
        mark = sim.mark()
        for block in ("true", "false"):
            r = d.post(LIMIT.format(mw=180000).replace(
                "block=true", f"block={block}"))
            assert r.status_code == 503, r.text
            assert "audit" in r.json()["error"], r.text
            assert "--audit-required" in r.json()["error"], r.text
        time.sleep(0.3)         # a queued write would have run by now
        assert sim.writes(since=mark) == [], "the GPU was changed"
        assert metric(d.get("/metrics").text,
                      "zeusd_audit_required_refusals_total") == 2
        assert metric(d.get("/metrics").text, "zeusd_audit_writable") == 0
        audit_lines(audit)      # whatever is there is whole
        # room again: writes go through, and are audited
        filler.unlink()
        r = d.post(LIMIT.format(mw=190000))
        assert r.status_code == 200, r.text
        assert sim.wait_for(SET_PL, since=mark)
        lines = audit_lines(audit)
        assert lines[-1]["requested"] == {"power_limit_mw": 190000}
        assert metric(d.get("/metrics").text, "zeusd_audit_writable") == 1
    finally:
        assert d.stop() == 0, d.logs()


def test_audit_required_needs_audit_log(tmp_path):
    from conftest import run_zeusd
    r = run_zeusd("serve", "--simulate", "--audit-required")
    assert r.returncode != 0
    assert "--audit-required needs --audit-log" in r.stderr
