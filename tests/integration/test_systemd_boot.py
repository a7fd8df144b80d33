"""zeusd under a real systemd: the packaged unit (packaging/systemd/
zeusd.service, every line as shipped but ExecStart's path) run by the
machine's systemd, booted as PID 1 of pid, mount and network namespaces
of its own (unshare; the network one because systemd as PID 1 raises
net.unix.max_dgram_qlen, a sysctl of its network namespace), and the package's real postinst doing an upgrade's restart.

What this proves that test_systemd.py's fakes cannot: Type=notify and its
READY/STATUS, the hardening lines (ProtectSystem=strict, the system-call
filter, DevicePolicy=closed, PrivateTmp ...) leaving zeusd able to serve,
StateDirectory= holding the lease journal, `systemctl kill
--kill-whom=main --signal=SIGUSR2` (systemd >= 252) and
RestartForceExitStatus=75 restarting zeusd with the jobs' caps kept,
Restart=on-failure after a SIGKILL of the whole unit, and a `systemctl
restart` with --restore-on-shutdown restoring, and zeusd.socket keeping a
request made during a restart for the next zeusd. It found two bugs no fake
did: the device process stopped its network process with kill(2), which
root without CAP_KILL (the unit's bounding set) may not do across users,
so every stop ran into TimeoutStopSec's SIGKILL (test_privsep.py's
test_stop_reaches_the_network_process_without_cap_kill), and a client in
another network namespace had every write refused (test_lease_pidns.py).

The namespace's systemd sees a unit directory of its own: zeusd.service,
a drop-in that points the NVML simulator's shared state
(ZEUS_SIM_STATE) at a directory bound in from here, and empty stand-ins
for the targets the unit's default dependencies name (sysinit.target ...),
so that nothing of the machine's boot (tmpfiles, mounts, getty) runs. /run,
/tmp, /var/lib, /var/log and /etc/systemd/system are private tmpfs mounts
of the namespace. The GPUs' state is read here from the simulator's file,
what a GPU is at whatever zeusd says; clients run inside the namespace
(nsenter), where zeusd's socket is and their pids mean something to it.

Skipped where systemd cannot boot so (no root, no namespaces, or a systemd
older than 252), saying why.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import BUILD, ROOT, WINE_RUN, build_sanitizers
from zeushelp import CLIENT, Session, gpu_limit_mw, wait_until

SYSTEMD = "/lib/systemd/systemd"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="needs root to boot systemd in a namespace"),
    pytest.mark.skipif(WINE_RUN, reason="the systemd unit is Linux's"),
    pytest.mark.skipif(not all(os.path.exists(p) for p in
                               (SYSTEMD, "/usr/bin/unshare",
                                "/usr/bin/nsenter")),
                       reason="needs systemd, unshare and nsenter"),
]

# "zeusd": the package's system user, so the postinst creates nobody
# (it adds the user only when getent does not know it)
USERS = ("zeusd", "zeussd-a", "zeussd-b")

SOCK = "/run/zeusd/zeusd.sock"
STAND_INS = ("sysinit", "basic", "shutdown", "final", "umount")
# systemd's own bound for one start (Type=notify) is TimeoutStartSec's
# 90 s; a start here takes well under a second
UNIT_WAIT = 120


def systemd_version():
    out = subprocess.run([SYSTEMD, "--version"], capture_output=True,
                         text=True).stdout
    m = re.match(r"systemd (\d+)", out)
    return int(m.group(1)) if m else 0


BOOT = r"""
set -e
mount --make-rprivate /
mount -t tmpfs zeus-test /mnt
mkdir /mnt/build /mnt/state /mnt/pkg
mount --bind "$1" /mnt/build
mount --bind "$2/state" /mnt/state
mount --bind "$2/pkg" /mnt/pkg
mount --bind "$2/units" /lib/systemd/system
mount --bind "$2/default" /etc/default
for d in /run /tmp /var/tmp /var/lib /var/log /etc/systemd/system; do
    mount -t tmpfs zeus-test "$d"
done
exec %s --system --unit=zeus-test.target --log-target=console \
    --log-level=info
""" % SYSTEMD


class Booted:
    """systemd as PID 1 of its own pid and mount namespaces, with zeusd's
    unit; `pid` is that systemd as this namespace numbers it."""

    def __init__(self, root, zeusd_args):
        self.root = root
        self.state = root / "state"
        self.gpus = self.state / "gpus.state"
        self.log = self.state / "zeusd.log"
        units = root / "units"
        for d in ("state", "pkg", "default", "units/zeusd.service.d"):
            (root / d).mkdir(parents=True)
        (units / "zeus-test.target").write_text(
            "[Unit]\nDescription=zeusd under a real systemd (tests)\n"
            "DefaultDependencies=no\n")
        for t in STAND_INS:
            (units / f"{t}.target").write_text(
                f"[Unit]\nDescription={t} (a test's empty stand-in)\n"
                "DefaultDependencies=no\n")
        unit = (ROOT / "packaging/systemd/zeusd.service").read_text()
        assert "ExecStart=/usr/bin/zeusd " in unit
        (units / "zeusd.service").write_text(unit.replace(
            "ExecStart=/usr/bin/zeusd ", "ExecStart=/mnt/build/zeusd "))
        shutil.copy(ROOT / "packaging/systemd/zeusd.socket", units)
        # Sanitizer builds: LeakSanitizer stops the world with ptrace,
        # which the unit's system-call filter refuses, so leaks are the
        # other runs' (valgrind, the ASan suite) to find.
        san = ""
        if build_sanitizers():
            san = ("Environment=ASAN_OPTIONS=detect_leaks=0:exitcode=86 "
                   "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:"
                   "exitcode=87\n")
        (units / "zeusd.service.d/test.conf").write_text(
            "[Service]\n"
            "Environment=ZEUS_SIM_STATE=/mnt/state/gpus.state\n"
            "ReadWritePaths=/mnt/state\n" + san +
            "StandardOutput=append:/mnt/state/zeusd.log\n"
            "StandardError=append:/mnt/state/zeusd.log\n")
        (root / "default/zeusd").write_text(
            f'ZEUSD_ARGS="{" ".join(zeusd_args)}"\n')
        shutil.copy(ROOT / "debian/zeusd.postinst", root / "pkg/postinst")
        self.boot_log = open(root / "boot.log", "wb")
        self.unshare = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount", "--mount-proc", "--net",
             "--kill-child", "sh", "-c", BOOT, "boot", str(BUILD.resolve()),
             str(root)],
            stdin=subprocess.DEVNULL, stdout=self.boot_log,
            stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = None

    def wait_running(self):
        """None once systemd runs its target, else why it does not."""
        kids = Path(f"/proc/{self.unshare.pid}/task/{self.unshare.pid}"
                    "/children")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.unshare.poll() is not None:
                return "it exited: " + self.boot_text()
            if self.pid is None:
                try:
                    k = kids.read_text().split()
                except OSError:
                    k = []
                self.pid = int(k[0]) if k else None
            if self.pid is not None:
                r = self.ctl("is-system-running", check=False)
                if r.stdout.strip() in ("running", "degraded"):
                    return None
            time.sleep(0.1)
        return "not running after 60 s: " + self.boot_text()

    def boot_text(self):
        return (self.root / "boot.log").read_text(errors="replace")[-3000:]

    def inside(self):
        """The argv prefix that runs a command in systemd's namespaces
        (mount: the socket's /run; pid: the pid zeusd sees is the job's)."""
        return ["nsenter", "-t", str(self.pid), "-m", "-p", "-n"]

    def ctl(self, *args, check=True):
        return subprocess.run(self.inside() + ["systemctl", *args],
                              capture_output=True, text=True, timeout=UNIT_WAIT,
                              check=check)

    def prop(self, name):
        return self.ctl("show", "--property", name, "--value",
                        "zeusd.service").stdout.strip()

    def request(self, method, target):
        """(status, body) of one request by root from inside."""
        out = subprocess.run(
            self.inside() + [sys.executable, "-c", CLIENT, SOCK, method,
                             target],
            capture_output=True, text=True, timeout=30, check=True).stdout
        status, _, body = out.partition("\n")
        return int(status), body.strip()

    def logs(self):
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_serving(self, old_pid=None):
        """The main PID of an active zeusd (another than old_pid)."""
        def up():
            pid = self.prop("MainPID")
            return (self.prop("ActiveState") == "active" and
                    pid not in ("0", old_pid))
        assert wait_until(up, UNIT_WAIT, 0.1), (
            self.ctl("status", "zeusd", "--no-pager", check=False).stdout +
            self.logs()[-3000:])
        return self.prop("MainPID")

    def close(self):
        if self.pid is not None:
            self.ctl("stop", "zeusd", check=False)
            try:
                os.kill(self.pid, signal.SIGKILL)    # the namespace's init
            except ProcessLookupError:
                pass
        self.unshare.kill()
        self.unshare.wait(timeout=30)
        self.boot_log.close()


@pytest.fixture
def booted(tmp_path, users):
    if systemd_version() < 252:
        pytest.skip("systemctl kill --kill-whom needs systemd 252 or later")
    made = []

    def _boot(zeusd_args):
        b = Booted(tmp_path, zeusd_args)
        made.append(b)
        why = b.wait_running()
        if why is not None:
            pytest.skip("systemd cannot boot in namespaces of its own "
                        f"here: {why}")
        return b

    yield _boot
    for b in made:
        b.close()
        text = b.logs()
        assert "AddressSanitizer" not in text, text[-4000:]
        assert "runtime error" not in text, text[-4000:]


class Job:
    """A user's job: one client connection to zeusd from inside the
    namespace, the process a lease watches."""

    def __init__(self, b, user):
        self.s = Session(type("D", (), {"sock": SOCK}), user, b.inside())

    def cap(self, gpu, mw):
        status, body = self.s("POST", f"/gpu/set_power_limit?gpu_ids={gpu}"
                              f"&power_limit_mw={mw}&block=true")
        return status, body

    def close(self):
        self.s.close()


def holders(b):
    status, body = b.request("GET", "/gpu/leases")
    assert status == 200, body
    return [(x["gpu"], x["user"]) for x in json.loads(body)["leases"]]


def test_a_jobs_cap_survives_an_upgrade_and_a_crash_under_systemd(booted,
                                                                 users):
    _, alice, bob = users
    # --restore-on-shutdown: the demanding case, a stop restores, but an
    # upgrade's restart must not
    b = booted(["--simulate", "--gpu-leases", "--restore-on-shutdown"])
    assert b.ctl("start", "zeusd").returncode == 0
    first = b.wait_serving()
    default, default1 = gpu_limit_mw(b.gpus, 0), gpu_limit_mw(b.gpus, 1)
    assert b.prop("StatusText").startswith("Serving unix:" + SOCK), \
        b.prop("StatusText")
    job = Job(b, alice)
    assert job.cap(0, 210000)[0] == 200
    assert gpu_limit_mw(b.gpus, 0) == 210000

    # the package's upgrade: the real postinst, as dpkg runs it
    # ("configure" with the version before), under this systemd
    r = subprocess.run(b.inside() + ["sh", "/mnt/pkg/postinst", "configure",
                                     "0.0.9"],
                       capture_output=True, text=True, timeout=UNIT_WAIT)
    assert r.returncode == 0, r.stdout + r.stderr
    second = b.wait_serving(first)
    logs = b.logs()
    assert "event=restart_requested leases=handed_over" in logs, logs
    assert "event=gpu_lease_kept gpu=0" in logs, logs
    # the network process stopped when asked: before, the device process
    # signalled it, which root without CAP_KILL (the unit's bounding set)
    # may not do across users, and every stop under the unit ran into
    # TimeoutStopSec's SIGKILL
    assert "network_process_killed" not in logs, logs
    assert wait_until(lambda: "event=lease_journal_taken_back gpu=0" in
                      b.logs(), 15), b.logs()
    assert b.prop("NRestarts") == "1"
    assert gpu_limit_mw(b.gpus, 0) == 210000, b.logs()
    assert holders(b) == [(0, alice)]
    other = Job(b, bob)
    assert other.cap(0, 150000)[0] == 409        # the lease holds
    other.close()

    # a crash: the kernel's OOM killer picks the device process (SIGKILL);
    # its network process and janitor follow it, and Restart=on-failure
    # starts zeusd again
    r = b.ctl("kill", "--kill-whom=main", "--signal=SIGKILL", "zeusd",
              check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    b.wait_serving(second)
    assert wait_until(lambda: b.logs().count(
        "event=lease_journal_taken_back gpu=0") == 2, 15), b.logs()
    assert b.prop("NRestarts") == "2"
    assert gpu_limit_mw(b.gpus, 0) == 210000, b.logs()
    assert holders(b) == [(0, alice)]

    # the job ends: the cap ends with it, after two restarts
    job.close()
    assert wait_until(lambda: gpu_limit_mw(b.gpus, 0) == default, 15), \
        b.logs()
    assert wait_until(lambda: holders(b) == [], 5), b.logs()

    # the contrast: `systemctl restart` is a stop and a start, so with
    # --restore-on-shutdown a running job's cap is restored
    job = Job(b, bob)
    assert job.cap(1, 220000)[0] == 200
    third = b.prop("MainPID")
    assert b.ctl("restart", "zeusd").returncode == 0
    b.wait_serving(third)
    assert gpu_limit_mw(b.gpus, 1) == default1, b.logs()
    assert holders(b) == []
    job.close()

    assert b.ctl("stop", "zeusd").returncode == 0
    assert b.prop("ActiveState") == "inactive"
    assert b.prop("Result") == "success", b.logs()
    assert "level=error" not in b.logs(), b.logs()


def test_socket_activation_keeps_requests_across_a_restart(booted, users):
    """The package enables zeusd.socket beside the service: systemd holds
    the listening socket, starts zeusd on the first connection, and keeps
    the socket through a restart, so a request made while no zeusd runs
    waits in its backlog and is answered by the next one: an upgrade's
    restart refuses no client."""
    b = booted(["--simulate"])
    assert b.ctl("start", "zeusd.socket").returncode == 0
    assert b.prop("ActiveState") == "inactive"
    status, body = b.request("GET", "/discover")     # starts zeusd
    assert status == 200, body
    first = b.wait_serving()
    assert "event=listening" in b.logs(), b.logs()
    assert b.ctl("kill", "--kill-whom=main", "--signal=SIGUSR2",
                 "zeusd").returncode == 0
    assert wait_until(lambda: b.prop("MainPID") != first, UNIT_WAIT, 0.05)
    # zeusd is down for RestartSec=2s at least: this request waits for
    # the next one
    t0 = time.monotonic()
    status, body = b.request("GET", "/discover")
    took = time.monotonic() - t0
    assert status == 200, body
    second = b.wait_serving(first)
    assert b.prop("NRestarts") == "1"
    # the stop is quick (measured before systemd's pause); the request
    # spanned the pause, so it waited for the next zeusd
    print(f"a request made during the restart waited {took:.2f} s "
          f"(zeusd {first} -> {second})")
    assert b.ctl("stop", "zeusd.socket", "zeusd").returncode == 0
    assert b.prop("Result") == "success", b.logs()
    assert "level=error" not in b.logs(), b.logs()
