"""Black-box tests of the socket file's safety (docs/security.md, "Socket
file safety"): zeusd runs as root and creates, chmods, chowns and removes a
file at a path from its command line, so an unprivileged user who can write
to a directory on that path must not be able to point any of it elsewhere.

The attacks run for real: a process dropped to `nobody` races symlinks over
the socket path while root starts zeusd again and again. Every test is
quick and makes no timing assumption beyond "the racer runs meanwhile".
"""
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import ZEUSD, Zeusd, run_zeusd
from zeushelp import as_nobody, as_user

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="needs root (the daemon's real case)")

NOBODY = pwd.getpwnam("nobody").pw_uid
NOGROUP = pwd.getpwnam("nobody").pw_gid
SECRET = b"root's secret\n"


@pytest.fixture
def scratch():
    """A root-owned 0755 directory under /tmp that `nobody` can traverse
    (pytest's tmp_path is 0700), removed afterwards."""
    d = tempfile.mkdtemp(prefix="zeusd-sock-", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def make_secret(path):
    """A root-owned 0600 file: what an attacker wants chmodded/chowned."""
    with open(path, "wb") as f:
        f.write(SECRET)
    os.chown(path, 0, 0)
    os.chmod(path, 0o600)
    return path


def assert_secret_intact(path):
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert (st.st_uid, st.st_gid) == (0, 0)
    with open(path, "rb") as f:
        assert f.read() == SECRET


def refuse(sock, *args, **kw):
    """Runs zeusd on `sock` expecting a startup refusal; returns stderr."""
    r = run_zeusd("serve", "--simulate", "--socket-path", str(sock), *args,
                  **kw)
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("zeusd: "), r.stderr
    return lines[-1]


@pytest.fixture
def start_at():
    """start_at(tmp, sock, args=[...], **kw) -> a ready zeusd on `sock`
    (the later --socket-path wins over the one Zeusd adds). Tests stop it
    themselves to look at what is left; a leftover is stopped here."""
    daemons = []

    def _start(tmp, sock, args=(), **kw):
        d = Zeusd(tmp, args=["--socket-path", str(sock), *args], **kw)
        d.sock = str(sock)
        daemons.append(d)
        return d.wait_ready()

    yield _start
    for d in daemons:
        if d.proc.poll() is None:
            d.stop()


# --- (a) the attack: a racer renames symlinks over the socket ---------------

RACER = r"""
import os, stat, sys
path, target, ready, stop = sys.argv[1:5]
tmp = path + ".evil"
open(ready, "w").close()
while not os.path.exists(stop):
    try:
        if not os.path.lexists(tmp):
            os.symlink(target, tmp)
        st = os.lstat(path)
    except FileNotFoundError:
        continue
    if stat.S_ISSOCK(st.st_mode):
        os.rename(tmp, path)        # between bind() and chmod()/chown()
    elif stat.S_ISLNK(st.st_mode):
        os.unlink(path)             # free the name for the next start
"""


def test_symlink_race_in_user_writable_directory(scratch):
    secret = make_secret(os.path.join(scratch, "secret"))
    evil = os.path.join(scratch, "evil")
    os.mkdir(evil)
    os.chown(evil, NOBODY, NOGROUP)
    os.chmod(evil, 0o755)
    sock = os.path.join(evil, "zeusd.sock")
    ready = os.path.join(evil, "ready")
    stop = os.path.join(scratch, "stop")
    racer = subprocess.Popen(as_nobody() + [sys.executable, "-c", RACER,
                                            sock, secret, ready, stop])
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(ready):
            assert racer.poll() is None, "racer died"
            assert time.monotonic() < deadline, "racer did not start"
            time.sleep(0.01)
        for _ in range(15):
            msg = refuse(sock, "--socket-permissions", "0666",
                         "--socket-uid", str(NOBODY), "--socket-gid",
                         str(NOGROUP))
            assert f"unsafe directory {evil} " in msg, msg
            assert "owned by another user" in msg and "chown root" in msg
            assert_secret_intact(secret)
        assert racer.poll() is None, "racer died"
    finally:
        open(stop, "w").close()
        try:
            racer.wait(10)
        except subprocess.TimeoutExpired:
            racer.kill()
            racer.wait()
    assert_secret_intact(secret)


def test_symlink_race_where_the_directory_is_not_refused(scratch):
    """The same race where the directory rules do not stop zeusd first: a
    daemon running as nobody only warns about an unsafe directory, so here
    bind, chmod and chown really run while another user (uid 4242) renames
    symlinks to nobody's private file over the socket. Nothing may follow
    them, whoever wins each round."""
    secret = make_secret(os.path.join(scratch, "secret"))
    os.chown(secret, NOBODY, NOGROUP)
    shared = os.path.join(scratch, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o777)
    sock = os.path.join(shared, "zeusd.sock")
    ready = os.path.join(shared, "ready")
    stop = os.path.join(scratch, "stop")
    racer = subprocess.Popen([*as_user(4242), sys.executable, "-c", RACER,
                              sock, secret, ready, stop])
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(ready):
            assert racer.poll() is None, "racer died"
            assert time.monotonic() < deadline, "racer did not start"
            time.sleep(0.01)
        for i in range(40):     # the window is microseconds wide
            log_path = os.path.join(scratch, f"zeusd-{i}.log")
            with open(log_path, "wb") as log:
                p = subprocess.Popen(as_nobody() + [
                    str(ZEUSD), "serve", "--simulate", "--socket-path", sock,
                    "--socket-permissions", "0666"], stdout=log, stderr=log)
            deadline = time.monotonic() + 10
            while p.poll() is None and time.monotonic() < deadline:
                with open(log_path, "rb") as f:
                    if b"event=listening" in f.read():
                        break
                time.sleep(0.02)
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            rc = p.wait(15)
            logs = open(log_path, "rb").read().decode(errors="replace")
            # started and stopped, or refused what the racer left there
            assert rc == 0 or (rc == 1 and any(
                why in logs for why in ("not a socket", "cannot bind",
                                        "replaced or removed right after"))
            ), logs
            assert "event=socket_dir_unsafe" in logs, logs
            st = os.lstat(secret)
            assert stat.S_IMODE(st.st_mode) == 0o600, (i, oct(st.st_mode))
            assert (st.st_uid, st.st_gid) == (NOBODY, NOGROUP)
        assert racer.poll() is None, "racer died"
    finally:
        open(stop, "w").close()
        try:
            racer.wait(10)
        except subprocess.TimeoutExpired:
            racer.kill()
            racer.wait()
    with open(secret, "rb") as f:
        assert f.read() == SECRET


# --- (b) (c) unsafe directories ----------------------------------------------

@pytest.mark.parametrize("mode,owner,why", [
    (0o1777, 0, "sticky directory is accepted above"),
    (0o775, 0, "group-writable"),
    (0o757, 0, "world-writable"),
    (0o777, 0, "world-writable"),
    (0o755, NOBODY, "owned by another user"),
])
def test_unsafe_parent_refused(tmp_path, mode, owner, why):
    parent = tmp_path / "run"
    parent.mkdir()
    os.chown(parent, owner, 0)
    os.chmod(parent, mode)
    msg = refuse(parent / "zeusd.sock")
    assert f"unsafe directory {parent} " in msg, msg
    assert f"mode {mode:04o}" in msg and why in msg, msg
    assert "or choose another --socket-path" in msg
    assert os.listdir(parent) == []


def test_unsafe_ancestor_refused(tmp_path):
    bad = tmp_path / "shared"
    (bad / "run").mkdir(parents=True)
    os.chmod(bad, 0o777)                # no sticky bit: "run" can be swapped
    msg = refuse(bad / "run" / "zeusd.sock")
    assert f"unsafe directory {bad} " in msg and "world-writable" in msg
    assert os.listdir(bad / "run") == []


def test_unsafe_directory_not_created_into(tmp_path):
    bad = tmp_path / "shared"
    bad.mkdir()
    os.chmod(bad, 0o775)
    msg = refuse(bad / "new" / "zeusd.sock")
    assert f"unsafe directory {bad} " in msg
    assert not (bad / "new").exists()   # checked before anything is made


def test_sticky_ancestor_accepted(start_at, tmp_path):
    """Like /tmp: others cannot rename what they do not own in it."""
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    sock = sticky / "zeusd" / "zeusd.sock"
    d = start_at(tmp_path, sock)
    assert d.get("/time").status_code == 200
    st = os.stat(sock.parent)
    assert stat.S_IMODE(st.st_mode) == 0o755 and st.st_uid == 0
    assert d.stop() == 0
    assert not sock.exists()


# --- (d) symlinked components ------------------------------------------------

def test_symlink_component_to_unsafe_directory_refused(tmp_path):
    unsafe = tmp_path / "unsafe"
    unsafe.mkdir()
    os.chmod(unsafe, 0o777)
    (tmp_path / "link").symlink_to(unsafe)
    sock = tmp_path / "link" / "zeusd.sock"
    msg = refuse(sock)
    assert f"unsafe directory {os.path.realpath(unsafe)} " in msg, msg
    assert str(sock) in msg             # and names what was asked for
    assert os.listdir(unsafe) == []


def test_symlink_component_to_safe_directory_accepted(start_at, tmp_path):
    """/var/run -> /run: resolved once, then the target is checked."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    sock = tmp_path / "alias" / "zeusd.sock"
    d = start_at(tmp_path, sock)
    assert stat.S_ISSOCK(os.lstat(real / "zeusd.sock").st_mode)
    assert f"address=unix:{sock} " in d.logs()
    assert d.stop() == 0
    assert os.listdir(real) == []


def test_symlink_component_owned_by_another_user_refused(scratch):
    """In a sticky directory (/tmp) the sticky bit stops others from
    swapping entries they do not own, not entries they do: `nobody` makes
    /tmp/zeusd a symlink of their own to a root-owned directory before
    zeusd starts. zeusd used to resolve it, check only the (safe) target
    and serve there, while every client kept reaching it through nobody's
    link, which nobody could later point at a socket of their own, to
    collect the clients' requests and tokens. A symlink on the way that
    someone else could swap is refused, naming it."""
    tmp = os.path.join(scratch, "tmp")
    os.mkdir(tmp)
    os.chmod(tmp, 0o1777)
    real = os.path.join(scratch, "real")
    os.mkdir(real)
    link = os.path.join(tmp, "zeusd")
    subprocess.run(as_nobody() + ["ln", "-s", real, link], check=True)
    msg = refuse(os.path.join(link, "zeusd.sock"))
    assert link in msg, msg
    assert os.listdir(real) == []


# --- (e) a symlink at the socket path ----------------------------------------

def test_symlink_at_socket_path_refused(scratch):
    secret = make_secret(os.path.join(scratch, "secret"))
    run = os.path.join(scratch, "run")
    os.mkdir(run, 0o755)
    sock = os.path.join(run, "zeusd.sock")
    os.symlink(secret, sock)
    msg = refuse(sock, "--socket-permissions", "0666", "--socket-uid",
                 str(NOBODY))
    assert "not a socket" in msg and "symbolic link" in msg, msg
    assert os.readlink(sock) == secret
    assert_secret_intact(secret)


def test_dangling_symlink_at_socket_path_refused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    target = tmp_path / "created-by-zeusd?"
    (run / "zeusd.sock").symlink_to(target)
    msg = refuse(run / "zeusd.sock")
    assert "not a socket" in msg
    assert not os.path.lexists(target)


def test_symlink_to_live_socket_refused(start, tmp_path):
    """Even a symlink to a real socket is "not a socket": zeusd would
    otherwise probe (and maybe remove) something outside its directory."""
    d = start()
    other = tmp_path / "other"
    other.mkdir()
    (other / "zeusd.sock").symlink_to(d.sock)
    msg = refuse(other / "zeusd.sock")
    assert "not a socket" in msg
    assert d.get("/time").status_code == 200


# --- (f) safe paths still work -----------------------------------------------

@pytest.mark.parametrize("perms,umask", [
    (0o660, 0o077), (0o600, 0o000), (0o666, 0o022), (0o777, 0o027),
    (0o640, 0o777),
])
def test_missing_parents_mode_and_owner(start_at, tmp_path, perms, umask):
    before = stat.S_IMODE(os.stat(tmp_path).st_mode)
    sock = tmp_path / "a" / "b" / "c" / "zeusd.sock"
    d = start_at(tmp_path, sock, args=[
        "--socket-permissions", f"{perms:o}", "--socket-gid", str(NOGROUP)],
        preexec=lambda: os.umask(umask))
    for p in (sock.parent, sock.parent.parent, sock.parent.parent.parent):
        st = os.lstat(p)
        assert stat.S_ISDIR(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o755, (p, oct(st.st_mode))
        assert (st.st_uid, st.st_gid) == (0, 0)
    st = os.lstat(sock)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == perms, oct(st.st_mode)
    assert (st.st_uid, st.st_gid) == (0, NOGROUP)
    assert stat.S_IMODE(os.stat(tmp_path).st_mode) == before
    assert d.get("/time").status_code == 200
    assert f"address=unix:{sock} " in d.logs()
    assert "event=socket_dir_created" in d.logs()
    assert d.stop() == 0
    assert not os.path.lexists(sock)
    assert sock.parent.is_dir()         # directories are kept


def test_socket_uid_applied(start_at, tmp_path):
    sock = tmp_path / "run" / "zeusd.sock"
    d = start_at(tmp_path, sock, args=["--socket-uid", str(NOBODY),
                                       "--socket-permissions", "600"])
    st = os.lstat(sock)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == \
        (NOBODY, 0, 0o600)
    assert d.stop() == 0
    assert not os.path.lexists(sock)


def test_stale_socket_replaced(start_at, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    sock = run / "zeusd.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    s.close()                           # the file stays, nobody listens
    d = start_at(tmp_path, sock, args=["--socket-permissions", "0640"])
    assert "event=stale_socket_removed" in d.logs()
    st = os.lstat(sock)                 # (the inode number may be reused)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o640
    assert d.get("/time").status_code == 200
    assert d.stop() == 0
    assert not os.path.lexists(sock)


def test_relative_socket_path(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    log = open(tmp_path / "rel.log", "wb")
    p = subprocess.Popen([str(ZEUSD), "serve", "--simulate", "--socket-path",
                          "sub/zeusd.sock"], cwd=run, stdout=log, stderr=log)
    sock = run / "sub" / "zeusd.sock"
    try:
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert p.poll() is None, (tmp_path / "rel.log").read_text()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert stat.S_IMODE(os.lstat(run / "sub").st_mode) == 0o755
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(15) == 0
        log.close()
    assert not os.path.lexists(sock)


# --- (g) shutdown removes only its own socket --------------------------------

@pytest.mark.parametrize("what", ["file", "socket", "symlink", "gone"])
def test_shutdown_leaves_a_replaced_path(start_at, scratch, what):
    secret = make_secret(os.path.join(scratch, "secret"))
    sock = os.path.join(scratch, "run", "zeusd.sock")
    d = start_at(scratch, sock)
    tmp = sock + ".new"
    other = None
    if what == "file":
        with open(tmp, "wb") as f:
            f.write(b"someone else's\n")
    elif what == "socket":
        other = socket.socket(socket.AF_UNIX)
        other.bind(tmp)
    elif what == "symlink":
        os.symlink(secret, tmp)
    if what == "gone":
        os.unlink(sock)
    else:
        os.rename(tmp, sock)            # atomically replaces our socket
    try:
        assert d.stop() == 0
    finally:
        if other is not None:
            other.close()
    if what == "gone":
        assert not os.path.lexists(sock)
        return
    assert os.path.lexists(sock), f"zeusd removed the {what}"
    assert "event=socket_not_removed" in d.logs()
    if what == "file":
        with open(sock, "rb") as f:
            assert f.read() == b"someone else's\n"
    elif what == "symlink":
        assert os.readlink(sock) == secret
    assert_secret_intact(secret)


# --- (h) special bits -------------------------------------------------------

@pytest.mark.parametrize("perms", ["04777", "4777", "01666", "02770", "7777"])
def test_special_permission_bits_refused(tmp_path, perms):
    sock = tmp_path / "zeusd.sock"
    r = run_zeusd("serve", "--simulate", "--socket-path", str(sock),
                  "--socket-permissions", perms)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("zeusd: invalid --socket-permissions")
    assert "setuid, setgid and sticky" in lines[0]
    assert not os.path.lexists(sock)


# --- not root: rules become warnings, no-follow stays -----------------------

def test_unprivileged_daemon_warns_but_never_follows(start_at, scratch):
    shared = os.path.join(scratch, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o777)
    sock = os.path.join(shared, "run", "zeusd.sock")
    d = start_at(shared, sock, wrapper=as_nobody())
    assert "event=socket_dir_unsafe" in d.logs()
    assert f"unsafe directory {shared} " in d.logs()
    assert d.get("/time").status_code == 200
    st = os.lstat(os.path.dirname(sock))
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (NOBODY, 0o755)
    assert d.stop() == 0
    target = make_secret(os.path.join(scratch, "secret"))
    os.symlink(target, sock)
    r = subprocess.run(as_nobody() + [str(ZEUSD), "serve", "--simulate",
                                      "--socket-path", sock],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "not a socket" in r.stderr, r.stderr
    assert_secret_intact(target)
