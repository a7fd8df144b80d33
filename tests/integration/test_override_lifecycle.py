"""Black-box tests of what happens to override processes over the daemon's
life: SIGTERM kills a running override (SIGTERM, SIGKILL after the grace)
and zeusd still exits 0 promptly; descendants that escaped the command's
process group with setsid() are reparented to zeusd (a child subreaper),
killed and logged; nothing zeusd started survives it.

Processes are identified only by the pids the helper scripts write to
files, together with their start time (so a reused pid is never mistaken
for the original). Time bounds are generous multiples of the grace: the
machine may be loaded.
"""
import os
import signal
import threading
import time
from pathlib import Path

from zeushelp import wait_for



HELPERS = Path(__file__).resolve().parent / "helpers"
GRACE_S = 1.0                   # REAPER_GRACE_MS
SLACK_S = 10 * GRACE_S          # any "shortly after" on a loaded machine


def write_overrides(path, text):
    path.write_text(text)
    os.chmod(path, 0o644)       # the trust check refuses world-writable
    return path


def proc_stat(pid):
    """(state, ppid, session, starttime) of pid, or None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[3]), int(fields[19])


class Proc:
    """A process a helper recorded, pinned by its start time."""

    def __init__(self, pid):
        self.pid = int(pid)
        st = proc_stat(self.pid)
        assert st is not None, f"pid {self.pid} already gone"
        self.start = st[3]

    def alive(self):
        st = proc_stat(self.pid)
        return st is not None and st[3] == self.start and \
            st[0] not in ("Z", "X")

    def session(self):
        return proc_stat(self.pid)[2]


def read_pids(path, timeout=SLACK_S):
    """The pids a helper wrote to path (one line, once complete)."""
    def complete():
        try:
            return path.read_text().endswith("\n")
        except OSError:
            return False
    wait_for(complete, f"{path}", timeout)
    return [Proc(p) for p in path.read_text().split()]


class Blocked:
    """A block=true write in a background thread, with its own client."""

    def __init__(self, d, url):
        self.result = None
        self.client = d.make_client(timeout=120.0)
        self.thread = threading.Thread(target=self._run, args=(url,),
                                       daemon=True)
        self.thread.start()

    def _run(self, url):
        try:
            r = self.client.post(url)
            self.result = (r.status_code, r.text)
        except Exception as e:          # a closed connection is an answer
            self.result = ("error", repr(e))

    def join(self, timeout):
        self.thread.join(timeout)
        self.client.close()
        assert not self.thread.is_alive(), "the blocked client got nothing"
        return self.result


def sigterm_and_time(d, timeout=30):
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    rc = d.proc.wait(timeout)
    return rc, time.monotonic() - t0


def test_sigterm_kills_running_override(start, tmp_path, record_property):
    pidf = tmp_path / "ov.pid"
    ov = write_overrides(tmp_path / "ov.toml", f"""
[reset_mem_locked_clocks]
commands = ["{HELPERS}/pid-sleep {pidf} 60"]
""")
    d = start(args=["--gpu-command-overrides", str(ov)])
    b = Blocked(d, "/gpu/reset_mem_locked_clocks?gpu_ids=0&block=true")
    (cmd,) = read_pids(pidf)
    assert cmd.alive()
    rc, took = sigterm_and_time(d)
    record_property("shutdown_s", round(took, 3))
    print(f"shutdown with a sleeping override took {took:.3f} s")
    assert rc == 0, d.logs()
    assert took < SLACK_S, f"{took:.1f} s:\n{d.logs()}"
    assert not cmd.alive()
    status, text = b.join(SLACK_S)
    if status != "error":
        assert status == 500 and "signal 15" in text, text
    logs = d.logs()
    assert f"event=override_killed pid={cmd.pid} signal=TERM" in logs
    assert "event=shutdown_device_stuck" not in logs
    assert "event=stopped" in logs


def test_escaped_descendants_killed_after_override_exits(start, tmp_path):
    ov = write_overrides(tmp_path / "ov.toml", f"""
[reset_gpu_locked_clocks]
commands = ["{HELPERS}/escape {tmp_path} 300"]
""")
    d = start(args=["--gpu-command-overrides", str(ov)])
    # Answered only after the sweep: the pids are recorded before the
    # override exits, but may be gone already when the test reads them.
    r = d.post("/gpu/reset_gpu_locked_clocks?gpu_ids=0&block=true",
               timeout=60)
    assert r.status_code == 200, r.text
    logs_after = d.logs()
    for name in ("escapee", "orphan"):
        pid = int((tmp_path / f"{name}.pid").read_text())
        st = proc_stat(pid)
        assert st is None or st[0] in ("Z", "X") or st[1] != d.proc.pid, \
            f"{name} {pid} still a live child of zeusd: {st}"
        assert f"event=override_escapee_killed pid={pid} " in logs_after, \
            logs_after
        assert 'comm="sleep"' in logs_after


def test_escapee_killed_while_override_lingers(start, tmp_path):
    # The override is still running, its escapees live on; a sweep only
    # comes when it ends: here, when it exits 2 s later.
    ov = write_overrides(tmp_path / "ov.toml", f"""
[reset_gpu_locked_clocks]
commands = ["{HELPERS}/escape {tmp_path} 300 2"]
""")
    d = start(args=["--gpu-command-overrides", str(ov)])
    b = Blocked(d, "/gpu/reset_gpu_locked_clocks?gpu_ids=0&block=true")
    (escapee,) = read_pids(tmp_path / "escapee.pid")
    (orphan,) = read_pids(tmp_path / "orphan.pid")
    (cmd,) = read_pids(tmp_path / "override.pid")
    # they really left the command's session (and its process group)
    assert escapee.session() == escapee.pid != cmd.session()
    assert orphan.session() == orphan.pid
    status, text = b.join(2 + SLACK_S)
    assert status == 200, text
    wait_for(lambda: not escapee.alive() and not orphan.alive(),
             "the escapees to die", SLACK_S)
    logs = d.logs()
    for p in (escapee, orphan):
        assert f"event=override_escapee_killed pid={p.pid} " in logs, logs


def test_nothing_survives_shutdown(start, tmp_path, record_property):
    ov = write_overrides(tmp_path / "ov.toml", f"""
[reset_gpu_locked_clocks]
commands = ["{HELPERS}/escape {tmp_path} 300 300"]
""")
    d = start(args=["--gpu-command-overrides", str(ov)])
    b = Blocked(d, "/gpu/reset_gpu_locked_clocks?gpu_ids=0&block=true")
    procs = [read_pids(tmp_path / f"{n}.pid")[0]
             for n in ("override", "escapee", "orphan")]
    assert all(p.alive() for p in procs)
    rc, took = sigterm_and_time(d)
    record_property("shutdown_s", round(took, 3))
    print(f"shutdown with an override and two escapees took {took:.3f} s")
    assert rc == 0, d.logs()
    assert took < SLACK_S, f"{took:.1f} s:\n{d.logs()}"
    # by the time zeusd has exited, every one of them is gone
    survivors = [p.pid for p in procs if p.alive()]
    assert survivors == [], f"survived zeusd: {survivors}\n{d.logs()}"
    b.join(SLACK_S)
    logs = d.logs()
    assert f"event=override_killed pid={procs[0].pid} signal=TERM" in logs
    for p in procs[1:]:
        assert f"event=override_escapee_killed pid={p.pid} " in logs, logs


def test_term_ignoring_override_is_killed_after_grace(start, tmp_path):
    pidf = tmp_path / "ov.pid"
    ov = write_overrides(tmp_path / "ov.toml", f"""
[reset_mem_locked_clocks]
commands = ["{HELPERS}/ignore-term {pidf} 60"]
""")
    d = start(args=["--gpu-command-overrides", str(ov)])
    b = Blocked(d, "/gpu/reset_mem_locked_clocks?gpu_ids=0&block=true")
    procs = read_pids(pidf)
    assert len(procs) == 2 and all(p.alive() for p in procs)
    rc, took = sigterm_and_time(d)
    print(f"shutdown with a TERM-ignoring override took {took:.3f} s")
    assert rc == 0, d.logs()
    assert GRACE_S * 0.9 <= took < GRACE_S + SLACK_S, f"{took:.2f} s"
    assert [p.pid for p in procs if p.alive()] == []
    status, text = b.join(SLACK_S)
    if status != "error":
        assert status == 500 and "signal 9" in text, text
    logs = d.logs()
    sh = procs[0].pid
    assert f"event=override_killed pid={sh} signal=TERM" in logs
    assert f"event=override_killed pid={sh} signal=KILL" in logs


def test_sweep_spares_running_overrides(start, tmp_path):
    # GPU 1's override leaves escapees and ends while GPU 0's still runs:
    # the sweep then must not touch GPU 0's command (a registered child).
    pidf = tmp_path / "long.pid"
    ov = write_overrides(tmp_path / "ov.toml", f"""
[reset_gpu_locked_clocks]
commands = ["{HELPERS}/pid-sleep {pidf} 4"]
[reset_mem_locked_clocks]
commands = ["{HELPERS}/escape {tmp_path} 300"]
""")
    d = start(args=["--gpu-command-overrides", str(ov)])
    long = Blocked(d, "/gpu/reset_gpu_locked_clocks?gpu_ids=0&block=true")
    (cmd,) = read_pids(pidf)
    r = d.post("/gpu/reset_mem_locked_clocks?gpu_ids=1&block=true",
               timeout=60)
    assert r.status_code == 200, r.text
    assert "event=override_escapee_killed" in d.logs()
    assert cmd.alive(), "the sweep killed a running override"
    status, text = long.join(4 + SLACK_S)
    assert status == 200, text          # its exit status was not stolen
    assert f"override_escapee_killed pid={cmd.pid} " not in d.logs()


def test_no_new_override_starts_during_shutdown(start, tmp_path):
    # The first command exits 0 on SIGTERM, so the operation goes on to
    # the second one: that one must not start once shutdown has begun.
    pidf = tmp_path / "first.pid"
    second = tmp_path / "second.pid"
    ov = write_overrides(tmp_path / "ov.toml", f"""
[reset_mem_locked_clocks]
commands = [
  "sh -c \\"trap 'exit 0' TERM; echo $$ >{pidf}; sleep 60 & wait\\"",
  "{HELPERS}/pid-sleep {second} 60",
]
""")
    d = start(args=["--gpu-command-overrides", str(ov)])
    b = Blocked(d, "/gpu/reset_mem_locked_clocks?gpu_ids=0&block=true")
    read_pids(pidf)
    rc, _ = sigterm_and_time(d)
    assert rc == 0, d.logs()
    status, text = b.join(SLACK_S)
    assert not second.exists()
    if status != "error":
        assert status == 500 and "shutting down" in text, text
    assert "shutting down" in d.logs()
