"""The energy ledger continues across restarts (--gpu-leases --state-dir;
docs/operations.md, "What survives a restart"; issue 44): the per-user
totals of ended leases and the energy charged to nobody, as /metrics
shows them, go on from where they were after a crash (SIGKILL), a
planned restart (SIGUSR2) and a stop and start (SIGTERM), instead of
starting at 0 (a counter reset). The device process keeps the figures in
`ledger` in the state directory; a garbled, truncated or unsafe file is
refused with one line, set aside, and the ledger starts from 0.

Black-box: the real binary on the NVML simulator with its state in a file
(ZEUS_SIM_STATE), so the GPUs' energy counters go on while zeusd is down,
as real ones do.
"""
import hashlib
import os
import pwd
import signal
import time

import pytest

from conftest import WINE_RUN
from zeushelp import (Session, StateRig, boot_id, lease_series, leases,
                      wait_log, wait_until)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="needs root to act as other users"),
    pytest.mark.skipif(WINE_RUN, reason="--state-dir is Linux only"),
]

USERS = ("zeusledgerr-a",)


@pytest.fixture
def rig(start_public, users):
    return StateRig(start_public)


def counter_mj(d, gpu=0):
    r = d.get(f"/gpu/get_cumulative_energy?gpu_ids={gpu}")
    assert r.status_code == 200, r.text
    return r.json()[str(gpu)]["energy_mj"]


def one_lease(d, user, gpu=0):
    """A lease of `user` on `gpu` that runs a moment and is released."""
    a = Session(d, user)
    status, body = a("POST", f"/gpu/set_power_limit?gpu_ids={gpu}&"
                     "power_limit_mw=200000&block=true")
    assert status == 200, body
    time.sleep(0.3)
    assert a("POST", f"/gpu/release?gpu_ids={gpu}")[0] == 200
    a.close()
    assert wait_until(lambda: [r for r in leases(d)["ended"]
                               if r["gpu"] == gpu and r["user"] == user],
                      10), leases(d)


def user_line(path, user):
    """The user's line of the ledger file, or None."""
    uid = pwd.getpwnam(user).pw_uid
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return next((x for x in text.splitlines()
                 if x.startswith(f"user {uid} ")), None)





def ledger_text(boot, ngpu, users, unleased=0, base=None):
    """A ledger file as zeusd writes it (src/access/ledger_store.h):
    users: [(uid, name, mj on GPU 0)]."""
    body = f"zeusd-ledger 1\nboot {boot}\ngpus {ngpu}\n"
    for g in range(ngpu):
        b = "-" if base is None or g else str(base)
        body += f"gpu {g} {unleased if g == 0 else 0} {b}\n"
    for uid, name, mj in users:
        body += (f"user {uid} {name.encode().hex() or '-'} {mj}" +
                 " 0" * (ngpu - 1) + "\n")
    return body + f"sum {hashlib.sha256(body.encode()).hexdigest()}\n"


@pytest.mark.parametrize("how,audit", [("kill", True), ("kill", False),
                                       ("usr2", True), ("term", True)])
def test_the_ledger_continues(rig, users, how, audit):
    (alice,) = users
    d = rig.start(audit=audit)
    one_lease(d, alice)
    # on disk by the time the lease is over (its end is saved)
    assert wait_until(lambda: user_line(rig.ledger(), alice), 10), \
        rig.ledger().read_text() if rig.ledger().exists() else "no file"
    assert oct(rig.ledger().stat().st_mode & 0o777) == "0o600"
    lease_j, unleased_j = lease_series(d, alice)
    assert lease_j is not None and lease_j > 0, (lease_j, unleased_j)
    assert unleased_j is not None
    rc = rig.stop(how)
    assert rc == {"kill": -signal.SIGKILL, "usr2": 75, "term": 0}[how]
    d = rig.start(audit=audit)
    logs = d.logs()
    assert "event=ledger_taken_back users=1 boot=same" in logs, logs
    # not reset: where it was, or further
    lease2, unleased2 = lease_series(d, alice)
    assert lease2 is not None and lease2 >= lease_j, (lease_j, lease2)
    assert unleased2 is not None and unleased2 >= unleased_j, \
        (unleased_j, unleased2)
    # and it keeps counting into the same series
    one_lease(d, alice)
    lease3, unleased3 = lease_series(d, alice)
    assert lease3 > lease2 and unleased3 >= unleased2, (lease2, lease3)
    assert "level=error" not in d.logs(), d.logs()


def test_a_lease_open_across_a_crash_keeps_its_energy(rig, users):
    """A lease open while zeusd is down: the energy of that time is its
    own (from its start reading in the journal), not nobody's, and it
    lands in its user's total when it ends."""
    (alice,) = users
    d = rig.start()
    one_lease(d, alice)
    before, _ = lease_series(d, alice)
    a = Session(d, alice)
    assert a("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw="
             "210000&block=true")[0] == 200
    time.sleep(0.2)
    c0 = counter_mj(d)
    rig.stop("kill")
    time.sleep(0.5)
    d = rig.start()
    wait_log(d, "event=lease_journal_taken_back gpu=0")
    c1 = counter_mj(d)
    (open_lease,) = leases(d)["leases"]
    # it began before c0 and is read after c1: zeusd's downtime is in it
    assert round(open_lease["energy_j"] * 1000) >= c1 - c0 > 0, \
        (open_lease, c0, c1)
    a.close()       # the job ends: its lease too
    assert wait_until(lambda: [r for r in leases(d)["ended"]
                               if r["gpu"] == 0], 15), leases(d)
    (ended,) = [r for r in leases(d)["ended"] if r["gpu"] == 0]
    after, _ = lease_series(d, alice)
    # the lease's whole energy, the time zeusd was down included
    assert after >= before + ended["energy_j"] - 1e-3, (before, after,
                                                         ended)
    assert ended["energy_j"] >= open_lease["energy_j"], ended


@pytest.mark.parametrize("damage", ["garbled", "truncated", "unsafe"])
def test_a_bad_ledger_file_is_refused(rig, users, damage):
    (alice,) = users
    uid = pwd.getpwnam(alice).pw_uid
    rig.state.mkdir(mode=0o700)
    good = ledger_text(boot_id(), 1, [(uid, alice, 5_000_000)])
    if damage == "garbled":
        text = good.replace(" 5000000\n", " 5000001\n")
    elif damage == "truncated":
        text = good[:len(good) // 2]
    else:
        text = good
    rig.ledger().write_text(text)
    os.chmod(rig.ledger(), 0o644 if damage == "unsafe" else 0o600)
    d = rig.start()
    logs = d.logs()
    (line,) = [x for x in logs.splitlines() if "event=ledger_refused" in x]
    assert ("reason=unsafe" if damage == "unsafe" else
            "reason=garbled") in line, line
    assert "level=error" in line and "starts from 0" in line, line
    assert (rig.state / "ledger.refused").read_text() == text
    # zeusd serves, and the ledger starts from nothing
    assert lease_series(d, alice)[0] is None
    one_lease(d, alice)
    assert 0 < lease_series(d, alice)[0] < 5000, lease_series(d, alice)
    # a clean file replaces it
    assert wait_until(lambda: user_line(rig.ledger(), alice), 10)
    assert oct(rig.ledger().stat().st_mode & 0o777) == "0o600"


def test_a_file_from_another_boot_keeps_its_totals(rig, users):
    """GPU counters restart with the machine: the totals carry on, the
    counters' bases do not."""
    (alice,) = users
    uid = pwd.getpwnam(alice).pw_uid
    # the GPUs' counters run a while first
    rig.start()
    assert rig.stop("term") == 0
    time.sleep(1)
    other = "00000000-0000-4000-8000-000000000000"
    rig.ledger().write_text(ledger_text(other, 1, [(uid, alice, 5_000_000)],
                                        unleased=7_000_000, base=0))
    os.chmod(rig.ledger(), 0o600)
    d = rig.start()
    assert "event=ledger_taken_back users=1 boot=other" in d.logs()
    lease_j, unleased_j = lease_series(d, alice)
    assert lease_j == 5000.0
    # 7000 J, plus what the GPU used since this zeusd began: not its whole
    # counter since the base of 0 from before the reboot
    c0 = counter_mj(d)
    lease_j, unleased_j = lease_series(d, alice)
    assert 0 < c0 / 1000 - (unleased_j - 7000.0), (unleased_j, c0)
    assert 7000.0 <= unleased_j, unleased_j
    assert f"boot {boot_id()}\n" in rig.ledger().read_text()
