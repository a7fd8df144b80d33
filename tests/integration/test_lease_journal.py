"""The lease journal (--state-dir; docs/operations.md, "What survives a
restart"): a lease written to disk before the write that changes the GPU,
taken back by the next zeusd. Black-box: the real binary on the NVML
simulator with its state in a file (ZEUS_SIM_STATE), so the GPUs keep
their settings while zeusd is dead, as real ones do; SIGKILL of the
device process is the crash (its network process and janitor follow).

What is checked: a job's cap holds across a crash and is restored when
the job ends; a holder gone while zeusd was down is restored at start;
a pid that now names another process is not taken for the holder; a
journal from another boot, garbled, truncated or not root's own is not
applied; a journal that cannot be written (or a full disk) refuses the
write that needs a record (503), never a restore; and
rounds of SIGKILL at random moments never leave a GPU changed without a
lease that will restore it.
"""
import hashlib
import os
import random
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import WINE_RUN, build_sanitizers
from test_audit_full_disk import fill, small_fs  # noqa: F401 (a fixture)
from simutil import write_control
from zeushelp import (Session, StateRig, as_user, audit_lines, boot_id,
                      leases, limit_mw, network_pid, wait_log, wait_until)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="needs root to act as other users"),
    pytest.mark.skipif(WINE_RUN, reason="--state-dir is Linux only"),
]

USERS = ("zeusjournal-a", "zeusjournal-b")


@pytest.fixture
def rig(start_public, users):
    return StateRig(start_public)


def start_ticks(pid):
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1]
               .split()[19])


def journal_text(gpu, uid, limit_mw, pids, boot=None, gpu_clocks=False):
    """A journal file as zeusd writes it (src/access/journal.h)."""
    body = (f"zeusd-lease 1\nboot {boot or boot_id()}\ngpu {gpu}\n"
            f"uid {uid}\nlimit_mw {limit_mw}\n")
    if gpu_clocks:
        body += "gpu_clocks 1\n"
    body += "".join(f"pid {p} {s}\n" for p, s in pids)
    return body + f"sum {hashlib.sha256(body.encode()).hexdigest()}\n"


def set_limit(s, gpu, mw):
    return s("POST", f"/gpu/set_power_limit?gpu_ids={gpu}&power_limit_mw="
             f"{mw}&block=true")


def test_a_jobs_cap_survives_a_crash_and_ends_with_the_job(rig, users):
    alice, bob = users
    d = rig.start()
    default = limit_mw(d)
    a = Session(d, alice)
    t0 = time.monotonic()
    # labelled, as zeus_spank.so labels a Slurm step's writes
    status, body = a("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw="
                     "200000&block=true", "X-Zeus-Lease-Label: slurm:42.0")
    took = time.monotonic() - t0
    assert status == 200, body
    # on disk before the write ran: the value to restore and the holder
    text = rig.journal().read_text()
    assert f"limit_mw {default}\n" in text, text
    assert f"pid {a.p.pid} {start_ticks(a.p.pid)}\n" in text, text
    assert oct(rig.journal().stat().st_mode & 0o777) == "0o600"
    b = Session(d, bob)
    refused = set_limit(b, 0, 250000)
    b.close()
    (before,) = d.get("/gpu/leases").json()["leases"]
    rig.crash()
    d = rig.start()
    wait_log(d, "event=lease_journal_taken_back gpu=0")
    assert limit_mw(d) == 200000            # the cap holds
    # another user is kept off the job's GPU, with the same answer
    b = Session(d, bob)
    status, body = set_limit(b, 0, 250000)
    assert (status, body) == refused and status == 409, (body, refused)
    assert alice in str(body), body
    b.close()
    assert limit_mw(d) == 200000
    # clients see the lease as before the crash: its holder, what it
    # changed, when it began, and its energy so far
    (after,) = d.get("/gpu/leases").json()["leases"]
    for k in ("gpu", "uid", "user", "cgroup", "label", "state",
              "settings"):
        assert after[k] == before[k], (k, before, after)
    # its start: the device process's, taken just before the write ran
    # (in ms), where the one before the crash was read just after it
    assert abs(after["start"] - before["start"]) <= took + 0.002, (
        before, after, took)
    assert after["energy"] == "ok" and after["energy_j"] > 0, after
    assert after["duration_s"] >= before["duration_s"], (before, after)
    # and its user's counter in /metrics runs from the lease's start
    metric = [x for x in d.get("/metrics").text.splitlines()
              if x.startswith("zeusd_gpu_lease_energy_joules_total{"
                              f'index="0",user="{alice}"}}')]
    assert len(metric) == 1 and float(metric[0].split()[-1]) > 0, metric
    time.sleep(0.2)
    # at least this long: from the write's answer (its start was read
    # while the write ran, at most `took` after t0) to the job's end. The
    # end is when the network process hears its restore is done, which
    # with the device process's own restore can come at once
    span = time.monotonic() - t0 - took
    a.close()                               # the job ends
    wait_until(lambda: limit_mw(d) == default, 15)
    wait_until(lambda: not rig.journal().exists(), 5)
    (line,) = [x for x in audit_lines(rig.audit, "set_power_limit")
               if x.get("reason") == "process_exit"]
    assert line["requested"] == {"power_limit_mw": default}
    assert line["identity"]["user"] == alice
    # the lease's end, once, over its whole span: from before the crash
    # (the journal's start) to the job's end; the ledger's line comes
    # after the restore that removed the record
    wait_until(lambda: audit_lines(rig.audit, "lease_end"), 5)
    (end,) = audit_lines(rig.audit, "lease_end")
    assert end["identity"]["user"] == alice, end
    assert end["reason"] == "process_exit" and end["energy"] == "ok", end
    assert end["settings_restored"] == "power_limit", end
    assert end["duration_s"] >= span, (end, span)
    assert end["energy_j"] > 0, end
    assert end["label"] == "slurm:42.0", end
    # the ended record a Slurm step's energy line is read from (by its
    # label: src/slurm/spank_report.c) spans the restart too
    (rec,) = d.get("/gpu/leases").json()["ended"]
    assert rec["label"] == "slurm:42.0" and rec["energy"] == "ok", rec
    assert rec["duration_s"] >= span and rec["start"] == after["start"], rec
    # and bob may now change it
    b = Session(d, bob)
    assert set_limit(b, 0, 250000)[0] == 200
    b.close()


def test_a_planned_restart_keeps_the_cap(rig, users):
    """systemctl restart, a package upgrade: SIGTERM (without
    --restore-on-shutdown), then a new zeusd. The job's cap is not
    dropped, and comes back when the job ends."""
    alice, _ = users
    d = rig.start()
    default = limit_mw(d, 2)
    a = Session(d, alice)
    assert set_limit(a, 2, 230000)[0] == 200
    assert d.stop() == 0                    # a clean stop
    rig.logs_before = d.logs()
    d = rig.start()
    wait_log(d, "event=lease_journal_taken_back gpu=2")
    assert limit_mw(d, 2) == 230000
    a.close()
    wait_until(lambda: limit_mw(d, 2) == default, 15)
    wait_until(lambda: not rig.journal(2).exists(), 5)
    # the stop handed the lease on: one lease_end, at the job's end
    wait_until(lambda: audit_lines(rig.audit, "lease_end"), 5)
    (end,) = audit_lines(rig.audit, "lease_end")
    assert end["reason"] == "process_exit" and not end.get("left"), end
    assert "event=gpu_lease_kept gpu=2" in rig.logs_before, rig.logs_before


def test_a_holder_gone_while_zeusd_was_down_is_restored_at_start(rig, users):
    alice, _ = users
    d = rig.start()
    default = limit_mw(d, 1)
    a = Session(d, alice)
    assert set_limit(a, 1, 210000)[0] == 200
    rig.crash()
    a.close()                               # exits while zeusd is down
    d = rig.start()
    # restored before the first request is answered
    assert limit_mw(d, 1) == default
    assert "event=lease_journal_restored gpu=1" in d.logs()
    assert not rig.journal(1).exists()
    (line,) = [x for x in audit_lines(rig.audit, "set_power_limit")
               if x.get("reason")]
    assert line["reason"] == "holder_gone_while_zeusd_was_down", line
    assert line["requested"] == {"power_limit_mw": default}
    (end,) = audit_lines(rig.audit, "lease_end")
    assert end["reason"] == "holder_gone_while_zeusd_was_down", end
    assert end["energy"] == "ok" and end["energy_j"] > 0, end


def test_the_device_process_restores_when_the_network_process_does_not(
        rig, users):
    """The holder's exit is seen by the device process itself (its own
    pidfds, src/access/pidwatch.c): the GPU is put back, and the journal
    follows, while the network process cannot ask (stopped here; a network
    process taken over or crashed alike). When it asks later, nothing
    waits: one restore, one lease_end."""
    alice, bob = users
    d = rig.start()
    default = limit_mw(d, 1)
    a = Session(d, alice)
    assert set_limit(a, 1, 205000)[0] == 200
    assert rig.journal(1).exists()
    net = network_pid(d)
    os.kill(net, signal.SIGSTOP)
    try:
        a.close()                           # the job ends
        wait_until(lambda: not rig.journal(1).exists(), 10)
        (line,) = [x for x in audit_lines(rig.audit, "set_power_limit")
                   if x.get("reason")]
        assert line["reason"] == "process_exit", line
        assert line["requested"] == {"power_limit_mw": default}, line
        assert line["result"] == "ok", line
        wait_log(d, "event=gpu_lease_restored_by_device gpu=1")
    finally:
        os.kill(net, signal.SIGCONT)
    assert limit_mw(d, 1) == default
    wait_until(lambda: audit_lines(rig.audit, "lease_end"), 5)
    (end,) = audit_lines(rig.audit, "lease_end")
    assert end["reason"] == "process_exit", end
    assert end["identity"]["user"] == alice, end
    assert len([x for x in audit_lines(rig.audit, "set_power_limit")
                if x.get("reason")]) == 1
    wait_until(lambda: not leases(d)["leases"], 5)
    b = Session(d, bob)
    assert set_limit(b, 1, 250000)[0] == 200
    b.close()


def test_the_device_process_retries_a_restore_that_failed(rig, users):
    """The device process's own restore fails in the driver while the
    network process cannot ask: the GPU stays refused, and the device
    process tries again after its backoff until the write goes through."""
    alice, _ = users
    ctl = rig.base / "sim.control"
    write_control(ctl)
    d = rig.start(env={"ZEUS_SIM_CONTROL": str(ctl)})
    default = limit_mw(d, 2)
    a = Session(d, alice)
    assert set_limit(a, 2, 215000)[0] == 200
    net = network_pid(d)
    write_control(ctl, "fail nvmlDeviceSetPowerManagementLimit 2 UNKNOWN")
    os.kill(net, signal.SIGSTOP)
    try:
        a.close()
        wait_log(d, "event=gpu_lease_restore_failed gpu=2")
        assert rig.journal(2).exists()      # still owed
        write_control(ctl)                  # the driver recovers
        wait_until(lambda: not rig.journal(2).exists(), 15)
        wait_log(d, "event=gpu_lease_restored_by_device gpu=2")
    finally:
        os.kill(net, signal.SIGCONT)
    assert limit_mw(d, 2) == default
    lines = [(x["result"], x["requested"]) for x in
             audit_lines(rig.audit, "set_power_limit") if x.get("reason")]
    assert lines[0] == ("error", {"power_limit_mw": default}), lines
    assert lines[-1] == ("ok", {"power_limit_mw": default}), lines


def test_a_reused_pid_is_not_taken_for_the_holder(rig, users):
    """The journal names a pid that now runs another user's process (its
    start time differs): the lease is restored, not kept for it."""
    alice, bob = users
    d = rig.start()
    default = limit_mw(d, 2)
    assert d.post("/gpu/set_power_limit?gpu_ids=2&power_limit_mw=220000"
                  "&block=true").status_code == 200
    assert d.stop() == 0
    other = subprocess.Popen(as_user(uid_of(bob)) + ["sleep", "60"])
    try:
        wait_until(lambda: Path(f"/proc/{other.pid}/stat").exists(), 5)
        time.sleep(0.1)     # setpriv has exec'd sleep
        rig.state.mkdir(mode=0o700, exist_ok=True)
        rig.journal(2).write_text(journal_text(
            2, uid_of(alice), default,
            [(other.pid, start_ticks(other.pid) + 1)]))
        os.chmod(rig.journal(2), 0o600)
        d = rig.start()
        assert limit_mw(d, 2) == default
        assert "event=lease_journal_restored gpu=2" in d.logs()
        assert "lease_journal_taken_back" not in d.logs()
    finally:
        other.kill()
        other.wait()


def test_a_restore_that_fails_at_start_is_audited_as_it_went(rig, users):
    """A lease of two settings whose holder is gone, the power limit's
    restore failing in the driver: that write is audited as an error, the
    clocks' reset as ok, and the GPU stays held for the retries."""
    alice, _ = users
    d = rig.start()
    default = limit_mw(d, 1)
    assert d.stop() == 0
    rig.state.mkdir(mode=0o700, exist_ok=True)
    rig.journal(1).write_text(journal_text(1, uid_of(alice), default, [],
                                           gpu_clocks=True))
    os.chmod(rig.journal(1), 0o600)
    d = rig.start(env={"ZEUS_SIM_FAULTS":
                       "fail nvmlDeviceSetPowerManagementLimit 1 UNKNOWN"})
    wait_log(d, "event=lease_journal_restore_failed gpu=1")
    lines = [x for x in audit_lines(rig.audit)
             if x.get("reason") == "holder_gone_while_zeusd_was_down"]
    assert [(x["operation"], x["result"]) for x in lines[:2]] == [
        ("set_power_limit", "error"), ("reset_gpu_locked_clocks", "ok")], \
        lines
    assert rig.journal(1).exists()


def uid_of(user):
    import pwd
    return pwd.getpwnam(user).pw_uid


@pytest.mark.parametrize("bad", ["other_boot", "garbled", "truncated",
                                 "unsafe", "sum"])
def test_a_bad_journal_is_not_applied(rig, users, bad):
    alice, _ = users
    d = rig.start()
    default = limit_mw(d, 3)
    assert d.post("/gpu/set_power_limit?gpu_ids=3&power_limit_mw=230000"
                  "&block=true").status_code == 200
    assert d.stop() == 0
    rig.state.mkdir(mode=0o700, exist_ok=True)
    text = journal_text(3, uid_of(alice), default, [])
    if bad == "other_boot":
        text = journal_text(3, uid_of(alice), default, [],
                            boot="00000000-0000-4000-8000-000000000000")
    elif bad == "garbled":
        text = text.replace("limit_mw", "limit_MW")
    elif bad == "truncated":
        text = text[:len(text) // 2]
    elif bad == "sum":
        text = text.replace(f"limit_mw {default}", "limit_mw 100000")
    rig.journal(3).write_text(text)
    os.chmod(rig.journal(3), 0o644 if bad == "unsafe" else 0o600)
    d = rig.start()
    reason = {"truncated": "garbled", "sum": "garbled"}.get(bad, bad)
    wait_log(d, f"event=lease_journal_refused gpu=3 reason={reason}")
    # never a GPU set from a record it could not trust
    assert limit_mw(d, 3) == 230000
    if bad == "other_boot":
        assert not rig.journal(3).exists()
    elif bad == "unsafe":
        assert rig.journal(3).exists()       # not touched
    else:
        assert not rig.journal(3).exists()
        assert (rig.state / "gpu-3.lease.refused").exists()
    # zeusd serves on, and the GPU is free
    a = Session(d, alice)
    assert set_limit(a, 3, 240000)[0] == 200
    a.close()


def test_an_unsafe_state_directory_stops_zeusd(start_public, users):
    state = start_public.base / "state"
    state.mkdir(mode=0o777)
    os.chmod(state, 0o777)
    d = start_public(["--gpu-leases", "--state-dir", str(state)],
                     ready=False)
    assert d.proc.wait(timeout=20) == 1
    assert "writable by nobody else" in d.logs()
    d.ready = False


def test_a_journal_that_cannot_be_written_refuses_the_write(rig, users):
    alice, _ = users
    d = rig.start()
    default = limit_mw(d)
    # the file the next save must create is taken by a directory
    (rig.state / "gpu-0.lease.tmp").mkdir()
    a = Session(d, alice)
    status, body = set_limit(a, 0, 200000)
    assert status == 503, body
    assert "lease journal" in str(body), body
    assert limit_mw(d) == default           # nothing ran
    (rig.state / "gpu-0.lease.tmp").rmdir()
    assert set_limit(a, 0, 200000)[0] == 200
    a.close()
    wait_until(lambda: limit_mw(d) == default, 15)


def test_a_full_disk_refuses_only_the_writes_that_need_a_record(
        small_fs, rig, users):
    """The state directory on a small tmpfs, filled to the last byte: a
    write that would start a lease is refused (503) and changes nothing;
    one the record on disk already covers runs; a restore is never
    refused (removing the record needs no room)."""
    alice, bob = users
    rig.state = small_fs / "state"
    d = rig.start()
    default1, default3 = limit_mw(d, 1), limit_mw(d, 3)
    a = Session(d, alice)
    assert set_limit(a, 3, 240000)[0] == 200     # on disk while there is room
    filler = fill(small_fs)
    b = Session(d, bob)
    status, body = set_limit(b, 1, 210000)       # a new lease: no room
    assert status == 503 and "lease journal" in str(body), body
    assert limit_mw(d, 1) == default1
    assert set_limit(a, 3, 250000)[0] == 200     # nothing new to record
    assert limit_mw(d, 3) == 250000
    a.close()                                    # the job ends: restored
    wait_until(lambda: limit_mw(d, 3) == default3, 15)
    wait_until(lambda: not rig.journal(3).exists(), 5)
    filler.unlink()
    assert set_limit(b, 1, 210000)[0] == 200     # room again
    b.close()
    wait_until(lambda: limit_mw(d, 1) == default1, 15)
    assert d.stop() == 0    # its state directory is unmounted next


def test_sigkill_at_random_moments_never_orphans_a_change(rig, users):
    """Rounds of two users' lease writes, zeusd SIGKILLed at a random
    moment of each; after each restart every GPU is at its default or
    held by a lease whose process lives (which restores it)."""
    rnd = random.Random(4242)
    d = rig.start()
    defaults = [limit_mw(d, g) for g in (0, 1)]
    # 25 rounds take about 50 s on two cores; under a sanitizer, where
    # every start is several times slower, 6 (the plain suite runs 25)
    rounds = 6 if build_sanitizers() else 25
    for n in range(rounds):
        sessions = [Session(d, u) for u in users]
        for i, s in enumerate(sessions):
            for _ in range(rnd.randint(0, 3)):
                set_limit(s, i, rnd.choice((200000, 210000, 220000)))
        time.sleep(rnd.random() * 0.05)
        rig.crash()
        # some holders end while zeusd is down
        alive = []
        for i, s in enumerate(sessions):
            if rnd.random() < 0.5:
                s.close()
            else:
                alive.append((i, s))
        d = rig.start()
        for g in (0, 1):
            held = any(i == g for i, _ in alive)
            if limit_mw(d, g) != defaults[g]:
                assert held and rig.journal(g).exists(), \
                    (n, g, limit_mw(d, g), d.logs()[-3000:])
        for _, s in alive:
            s.close()
        for g in (0, 1):
            wait_until(lambda g=g: limit_mw(d, g) == defaults[g], 15)
    assert not list(rig.state.glob("gpu-*.lease")), \
        list(rig.state.iterdir())


# The AMD SMI simulator's state file (sim/amdsmi_state.c): a 48-byte
# header, then a 64-byte record per GPU whose power cap (uint64, µW) is at
# byte 24.
AMD_HEADER, AMD_RECORD, AMD_CAP_AT = 48, 64, 24


def amd_cap_uw(path, gpu):
    data = Path(path).read_bytes()
    return struct.unpack_from("=Q", data, AMD_HEADER + AMD_RECORD * gpu +
                              AMD_CAP_AT)[0]


def test_an_amd_gpus_cap_survives_a_crash_and_ends_with_the_job(rig, users):
    """The journal and the ledger are the backend's, not NVML's: an AMD
    GPU's (ROCm's AMD SMI, simulated with its state in a file as the NVML
    one) lease holds across a SIGKILL and ends with its job, and its
    energy spans the restart."""
    alice, bob = users
    amd = ["--gpu-backend", "amdsmi"]
    d = rig.start(amd)
    default = limit_mw(d)
    assert amd_cap_uw(rig.gpus, 0) == default * 1000
    a = Session(d, alice)
    assert set_limit(a, 0, 400000)[0] == 200
    assert f"limit_mw {default}\n" in rig.journal().read_text()
    rig.crash()
    # while no zeusd runs: the GPU is at the job's cap
    assert amd_cap_uw(rig.gpus, 0) == 400_000_000
    d = rig.start(amd)
    wait_log(d, "event=lease_journal_taken_back gpu=0")
    assert limit_mw(d) == 400000
    b = Session(d, bob)
    status, body = set_limit(b, 0, 500000)
    assert status == 409 and alice in str(body), body
    b.close()
    (lease,) = d.get("/gpu/leases").json()["leases"]
    assert lease["user"] == alice and lease["energy"] == "ok", lease
    a.close()
    assert wait_until(lambda: limit_mw(d) == default, 15), d.logs()
    assert amd_cap_uw(rig.gpus, 0) == default * 1000
    assert wait_until(lambda: not rig.journal().exists(), 5)
    assert wait_until(lambda: audit_lines(rig.audit, "lease_end"), 5)
    (end,) = audit_lines(rig.audit, "lease_end")
    assert end["reason"] == "process_exit", end
    assert end["energy"] == "ok" and end["energy_j"] > 0, end
