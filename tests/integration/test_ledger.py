"""The energy ledger (--gpu-leases; docs/security.md, "Shared nodes: the
energy ledger"): GPU energy charged to each lease and to nobody, GET
/gpu/leases, POST /gpu/release, the lease_end audit line and the per-user
counters of /metrics. Black-box: the real binary on the NVML simulator,
clients acting as two real local users (made here with useradd).

Energies are checked against the simulator's own counter read by root
around each step: a ledger figure must lie between the counter deltas of
the readings just inside and just outside the span it covers, which needs
no tolerance.
"""
import os
import signal
import time

import pytest

from simutil import SimLog
from zeushelp import Session, audit_lines, lease_series, leases, limit_mw

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="needs root to act as other users")

USERS = ("zeusledger-a", "zeusledger-b")


@pytest.fixture
def ledger(start_public, users):
    """start(extra_args=[], env={}) -> (zeusd, SimLog, audit path)."""
    base = start_public.base

    def _start(args=(), env=None):
        sim = SimLog(base / "sim.log")
        audit = base / "audit.jsonl"
        e = {"ZEUS_SIM_LOG": str(sim.path)}
        e.update(env or {})
        d = start_public(["--gpu-leases", "--audit-log", str(audit)] +
                         list(args), e)
        return d, sim, audit

    return _start


def counter_mj(d, gpu=0):
    r = d.get(f"/gpu/get_cumulative_energy?gpu_ids={gpu}")
    assert r.status_code == 200, r.text
    return r.json()[str(gpu)]["energy_mj"]


def ledger_total_mj(view, gpu=0):
    """Everything the ledger has charged on `gpu`, in mJ: open and ended
    leases (the ended ring holds every lease of these short tests) and
    the energy charged to nobody."""
    j = sum(r["energy_j"] or 0 for r in view["leases"] + view["ended"]
            if r["gpu"] == gpu)
    j += next(u["energy_j"] or 0 for u in view["unleased"] if u["gpu"] == gpu)
    return round(j * 1000)


def test_lease_energy_of_one_user_while_another_is_refused(ledger, users):
    d, _, audit = ledger()
    alice, bob = users
    default = limit_mw(d)
    c0 = counter_mj(d)
    a = Session(d, alice)
    assert a("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw="
             "200000&block=true")[0] == 200
    c1 = counter_mj(d)
    b = Session(d, bob)
    status, body = b("POST", "/gpu/set_power_limit?gpu_ids=0&"
                     "power_limit_mw=250000&block=true")
    assert status == 409 and alice in body["error"], body
    b.close()
    open_now = [r for r in leases(d)["leases"] if r["gpu"] == 0]
    assert len(open_now) == 1 and open_now[0]["user"] == alice
    assert open_now[0]["state"] == "held"
    assert open_now[0]["settings"] == ["power_limit"]
    assert open_now[0]["cgroup"], open_now[0]
    time.sleep(0.3)
    c2 = counter_mj(d)
    status, body = a("POST", "/gpu/release?gpu_ids=0")
    assert status == 200, body
    # restored before the answer
    assert limit_mw(d) == default
    c3 = counter_mj(d)
    a.close()
    (rec,) = body["released"]
    assert rec["user"] == alice and rec["state"] == "ended"
    assert rec["reason"] == "release" and rec["energy"] == "ok"
    lease_mj = round(rec["energy_j"] * 1000)
    # the lease's span lies between the inner and the outer readings
    assert c2 - c1 <= lease_mj <= c3 - c0, (c0, c1, c2, c3, lease_mj)
    assert rec["avg_w"] == pytest.approx(rec["energy_j"] / rec["duration_s"])
    assert leases(d)["ended"][0]["energy_j"] == rec["energy_j"]
    (line,) = [x for x in audit_lines(audit, "lease_end")
               if x["gpu"] == 0]
    assert line["identity"]["user"] == alice
    assert line["identity"]["cgroup"] == rec["cgroup"]
    assert line["energy_j"] == pytest.approx(rec["energy_j"])
    assert line["settings_restored"] == "power_limit"
    assert line["reason"] == "release"


def test_leased_and_unleased_add_up_to_the_counter(ledger, users):
    d, _, _ = ledger()
    alice, bob = users
    a0 = counter_mj(d)
    first = ledger_total_mj(leases(d))
    a1 = counter_mj(d)
    a = Session(d, alice)
    assert a("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw="
             "220000&block=true")[0] == 200
    time.sleep(0.2)
    assert a("POST", "/gpu/release?gpu_ids=0")[0] == 200
    a.close()
    time.sleep(0.2)
    b = Session(d, bob)       # an open lease at the second view
    assert b("POST", "/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz="
             "300&max_clock_mhz=900&block=true")[0] == 200
    time.sleep(0.2)
    b0 = counter_mj(d)
    second = ledger_total_mj(leases(d))
    b1 = counter_mj(d)
    b.close()
    grew = second - first
    assert b0 - a1 <= grew <= b1 - a0, (a0, a1, b0, b1, first, second)


def test_killed_holder_restores_and_closes_the_lease(ledger, users):
    d, _, audit = ledger()
    alice = users[0]
    default = limit_mw(d, 1)
    a = Session(d, alice)
    assert a("POST", "/gpu/set_power_limit?gpu_ids=1&power_limit_mw="
             "200000&block=true")[0] == 200
    time.sleep(0.2)
    a.p.send_signal(signal.SIGKILL)
    a.p.wait()
    deadline = time.monotonic() + 20
    while not [r for r in leases(d)["ended"] if r["gpu"] == 1]:
        assert time.monotonic() < deadline, leases(d)
        time.sleep(0.05)
    (rec,) = [r for r in leases(d)["ended"] if r["gpu"] == 1]
    assert rec["reason"] == "process_exit" and rec["user"] == alice
    assert rec["energy"] == "ok" and rec["energy_j"] > 0
    assert limit_mw(d, 1) == default
    assert [x for x in audit_lines(audit, "lease_end")
            if x["gpu"] == 1][0]["reason"] == "process_exit"


@pytest.mark.parametrize("restore", [False, True])
def test_shutdown_ends_open_leases_in_the_ledger(ledger, users, restore):
    """A lease still held when zeusd stops ends with it: one lease_end line
    with the energy so far, saying whether the settings were put back
    (--restore-on-shutdown) or left as the holder set them."""
    d, _, audit = ledger(["--restore-on-shutdown"] if restore else [])
    a = Session(d, users[0])
    assert a("POST", "/gpu/set_power_limit?gpu_ids=2&power_limit_mw="
             "200000&block=true")[0] == 200
    c0 = counter_mj(d, 2)
    time.sleep(0.2)
    c1 = counter_mj(d, 2)
    assert d.stop() == 0
    a.close()
    (line,) = [x for x in audit_lines(audit, "lease_end")
               if x["gpu"] == 2]
    assert line["reason"] == "shutdown" and line["energy"] == "ok"
    assert line["identity"]["user"] == users[0]
    if restore:
        assert line["settings_restored"] == "power_limit"
        assert "settings_left" not in line
    else:
        assert line["settings_left"] == "power_limit"
        assert "settings_restored" not in line
    # the lease spans at least the two readings taken while it was open
    assert round(line["energy_j"] * 1000) >= c1 - c0 > 0, (line, c0, c1)
    assert line["duration_s"] >= 0.2


def test_a_write_that_changed_nothing_leaves_no_lease(ledger, users):
    """A refused write (a power limit out of range) takes no lease: the
    other user is not kept out while the first one's process lives, and
    the ledger has nothing to charge."""
    d, _, audit = ledger()
    alice, bob = users
    a = Session(d, alice)
    status, body = a("POST", "/gpu/set_power_limit?gpu_ids=3&"
                     "power_limit_mw=5000000&block=true")
    assert status == 400, body
    assert not [r for r in leases(d)["leases"] if r["gpu"] == 3]
    b = Session(d, bob)
    status, body = b("POST", "/gpu/set_power_limit?gpu_ids=3&"
                     "power_limit_mw=250000&block=true")
    assert status == 200, body
    # now bob holds it, and alice is the one refused
    status, body = a("POST", "/gpu/set_power_limit?gpu_ids=3&"
                     "power_limit_mw=260000&block=true")
    assert status == 409 and bob in body["error"], body
    b.close()
    a.close()
    # the refused write took no lease at all: bob's is GPU 3's only one
    assert d.logs().count("event=gpu_lease_taken gpu=3 ") == 1, d.logs()
    ended = [x for x in audit_lines(audit, "lease_end")
             if x["gpu"] == 3]
    deadline = time.monotonic() + 20
    while not ended:
        assert time.monotonic() < deadline
        time.sleep(0.05)
        ended = [x for x in audit_lines(audit, "lease_end")
                 if x["gpu"] == 3]
    assert [x["identity"]["user"] for x in ended] == [bob], ended


def test_user_counters_never_go_back(ledger, users):
    d, _, _ = ledger()
    alice = users[0]
    seen = []
    for i in range(3):
        a = Session(d, alice)
        assert a("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw="
                 f"{200000 + i * 10000}&block=true")[0] == 200
        seen.append(lease_series(d, alice))      # open
        time.sleep(0.1)
        assert a("POST", "/gpu/release?gpu_ids=0")[0] == 200
        a.close()
        seen.append(lease_series(d, alice))      # ended
        if i == 1:
            d.proc.send_signal(signal.SIGHUP)
            time.sleep(0.2)
            seen.append(lease_series(d, alice))
    leased = [s[0] for s in seen]
    unleased = [s[1] for s in seen]
    assert None not in leased and None not in unleased, seen
    assert leased == sorted(leased) and unleased == sorted(unleased), seen
    assert leased[-1] > leased[0]


def test_an_idle_daemon_with_a_lease_open_reads_nothing(ledger, users):
    d, sim, _ = ledger()
    a = Session(d, users[0])
    assert a("POST", "/gpu/set_power_limit?gpu_ids=2&power_limit_mw="
             "200000&block=true")[0] == 200
    time.sleep(0.2)
    mark = sim.mark()
    time.sleep(1.5)
    calls = [c for c in sim.calls(since=mark) if c.gpu is not None]
    assert calls == [], calls
    a.close()


def test_gpu_without_a_counter_says_unavailable(ledger, users):
    d, _, audit = ledger(env={"ZEUS_SIM_PROFILE": "p100"})
    a = Session(d, users[0])
    assert a("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw="
             "200000&block=true")[0] == 200
    status, body = a("POST", "/gpu/release?gpu_ids=0")
    a.close()
    assert status == 200, body
    (rec,) = body["released"]
    assert rec["energy"] == "unavailable" and rec["energy_j"] is None
    assert rec["avg_w"] is None
    assert audit_lines(audit, "lease_end")[0]["energy"] == "unavailable"
    assert all(u["energy_j"] is None for u in leases(d)["unleased"])


def test_release_is_the_holders_or_roots(ledger, users):
    d, _, _ = ledger()
    alice, bob = users
    a = Session(d, alice)
    assert a("POST", "/gpu/set_power_limit?gpu_ids=3&power_limit_mw="
             "200000&block=true")[0] == 200
    b = Session(d, bob)
    status, body = b("POST", "/gpu/release?gpu_ids=3")
    assert status == 409 and alice in body["error"], body
    status, body = b("POST", "/gpu/release?gpu_ids=1")
    assert status == 200 and body == {"released": [], "not_leased": [1]}
    b.close()
    r = d.post("/gpu/release?gpu_ids=3")       # root
    assert r.status_code == 200, r.text
    assert [x["user"] for x in r.json()["released"]] == [alice]
    a.close()


def test_without_leases_the_ledger_endpoints_say_so(start):
    d = start()
    r = d.get("/gpu/leases")
    assert r.status_code == 404 and "--gpu-leases" in r.json()["error"]
    r = d.post("/gpu/release?gpu_ids=0")
    assert r.status_code == 404
