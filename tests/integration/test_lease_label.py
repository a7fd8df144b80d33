"""The lease label (X-Zeus-Lease-Label on a GPU write; docs/api.md,
docs/security.md "The energy ledger"): a client names the lease its
write takes or extends; the name is shown in GET /gpu/leases and in the
ledger's lease_end audit line, never in /metrics. Bounded (64 bytes) and
of a strict character set: anything else is 400 and nothing is written.
Black-box: the real zeusd on the NVML simulator, clients acting as a
real local user (made here with useradd), and the real `zeus measure
--lease-label`.
"""
import os

import pytest

from zeushelp import (Node, Session, WAIT, audit_lines, leases, limit_mw,
                      wait_for)

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="needs root to act as other users")

USERS = ("zeuslabel-a",)
HDR = "X-Zeus-Lease-Label"
SET200 = "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true"


def open_lease(d, gpu=0):
    (rec,) = [r for r in leases(d)["leases"] if r["gpu"] == gpu]
    return rec


def test_label_shown_in_leases_release_and_audit_not_metrics(start_public,
                                                             users):
    n = Node(start_public)
    (alice,) = users
    a = Session(n.d, alice)
    assert a("POST", SET200, f"{HDR}: slurm:42.0")[0] == 200
    assert open_lease(n.d)["label"] == "slurm:42.0"
    metrics = n.d.get("/metrics")
    assert metrics.status_code == 200
    # quoted: a simulated energy figure may well contain the digits 42.0
    assert '"42.0"' not in metrics.text and "slurm:" not in metrics.text
    status, body = a("POST", "/gpu/release?gpu_ids=0")
    a.close()
    assert status == 200, body
    (rec,) = body["released"]
    assert rec["label"] == "slurm:42.0"
    assert leases(n.d)["ended"][0]["label"] == "slurm:42.0"
    (line,) = [x for x in audit_lines(n.audit, "lease_end")
               if x["gpu"] == 0]
    assert line["label"] == "slurm:42.0" and line["identity"]["user"] == alice


def test_a_later_write_replaces_the_label_and_one_without_keeps_it(
        start_public, users):
    n = Node(start_public)
    (alice,) = users
    a = Session(n.d, alice)
    assert a("POST", SET200, f"{HDR}: first")[0] == 200
    assert a("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw="
             "210000&block=true", f"{HDR}: alice/run-2")[0] == 200
    assert open_lease(n.d)["label"] == "alice/run-2"
    assert a("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw="
             "220000&block=true")[0] == 200
    assert open_lease(n.d)["label"] == "alice/run-2"
    status, body = a("POST", "/gpu/release?gpu_ids=0")
    assert status == 200, body
    # a new lease starts without a label: the old one is not carried over
    assert a("POST", SET200)[0] == 200
    assert open_lease(n.d)["label"] is None
    a.close()
    wait_for(lambda: not leases(n.d)["leases"], "the lease did not end")
    ended = leases(n.d)["ended"]
    assert [r["label"] for r in ended[:2]] == [None, "alice/run-2"]
    assert "label" not in audit_lines(n.audit, "lease_end")[-1]


@pytest.mark.parametrize("value,why", [
    ("x" * 65, "at most 64 bytes"),
    ("job 42", "may only contain"),
    ('a"b', "may only contain"),
    ("a;b", "may only contain"),
    ("caf\u00e9", "may only contain"),
    ("", "may not be empty"),
])
def test_a_bad_label_is_400_and_nothing_is_written(start_public, users,
                                                   value, why):
    n = Node(start_public)
    (alice,) = users
    before = limit_mw(n.d)
    a = Session(n.d, alice)
    status, body = a("POST", SET200, f"{HDR}: {value}")
    a.close()
    assert status == 400, body
    assert HDR in body["error"] and why in body["error"], body
    assert limit_mw(n.d) == before
    assert leases(n.d)["leases"] == []


def test_the_longest_label_and_every_allowed_character_pass(start_public,
                                                            users):
    n = Node(start_public)
    (alice,) = users
    label = ("azAZ09._:@+/-" * 5)[:64]
    a = Session(n.d, alice)
    assert a("POST", SET200, f"{HDR}: {label}")[0] == 200
    assert open_lease(n.d)["label"] == label
    a.close()


def test_root_takes_no_lease_but_a_bad_label_is_still_refused(start_public):
    n = Node(start_public)
    r = n.d.post(SET200, headers={HDR: "root-job"})
    assert r.status_code == 200, r.text
    assert leases(n.d)["leases"] == []
    r = n.d.post(SET200, headers={HDR: "no spaces"})
    assert r.status_code == 400 and HDR in r.json()["error"]


def test_zeus_measure_lease_label(start_public, users):
    n = Node(start_public)
    (alice,) = users
    ran, go = n.scratch / "ran", n.scratch / "go"
    p = n.popen(alice, "--gpus", "0", "--cpus", "none", "--power-limit",
                "200", "--lease-label", "train:7", "--",
                "/usr/bin/python3", "-c", WAIT, str(ran), str(go))
    wait_for(ran.exists, "the command did not start")
    assert open_lease(n.d)["label"] == "train:7"
    go.touch()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    (line,) = [x for x in audit_lines(n.audit, "lease_end")
               if x["gpu"] == 0]
    assert line["label"] == "train:7"


def test_zeus_measure_refuses_a_bad_lease_label(start_public, users):
    n = Node(start_public)
    (alice,) = users
    r = n.run(alice, "--gpus", "0", "--power-limit", "200",
              "--lease-label", "bad label", "--", "/bin/true")
    assert r.returncode == 2, r.stderr
    assert "--lease-label" in r.stderr
    r = n.run(alice, "--gpus", "0", "--lease-label", "ok", "--", "/bin/true")
    assert r.returncode == 2 and "--power-limit" in r.stderr, r.stderr
