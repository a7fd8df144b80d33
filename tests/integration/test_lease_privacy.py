"""Who sees what of another user's lease (issue 42, item 4d; docs/api.md,
"The lease record"): anyone with gpu-read on a GPU sees in GET /gpu/leases
that it is leased, by which user, since when, with what energy and which
settings; the holder's process (pid), its cgroup and the lease's label are
shown to root and to the holder only. Black-box: the real binary on the
NVML simulator, clients running as the system users nobody (the holder)
and daemon (uid 1, another user) over a socket both may reach.
"""
import os

import pytest

from zeushelp import Session, leases


pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="needs root to act as other users")

HOLDER, OTHER = "nobody", "daemon"
LABEL = "secret-job:7"
SET = ("/gpu/set_power_limit?gpu_ids=1&power_limit_mw=200000&block=true",
       f"X-Zeus-Lease-Label: {LABEL}")
# what everyone with gpu-read sees of a lease as root does (the energy
# so far and the duration move between two reads)
SAME = ("gpu", "uid", "user", "state", "start", "end", "energy", "settings")


def on_gpu(view, key, gpu=1):
    return [r for r in view[key] if r["gpu"] == gpu]


def test_other_users_see_who_holds_a_lease_not_its_details(start_public):
    d = start_public(["--gpu-leases"])
    holder = Session(d, HOLDER)
    other = Session(d, OTHER)
    try:
        status, body = holder("POST", *SET)
        assert status == 200, body

        (mine,) = on_gpu(leases(d), "leases")          # root's view
        assert mine["uid"] == 65534 and mine["user"] == HOLDER
        assert mine["pid"] == holder.p.pid and mine["label"] == LABEL

        status, body = holder("GET", "/gpu/leases")    # the holder's
        assert status == 200, body
        (own,) = on_gpu(body, "leases")
        assert own["pid"] == holder.p.pid and own["label"] == LABEL
        assert own["cgroup"] == mine["cgroup"]

        status, body = other("GET", "/gpu/leases")     # another user's
        assert status == 200, body
        (seen,) = on_gpu(body, "leases")
        # held, by whom, on which GPU, since when, what it changed
        assert {k: seen[k] for k in SAME} == {k: mine[k] for k in SAME}
        assert seen["state"] == "held" and seen["settings"] == [
            "power_limit"]
        assert "energy_j" in seen and "duration_s" in seen
        # but not the holder's process, cgroup or label (pid stays a
        # number: libzeus before 4d refuses a record without one)
        assert seen["pid"] == 0 and seen["cgroup"] is None
        assert seen["label"] is None and LABEL not in str(body)
        # and says so: a null label is not "no label" here
        assert seen["details"] is False
        assert own["details"] is True and mine["details"] is True

        # a release it may not make names the holder, not the process
        status, body = other("POST", "/gpu/release?gpu_ids=1")
        assert status == 409 and HOLDER in body["error"], body
        assert "pid" not in body["error"] and \
            str(holder.p.pid) not in body["error"], body

        # the holder's release answers with its own record in full
        status, body = holder("POST", "/gpu/release?gpu_ids=1")
        assert status == 200, body
        (rel,) = body["released"]
        assert rel["label"] == LABEL and rel["pid"] == holder.p.pid
        assert rel["details"] is True

        # the ended lease: the same rule
        status, body = other("GET", "/gpu/leases")
        assert status == 200, body
        (ended,) = on_gpu(body, "ended")
        assert ended["user"] == HOLDER and ended["state"] == "ended"
        assert ended["pid"] == 0 and ended["label"] is None
        assert ended["cgroup"] is None and ended["details"] is False
        (ended,) = on_gpu(leases(d), "ended")
        assert ended["label"] == LABEL and ended["pid"] == holder.p.pid
    finally:
        holder.close()
        other.close()


def test_root_releasing_anothers_lease_sees_it_whole(start_public):
    d = start_public(["--gpu-leases"])
    holder = Session(d, HOLDER)
    try:
        status, body = holder("POST", *SET)
        assert status == 200, body
        r = d.post("/gpu/release?gpu_ids=1")
        assert r.status_code == 200, r.text
        (rel,) = r.json()["released"]
        assert rel["user"] == HOLDER and rel["label"] == LABEL
        assert rel["pid"] == holder.p.pid and rel["details"] is True
    finally:
        holder.close()
