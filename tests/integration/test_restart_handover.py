"""SIGUSR2, a restart that hands the GPU leases over (docs/operations.md,
"Signals" and "What survives a restart"): zeusd stops as on SIGTERM but
with exit status 75 (EX_TEMPFAIL, which the systemd unit restarts on) and,
with a lease journal, never restores a leased GPU, even with
--restore-on-shutdown: the next zeusd takes the lease back, and the cap
ends with the job. Black-box: the real binary on the NVML simulator with
its state in a file (ZEUS_SIM_STATE), read here directly while no zeusd
runs, so what is checked is what the GPU is at between the two daemons.

SIGTERM without --restore-on-shutdown keeping the cap across a restart is
test_lease_journal.py's test_a_planned_restart_keeps_the_cap; here SIGTERM
is only the contrast with --restore-on-shutdown (a stop restores).
"""
import os
import signal
import time

import pytest

from conftest import WINE_RUN
from zeushelp import (Session, StateRig, audit_lines, gpu_limit_mw, limit_mw,
                      wait_log, wait_until)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="needs root to act as other users"),
    pytest.mark.skipif(WINE_RUN, reason="--state-dir and SIGUSR2 are "
                       "Linux only"),
]

USERS = ("zeusrestart-a",)

EXIT_RESTART = 75       # src/zeusd/device_proc.h: ZEUSD_EXIT_RESTART

@pytest.fixture
def rig(start_public, users):
    return StateRig(start_public)


def stop_with(d, sig):
    """Sends `sig` to the device process and waits for zeusd to exit; its
    exit status. The fixture is told not to expect 0 (d.ready)."""
    d.client.close()
    t0 = time.monotonic()
    d.proc.send_signal(sig)
    # the stop's own bounds (5 s grace for requests, then the network
    # process's teardown) are far below this; the measured time is in the
    # message should it ever come close
    rc = d.proc.wait(timeout=60)
    d.took = time.monotonic() - t0
    d.ready = False
    return rc


def set_limit(s, gpu, mw):
    return s("POST", f"/gpu/set_power_limit?gpu_ids={gpu}&power_limit_mw="
             f"{mw}&block=true")


def test_sigusr2_hands_the_lease_over_despite_restore_on_shutdown(rig,
                                                                  users):
    (alice,) = users
    d = rig.start(["--restore-on-shutdown"])
    default = limit_mw(d)
    a = Session(d, alice)
    assert set_limit(a, 0, 210000)[0] == 200
    assert rig.journal().exists()
    rc = stop_with(d, signal.SIGUSR2)
    logs = d.logs()
    assert rc == EXIT_RESTART, logs
    assert "event=restart_requested leases=handed_over" in logs, logs
    assert "event=gpu_lease_kept gpu=0" in logs, logs
    assert "level=error" not in logs, logs
    # between the two daemons: the GPU is still capped, the lease on disk
    assert gpu_limit_mw(rig.gpus, 0) == 210000, logs
    assert rig.journal().exists(), logs
    assert not [x for x in audit_lines(rig.audit, "set_power_limit")
                if x.get("reason") == "shutdown"], logs
    assert not audit_lines(rig.audit, "lease_end"), logs
    took = d.took
    # the next zeusd (the one systemd starts on 75) takes it back
    d = rig.start(["--restore-on-shutdown"])
    wait_log(d, "event=lease_journal_taken_back gpu=0")
    assert limit_mw(d) == 210000
    (lease,) = d.get("/gpu/leases").json()["leases"]
    assert lease["user"] == alice and lease["gpu"] == 0, lease
    # and the job's end restores it
    a.close()
    assert wait_until(lambda: limit_mw(d) == default, 15), d.logs()
    assert wait_until(lambda: not rig.journal().exists(), 5), d.logs()
    # the lease's one end, over both daemons (written after the restore)
    assert wait_until(lambda: audit_lines(rig.audit, "lease_end"), 5)
    (end,) = audit_lines(rig.audit, "lease_end")
    assert end["reason"] == "process_exit", end
    assert end["settings_restored"] == "power_limit", end
    assert d.stop() == 0, d.logs()
    print(f"the SIGUSR2 stop took {took:.2f} s")


def test_sigterm_with_restore_on_shutdown_restores(rig, users):
    """The contrast: SIGTERM (systemctl stop, and a plain systemctl
    restart) with --restore-on-shutdown is a stop, which restores."""
    (alice,) = users
    d = rig.start(["--restore-on-shutdown"])
    default = limit_mw(d, 1)
    a = Session(d, alice)
    assert set_limit(a, 1, 220000)[0] == 200
    rc = stop_with(d, signal.SIGTERM)
    logs = d.logs()
    assert rc == 0, logs
    assert "event=restart_requested" not in logs, logs
    assert gpu_limit_mw(rig.gpus, 1) == default, logs
    assert not rig.journal(1).exists(), logs
    a.close()


def test_sigusr2_without_a_journal_ends_the_leases(rig, users):
    """No --state-dir: nothing could take the leases back, so SIGUSR2 ends
    them as a stop does (restored with --restore-on-shutdown) and says so;
    the exit status still asks for the restart."""
    (alice,) = users
    d = rig.start(["--restore-on-shutdown"], journal=False)
    default = limit_mw(d, 2)
    a = Session(d, alice)
    assert set_limit(a, 2, 230000)[0] == 200
    rc = stop_with(d, signal.SIGUSR2)
    logs = d.logs()
    assert rc == EXIT_RESTART, logs
    (line,) = [x for x in logs.splitlines()
               if "event=restart_requested" in x]
    assert "leases=not_kept" in line and "restored" in line, line
    assert gpu_limit_mw(rig.gpus, 2) == default, logs
    assert not rig.state.exists()
    a.close()


def test_sigusr2_without_leases(start_public):
    """A zeusd without --gpu-leases restarts on SIGUSR2 too (exit 75),
    with nothing to hand over."""
    d = start_public()
    rc = stop_with(d, signal.SIGUSR2)
    logs = d.logs()
    assert rc == EXIT_RESTART, logs
    assert "event=restart_requested leases=not_kept" in logs, logs
    assert "left as they are" in logs, logs
    assert "event=stopped status=75" in logs, logs
    assert not os.path.exists(d.sock), logs
