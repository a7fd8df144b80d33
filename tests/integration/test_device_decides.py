"""The device process decides every GPU write itself (docs/security.md,
"Privilege separation"): a taken-over network process is simulated by
stealing its descriptors (pidfd_getfd, as root) and sending forged requests
on its own channel to the device process. Whatever it claims, a write
outside the node policy or on a GPU another user leases is refused, and
leaves an audit line; a forged peer is refused; the daemon keeps serving.
"""
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zeushelp import (as_user, network_pid, peers, steal, unix_sockets,
                      wait_log, wait_until)


PSMSG_MAGIC = 0x7a707331
OP = {"gpu_limit": 3, "gpu_write": 6, "peer": 10, "peer_end": 11,
      "token": 12, "audit": 13, "gpu_writes": 14, "leases": 17,
      "release": 19}
WRITES_MAX = 64
FROM = {"none": 0, "unix": 1, "tcp": 2, "restore": 3, "pipe": 4}
SET_POWER_LIMIT = 0              # enum gpu_write_op
ZERR_MSG_MAX = 512

POLICY = """
[[grant]]
users = ["nobody"]
scopes = ["gpu-read", "gpu-control"]
gpus = [1]

[[grant]]
users = [4242]
scopes = ["gpu-read", "gpu-control"]
gpus = [1, 2]
"""

HOLD = """
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"GET /gpu/get_power_limit?gpu_ids=0 HTTP/1.1\\r\\nHost: z\\r\\n\\r\\n")
s.recv(65536)
print("connected", flush=True)
time.sleep(120)
"""

# HOLD, whose connection outlives it: a child keeps the socket open, and
# the process that connected (the peer zeusd knows) exits when its stdin
# closes; the child's pid is printed
HOLD_FORK = """
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"GET /gpu/get_power_limit?gpu_ids=0 HTTP/1.1\\r\\nHost: z\\r\\n\\r\\n")
s.recv(65536)
kid = os.fork()
if kid == 0:
    sys.stdin.close()
    time.sleep(120)
    os._exit(0)
print("connected", kid, flush=True)
sys.stdin.read()
"""


def errno_kinds():
    """enum zerr_kind's values, read from the header so they cannot drift."""
    text = (Path(__file__).resolve().parents[2] / "src/common/err.h"
            ).read_text()
    body = text[text.index("enum zerr_kind {"):]
    body = body[:body.index("};")]
    names = re.findall(r"^\s*(ZERR_[A-Z_]+)", body, re.M)
    return {n: i for i, n in enumerate(names)}


def request(op, auth=0, w_from=0, dev=0, w_op=0, limit=0, tok=0,
            label=b"", mask=0):
    """struct psmsg_request (src/privsep/msg.h), 184 bytes."""
    return struct.pack("<IIQIIIIIIIIQQQIIQII16s72s", PSMSG_MAGIC, op, 99,
                       dev, 0, w_op, limit, 0, 0, 0, 0, mask, 0, auth,
                       w_from, 0, tok, 0, 0, b"", label)


def release_reply(raw):
    """rc, kind, message, the records' (gpu, uid, reason) and not_leased
    of a struct psmsg_leases_reply (src/privsep/msg.h)."""
    magic, op, rid, rc, kind = struct.unpack_from("<IIQiI", raw, 0)
    assert magic == PSMSG_MAGIC and rid == 99
    msg = raw[24:24 + ZERR_MSG_MAX].split(b"\0")[0].decode()
    at = 24 + ZERR_MSG_MAX
    nopen, _, _, not_leased = struct.unpack_from("<IIQQ", raw, at)
    rec_at = at + 24 + 64 * 8
    size = 8 * 4 + 4 * 8 + 64 + 256 + 72
    recs = []
    for i in range(nopen):
        gpu, uid, _, _, _, _, reason = struct.unpack_from(
            "<IIiIIII", raw, rec_at + i * size)
        recs.append((gpu, uid, reason))
    return rc, kind, msg, recs, not_leased


def reply(raw):
    magic, op, rid, rc, kind = struct.unpack_from("<IIQiI", raw, 0)
    msg = raw[24:24 + ZERR_MSG_MAX].split(b"\0")[0].decode()
    handle = struct.unpack_from("<Q", raw, 24 + ZERR_MSG_MAX + 16)[0]
    assert magic == PSMSG_MAGIC and rid == 99
    return rc, kind, msg, handle


def token_handle(raw):
    """t_handle of a PSMSG_TOKEN reply: after the fixed part of the reply
    (struct psmsg_reply in src/privsep/msg.h; its size less the token
    fields)."""
    rc, _, msg, _ = reply(raw)
    assert rc == 0, msg
    return struct.unpack_from("<Q", raw, len(raw) - (8 + 8 + 4 + 4 + 264))[0]


def in_epoll(pid):
    """The fds of pid that an epoll instance of it watches."""
    fds = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            text = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue
        fds.update(int(x) for x in re.findall(r"^tfd:\s+(\d+)", text, re.M))
    return fds


class Forger:
    """The network process's channel and connections, in the test's hands."""

    def __init__(self, d):
        self.d = d
        self.net = network_pid(d)
        socks = unix_sockets(self.net)
        watched = in_epoll(self.net)
        seq = [fd for fd, (_, typ, _, _) in socks.items() if typ == 5]
        # the control channel was made after the data channels: its end in
        # the device process has the highest number of the device's ends
        dev_socks = unix_sockets(d.proc.pid)
        peer_of = peers(self.net)
        dev_fd_of = {v[0]: fd for fd, v in dev_socks.items()}
        by_dev = sorted(seq, key=lambda fd: dev_fd_of.get(
            peer_of.get(socks[fd][0]), -1))
        data = [fd for fd in by_dev[:-1] if fd not in watched]
        assert data, (seq, watched)
        self.chan = socket.socket(fileno=steal(self.net, data[0]))

    def call_raw(self, req, fd=None):
        if fd is None:
            self.chan.send(req)
        else:
            socket.send_fds(self.chan, [req], [fd])
        return self.chan.recv(1 << 16)

    def call(self, req, fd=None):
        return reply(self.call_raw(req, fd))

    def connection_of(self, pid):
        """The network process's end of a connection that `pid` made."""
        for fd, (_, typ, st, path) in unix_sockets(self.net).items():
            if typ != 1 or st != 3 or not path.endswith("/zeusd.sock"):
                continue
            s = socket.socket(fileno=steal(self.net, fd))
            creds = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                 struct.calcsize("3i"))
            if struct.unpack("3i", creds)[0] == pid:
                return s
            s.close()
        raise AssertionError(f"no connection of pid {pid}")

    def handle_of(self, pid):
        s = self.connection_of(pid)
        try:
            rc, _, msg, handle = self.call(request(OP["peer"]), s.fileno())
        finally:
            s.close()
        assert rc == 0 and handle != 0, msg
        return handle

    def write(self, gpu, limit, w_from, auth=0):
        return self.call(request(OP["gpu_write"], auth, FROM[w_from], gpu,
                                 SET_POWER_LIMIT, limit))

    def release(self, gpus, auth):
        return release_reply(self.call_raw(request(
            OP["release"], auth, FROM["unix" if auth else "tcp"],
            mask=sum(1 << g for g in gpus))))


def holder(d, uid):
    """A process of uid that connected (and stays connected)."""
    p = subprocess.Popen(
        [*as_user(uid),
         sys.executable, "-c", HOLD, d.sock],
        stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "connected"
    return p


def limit_of(d, gpu):
    r = d.client.get(f"/gpu/get_power_limit?gpu_ids={gpu}")
    return r.json()[str(gpu)]["power_limit_mw"]


def audit_refusals(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines()
            if json.loads(x).get("result") == "refused"]


def test_forged_writes_are_decided_by_the_device_process(node):
    audit = node.base / "audit.log"
    d = node(args=["--gpu-leases", "--audit-log", str(audit)], policy=POLICY)
    kinds = errno_kinds()
    f = Forger(d)
    before = [limit_of(d, g) for g in range(4)]
    nobody = holder(d, 65534)
    other = holder(d, 4242)
    try:
        h_nobody = f.handle_of(nobody.pid)
        h_other = f.handle_of(other.pid)

        # outside the policy: nobody holds gpu-control on GPU 1 only
        rc, kind, msg, _ = f.write(0, 150000, "unix", h_nobody)
        assert (rc, kind) == (-1, kinds["ZERR_FORBIDDEN"]), msg
        assert "not granted gpu-control on GPU 0" in msg
        assert limit_of(d, 0) == before[0]
        # no such connection, a TCP write on a Unix-socket zeusd, a
        # named-pipe client's (zeusd.exe's kind) here, a write from nobody
        # at all
        for w_from, auth in (("unix", 12345), ("tcp", 0), ("pipe", 0),
                             ("none", 0)):
            rc, kind, msg, _ = f.write(0, 150000, w_from, auth)
            assert (rc, kind) == (-1, kinds["ZERR_FORBIDDEN"]), msg
            if w_from == "pipe":
                assert "zeusd serves no named pipe" in msg, msg
            assert limit_of(d, 0) == before[0]

        # inside it: runs (the forger's channel does reach the device), and
        # gives nobody's process the lease on GPU 1
        rc, _, msg, _ = f.write(1, 150000, "unix", h_nobody)
        assert rc == 0, msg
        assert limit_of(d, 1) == 150000

        # another user the policy grants GPU 1: leased to nobody, 409
        rc, kind, msg, _ = f.write(1, 175000, "unix", h_other)
        assert (rc, kind) == (-1, kinds["ZERR_CONFLICT"]), msg
        assert "leased by user nobody (uid 65534)" in msg
        # released by another user, or by no connection the device
        # process knows: refused (a restore is the device process's own;
        # one asked for by the network process is no message at all:
        # test_privsep_msg.c)
        rc, kind, msg, recs, _ = f.release([1], h_other)
        assert (rc, kind, recs) == (-1, kinds["ZERR_CONFLICT"], []), msg
        assert "only that user or root can release it" in msg, msg
        rc, kind, msg, recs, _ = f.release([1], 12345)
        assert (rc, kind, recs) == (-1, kinds["ZERR_FORBIDDEN"], []), msg
        assert limit_of(d, 1) == 150000
        # GPU 2 is the other user's to change
        rc, _, msg, _ = f.write(2, 180000, "unix", h_other)
        assert rc == 0, msg

        # a forged peer: a socket that is not a connection to zeusd
        a, b = socket.socketpair()
        rc, _, msg, handle = f.call(request(OP["peer"]), a.fileno())
        assert rc == -1 and handle == 0, msg
        a.close()
        b.close()
    finally:
        nobody.kill()
        nobody.wait()

    try:
        check_after_holder_left(d, f, audit, kinds, before, h_other)
    finally:
        other.kill()
        other.wait()


def check_after_holder_left(d, f, audit, kinds, before, h_other):
    # every refusal left a line naming who the device process saw
    lines = audit_refusals(audit)
    gpu0 = [x for x in lines if x["gpu"] == 0]
    assert len(gpu0) == 5, lines
    assert gpu0[0]["identity"]["uid"] == 65534
    assert gpu0[0]["requested"] == {"power_limit_mw": 150000}
    gpu1 = [x for x in lines if x["gpu"] == 1]
    assert [(x["operation"], x["identity"].get("uid")) for x in gpu1] == \
        [("set_power_limit", 4242), ("release", 4242)], gpu1
    nogpu = [x for x in lines if x["gpu"] is None]
    assert [x["operation"] for x in nogpu] == ["release"], lines
    # nobody's process is gone: the device process put its change back
    # by itself, to the recorded value (it watches the holder's pidfd),
    # without a restore asked for; a release now finds nothing leased
    wait_until(lambda: limit_of(d, 1) == before[1], 10)
    wait_log(d, "event=gpu_lease_restored_by_device gpu=1")
    rc, _, msg, recs, not_leased = f.release([1], h_other)
    assert (rc, recs, not_leased) == (0, [], 1 << 1), msg
    assert limit_of(d, 1) == before[1]
    rc, _, msg, _ = f.write(1, 175000, "unix", h_other)
    assert rc == 0, msg
    assert "event=device_write_refused" in d.logs()
    assert d.proc.poll() is None
    # and every write it ran has its line, written by the device process
    # (the network process never saw these)
    ran = [json.loads(x) for x in audit.read_text().splitlines()
           if json.loads(x).get("result") == "ok"]
    assert [(x["gpu"], x["identity"]["uid"], x.get("reason")) for x in ran] \
        == [(1, 65534, None), (2, 4242, None), (1, 65534, "process_exit"),
            (1, 4242, None)], ran
    assert ran[0]["before"] == {"power_limit_mw": before[1]}
    assert ran[0]["requested"] == {"power_limit_mw": 150000}


def write_request(gpu, limit, w_from, auth=0):
    return request(OP["gpu_write"], auth, FROM[w_from], gpu,
                   SET_POWER_LIMIT, limit)


def writes_request(writes, n=None):
    """struct psmsg_writes: one GPU's writes in one message."""
    n = len(writes) if n is None else n
    body = b"".join(writes).ljust(WRITES_MAX * len(writes[0]), b"\0")
    head = struct.pack("<IIQ", PSMSG_MAGIC, OP["gpu_writes"], 99)
    return head.ljust(len(writes[0]), b"\0") + struct.pack("<II", n, 0) + \
        body


def writes_results(raw, n):
    """(rc, kind, message) of each write in a PSMSG_GPU_WRITES reply."""
    magic, op, rid, got = struct.unpack_from("<IIQI", raw, 0)
    assert (magic, op, rid, got) == (PSMSG_MAGIC, OP["gpu_writes"], 99, n)
    size = 16 + ZERR_MSG_MAX
    assert len(raw) == 24 + n * size
    out = []
    for i in range(n):
        rc, kind = struct.unpack_from("<iI", raw, 24 + i * size)
        msg = raw[24 + i * size + 16:24 + (i + 1) * size].split(b"\0")[0]
        out.append((rc, kind, msg.decode()))
    return out


def test_forged_write_batch_is_decided_write_by_write(node):
    # The writes queued on one GPU travel as one message (docs/design.md,
    # "Writes travel together"); a forger that fills one with writes of
    # other users gets each decided as if it came alone.
    audit = node.base / "audit.log"
    d = node(args=["--gpu-leases", "--audit-log", str(audit)], policy=POLICY)
    kinds = errno_kinds()
    f = Forger(d)
    before = limit_of(d, 1)
    nobody = holder(d, 65534)
    other = holder(d, 4242)
    try:
        h_nobody = f.handle_of(nobody.pid)
        h_other = f.handle_of(other.pid)
        n = 4
        res = writes_results(f.call_raw(writes_request([
            write_request(1, 150000, "unix", h_nobody),   # granted: runs
            write_request(1, 175000, "unix", h_other),    # leased: 409
            write_request(1, 175000, "tcp"),              # no TCP here
            write_request(1, 160000, "unix", h_nobody),   # the holder's
        ])), n)
        assert res[0][0] == 0 and res[3][0] == 0, res
        assert res[1][:2] == (-1, kinds["ZERR_CONFLICT"]), res
        assert "leased by user nobody (uid 65534)" in res[1][2]
        assert res[2][:2] == (-1, kinds["ZERR_FORBIDDEN"]), res
        assert limit_of(d, 1) == 160000
        # nobody is not granted GPU 0: a batch for GPU 0 of nobody's
        res = writes_results(f.call_raw(writes_request([
            write_request(0, 150000, "unix", h_nobody)] * 2)), 2)
        assert all(r[:2] == (-1, kinds["ZERR_FORBIDDEN"]) for r in res), res
    finally:
        nobody.kill()
        other.kill()
        nobody.wait()
        other.wait()
    # nobody's exit: the device process restores GPU 1 by itself
    wait_until(lambda: "process_exit" in audit.read_text(), 10)
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(x["gpu"], x["result"], x["identity"].get("uid"))
            for x in lines if x.get("operation") == "set_power_limit"] == [
        (1, "ok", 65534), (1, "refused", 4242), (1, "refused", None),
        (1, "ok", 65534), (0, "refused", 65534), (0, "refused", 65534),
        (1, "ok", 65534)], lines
    ran = [x for x in lines if x.get("operation") == "set_power_limit"]
    assert ran[-1]["reason"] == "process_exit", ran[-1]
    assert ran[-1]["requested"] == {"power_limit_mw": before}, ran[-1]
    assert d.proc.poll() is None


@pytest.mark.parametrize("case", ["two_gpus", "one_write", "after_last",
                                  "not_a_write", "a_restore"])
def test_a_malformed_write_batch_stops_zeusd(node, case):
    d = node(args=["--gpu-leases"], policy=POLICY)
    d.ready = False         # it is meant to stop with status 1
    f = Forger(d)
    w0 = write_request(1, 150000, "tcp")
    msg = {
        "two_gpus": writes_request([w0, write_request(2, 150000, "tcp")]),
        "one_write": writes_request([w0]),
        "after_last": writes_request([w0, w0, w0], n=2),
        "not_a_write": writes_request([w0, request(OP["gpu_limit"], dev=1)]),
        # a restore is the device process's own (it watches the holders)
        "a_restore": writes_request([w0, write_request(1, 0, "restore")]),
    }[case]
    f.chan.send(msg)
    assert d.proc.wait(timeout=20) == 1
    why = {"two_gpus": "writes of gpus 1 and 2", "one_write": "1 writes",
           "after_last": "bytes after write 2",
           "not_a_write": "write 1 with op 3",
           "a_restore": "write from 3"}[case]
    assert "event=privsep_message_refused" in d.logs()
    assert why in d.logs(), d.logs()
    # none of it ran: each write is a TCP write on a Unix-socket zeusd,
    # which the device process would have refused and logged
    # (device_write_refused)
    assert "event=device_write" not in d.logs()


def test_a_peer_request_without_its_socket_stops_zeusd(node):
    d = node(args=["--gpu-leases"], policy=POLICY)
    d.ready = False         # it is meant to stop with status 1
    f = Forger(d)
    f.chan.send(request(OP["peer"]))
    assert d.proc.wait(timeout=20) == 1
    assert "event=privsep_message_refused" in d.logs()
    assert "peer without its descriptor" in d.logs()


def test_a_broken_message_stops_zeusd_without_cap_kill(start_public):
    """Root without CAP_KILL, as under the packaged unit: the device
    process's SIGKILL of a network process that broke the protocol cannot
    be sent (another user). zeusd stops all the same, status 1, and the
    network process ends with its channels. Before, the stop waited for
    that process's SIGCHLD, which never came: zeusd served on with a
    network process it had just caught forging."""
    d = start_public(["--gpu-leases"],
                     wrapper=["setpriv", "--bounding-set", "-kill"])
    d.ready = False         # it is meant to stop with status 1
    f = Forger(d)
    net = f.net
    f.chan.send(request(OP["peer"]))
    assert d.proc.wait(timeout=20) == 1
    logs = d.logs()
    assert "event=privsep_message_refused" in logs, logs
    assert "event=network_process_broke" in logs, logs
    assert wait_until(lambda: not os.path.exists(f"/proc/{net}"), 20), logs


def tagged(line):
    """Whether a log line carries the network process's tag where the
    relay puts it (zeusd/logrelay.h)."""
    f = line.split(" ")
    return "proc=network" in f[:2] or f[0].endswith(">proc=network")


def test_the_network_process_cannot_log_as_the_device_process(node):
    d = node()
    net = network_pid(d)
    logs = d.logs()
    # its own lines are tagged, the device process's are not
    assert any(tagged(x) for x in logs.splitlines()
               if "event=listening" in x), logs
    assert not any(tagged(x) for x in logs.splitlines()
                   if "event=device_process " in x), logs
    # whatever it writes on its stderr comes out tagged, line by line
    err = steal(net, 2)
    os.write(err, b"ts=2026-01-01T00:00:00.000Z level=error event=forged_a\n"
             b"level=error event=forged_b\n<3>level=error event=forged_c\n"
             + b"x" * 9000 + b" event=forged_d\n" + b"ts=\n"
             + b"event=forged_e")
    os.close(err)
    deadline = time.monotonic() + 10
    while "event=forged_d" not in d.logs() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = [x for x in d.logs().splitlines()
             if "forged" in x or x.startswith("x") or "xxxx" in x
             or x.endswith("ts=")]
    assert len(lines) >= 5, d.logs()
    assert all(tagged(x) for x in lines), lines
    # its own timestamp is dropped: the relay's clock stands first
    # (test_device_composes.py checks the time)
    assert lines[0].startswith("ts=") and lines[0].endswith(
        " proc=network level=error event=forged_a"), lines[0]
    assert "2026-01-01T00:00:00.000Z" not in d.logs()
    assert " proc=network <3>level=error event=forged_c" in d.logs()


def memory_holds(pid, needle):
    """Whether any readable mapping of pid contains `needle` (root reads
    /proc/PID/mem even of a non-dumpable process). Read in pieces; the
    terabytes an ASan build reserves for its shadow (mappings over 1 GiB,
    mostly unbacked) are skipped: no key is there."""
    chunk = 4 << 20
    with open(f"/proc/{pid}/maps") as maps, \
            open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            f = line.split()
            if "r" not in f[1] or len(f) > 5 and f[5] in ("[vvar]",
                                                          "[vsyscall]"):
                continue
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if hi - lo > 1 << 30:
                continue
            tail = b""
            for at in range(lo, hi, chunk):
                try:
                    mem.seek(at)
                    data = tail + mem.read(min(chunk, hi - at))
                except (OSError, ValueError, OverflowError):
                    break
                if needle in data:
                    return True
                tail = data[-(len(needle) - 1):]
    return False


def token_request(tok):
    head = request(OP["token"])
    return head + struct.pack("<II", len(tok), 0) + tok + \
        b"\0" * (8192 - len(tok))


def test_only_the_device_process_holds_the_key(start, tmp_path):
    import jwt
    secret = os.urandom(24).hex().encode()   # no NUL, no newline
    key = tmp_path / "key"
    key.write_bytes(secret)
    d = start("tcp", args=["--signing-key-path", str(key)])
    f = Forger(d)
    kinds = errno_kinds()
    good = jwt.encode({"sub": "ops", "scopes": ["gpu-control",
                                                "gpu-read"]},
                      secret, algorithm="HS256").encode()
    read_only = jwt.encode({"sub": "ro", "scopes": ["gpu-read"]}, secret,
                           algorithm="HS256").encode()
    # a client's token works (verified by the device process, kept)
    hdr = {"Authorization": "Bearer " + good.decode()}
    r = d.client.post("/gpu/set_power_limit?gpu_ids=0&block=true"
                      "&power_limit_mw=190000", headers=hdr)
    assert r.status_code == 200, r.text
    assert memory_holds(d.proc.pid, secret)
    assert not memory_holds(f.net, secret)

    before = d.client.get("/gpu/get_power_limit?gpu_ids=1",
                          headers=hdr).json()["1"]["power_limit_mw"]
    # a forged TCP write: no token, a made-up one, one without the scope
    rc, kind, msg, _ = f.write(1, 150000, "tcp")
    assert (rc, kind) == (-1, kinds["ZERR_UNAUTHENTICATED"]), msg
    rc, kind, msg, _ = f.call(request(OP["gpu_write"], 0, FROM["tcp"], 1,
                                      SET_POWER_LIMIT, 150000, tok=77 << 32))
    assert (rc, kind) == (-1, kinds["ZERR_UNAUTHENTICATED"]), msg
    # the handle of a token is in the token reply (t_handle)
    raw_ro = f.call_raw(token_request(read_only))
    rc, kind, msg, _ = f.call(request(OP["gpu_write"], 0, FROM["tcp"], 1,
                                      SET_POWER_LIMIT, 150000,
                                      tok=token_handle(raw_ro)))
    assert (rc, kind) == (-1, kinds["ZERR_FORBIDDEN"]), msg
    assert "gpu-control" in msg
    # a token the device process never saw signed: refused unparsed
    bad = good[:-4] + (b"AAAA" if not good.endswith(b"AAAA") else b"BBBB")
    rc, kind, msg, _ = f.call(token_request(bad))
    assert (rc, kind) == (-1, kinds["ZERR_UNAUTHENTICATED"]), msg
    assert d.client.get("/gpu/get_power_limit?gpu_ids=1",
                        headers=hdr).json()["1"]["power_limit_mw"] == before
    # and with the right one, it runs
    raw = f.call_raw(token_request(good))
    rc, _, msg, _ = f.call(request(OP["gpu_write"], 0, FROM["tcp"], 1,
                                   SET_POWER_LIMIT, 150000,
                                   tok=token_handle(raw)))
    assert rc == 0, msg
    assert d.proc.poll() is None


def audit_record(kind, gpu=0, op=b"", code=0, holder_uid=0, settings=0,
                 no_gpu=0, w_from=0, auth=0, duration_us=0, energy_mj=0,
                 energy_ok=0, w_op=0):
    """struct psmsg_audit (src/privsep/msg.h): typed fields, no text."""
    head = request(OP["audit"], auth, w_from, gpu, w_op)
    body = struct.pack("<IIIIIIIIQQ", kind, no_gpu, 0, settings, holder_uid,
                       0, 0, energy_ok, duration_us, energy_mj)
    return head + body + op.ljust(32, b"\0") + struct.pack("<II", code, 0) + \
        b"\0" * 64 + b"\0" * 256 + b"\0" * 72


REFUSED, SUPERSEDED, LEASE_END = 1, 2, 3
RESET_LOCKED_CLOCKS = 6          # enum gpu_write_op
REFUSAL_SCOPE, REFUSAL_POLICY_GPU = 1, 2


def test_the_network_process_cannot_write_the_audit_log(node):
    audit = node.base / "audit.log"
    d = node(args=["--gpu-leases", "--audit-log", str(audit)], policy=POLICY)
    f = Forger(d)
    # its only fd of the log is read-only
    fds = [fd for fd in os.listdir(f"/proc/{f.net}/fd")
           if os.readlink(f"/proc/{f.net}/fd/{fd}") == str(audit)]
    assert len(fds) == 1, fds
    flags = int(re.search(r"^flags:\s+(\d+)", Path(
        f"/proc/{f.net}/fdinfo/{fds[0]}").read_text(), re.M).group(1), 8)
    assert flags & os.O_ACCMODE == os.O_RDONLY
    err = steal(f.net, int(fds[0]))
    with pytest.raises(OSError):
        os.write(err, b'{"result":"ok"}\n')
    os.close(err)
    # its own events go to the device process as typed records, which it
    # words itself and checks against what it knows: a policy refusal for
    # a writer it does not know, or one its policy does not make, is not
    # written; a lease's lines are the device process's alone
    rc, _, msg, _ = f.call(audit_record(REFUSED, gpu=2,
                                        op=b"set_power_limit",
                                        code=REFUSAL_SCOPE,
                                        w_from=FROM["unix"], auth=5 << 32))
    assert rc == -1, msg
    nobody = holder(d, 65534)
    try:
        h = f.handle_of(nobody.pid)
        # the policy grants nobody gpu-control on GPU 1: no refusal there
        rc, _, msg, _ = f.call(audit_record(
            REFUSED, gpu=1, op=b"set_power_limit", code=REFUSAL_POLICY_GPU,
            w_from=FROM["unix"], auth=h))
        assert rc == -1 and "grants" in msg, msg
        # ... but not on GPU 0: a true refusal, in the device's words
        rc, _, msg, _ = f.call(audit_record(
            REFUSED, gpu=0, op=b"set_power_limit", code=REFUSAL_POLICY_GPU,
            w_from=FROM["unix"], auth=h))
        assert rc == 0, msg
        # nobody's real lease: its end is the device process's line
        rc, _, msg, _ = f.write(1, 150000, "unix", h)
        assert rc == 0, msg
    finally:
        nobody.kill()
        nobody.wait()
    wait_log(d, "event=gpu_lease_ended gpu=1 uid=65534")
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    refused = [x for x in lines if x.get("result") == "refused"]
    assert [(x["gpu"], x["identity"]["uid"]) for x in refused] == \
        [(0, 65534)], refused
    assert refused[0]["error"] == ("Forbidden: uid 65534 (nobody) holds "
                                   "scope 'gpu-control' but not on GPU 0 "
                                   "(the node policy)"), refused
    ends = [x for x in lines if x["operation"] == "lease_end"]
    assert len(ends) == 1 and ends[0]["reason"] == "process_exit", ends
    assert ends[0]["identity"]["user"] == "nobody", ends
    # a flood of events: a burst is written, the rest counted, not written
    # (512 at once, then 100 a second: src/access/warden.h), sent until
    # the device process says it dropped some; the bound is derived from
    # the time the sending took
    before = len(audit.read_text().splitlines())
    t0, sent = time.monotonic(), 0
    while "event=audit_events_dropped" not in d.logs():
        for _ in range(100):
            rc, _, msg, _ = f.call(audit_record(SUPERSEDED, gpu=3,
                                                w_from=FROM["tcp"],
                                                w_op=RESET_LOCKED_CLOCKS))
            assert rc == 0, msg
        sent += 100
        assert sent < 20000, "no event was ever dropped"
    took = time.monotonic() - t0
    written = len(audit.read_text().splitlines()) - before
    assert 400 < written <= 512 + 100 * took + 1, (written, took, sent)
    assert written < sent
    # a record that does not check out is a broken message: zeusd stops;
    # so is a lease_end, which the network process no longer sends (before,
    # a forged one of 10^9 J for a real lease was bounded, not refused)
    assert d.proc.poll() is None
    d.ready = False
    f.chan.send(audit_record(LEASE_END, gpu=1, holder_uid=65534, settings=1,
                             duration_us=1000000, energy_mj=1000,
                             energy_ok=1))
    assert d.proc.wait(timeout=20) == 1
    assert "audit kind 3" in d.logs()


def test_a_closed_connection_grants_nothing_new(node):
    """A handle outlives its connection only for the writes queued while
    it was open: a root client's handle, once its connection closed, is
    refused (before: it wrote for 120 s). The forger's handle is one the
    network process never heard of, so no PSMSG_PEER_END comes for it:
    the device process sees the close itself (unix_diag)."""
    audit = node.base / "audit.log"
    d = node(args=["--gpu-leases", "--audit-log", str(audit)], policy=POLICY)
    kinds = errno_kinds()
    f = Forger(d)
    before = limit_of(d, 3)
    root = holder(d, 0)
    try:
        h_root = f.handle_of(root.pid)
        rc, _, msg, _ = f.write(3, 160000, "unix", h_root)
        assert rc == 0, msg                 # open: root may
        assert limit_of(d, 3) == 160000
    finally:
        root.kill()
        root.wait()
    rc, kind, msg, _ = f.write(3, 170000, "unix", h_root)
    assert (rc, kind) == (-1, kinds["ZERR_FORBIDDEN"]), msg
    assert "has closed" in msg, msg
    assert limit_of(d, 3) == 160000
    assert d.post(f"/gpu/set_power_limit?gpu_ids=3&power_limit_mw={before}"
                  "&block=true").status_code == 200
    refused = [x for x in audit_refusals(audit) if x["gpu"] == 3]
    assert [x["identity"]["uid"] for x in refused] == [0], refused


def test_a_lease_of_an_exited_process_is_restored_by_the_device(node):
    """A write of a process that exited before it ran (a write queued
    before its exit; here forged, for a connection a child of it keeps
    open) runs, as the network process's queued writes do, and leaves a
    lease no pidfd watches: the device process restores it at once by
    itself. Before, it waited for the network process's restore, which a
    forger never sends: the GPU stayed changed, refused to others."""
    audit = node.base / "audit.log"
    d = node(args=["--gpu-leases", "--audit-log", str(audit)], policy=POLICY)
    f = Forger(d)
    before = limit_of(d, 1)
    p = subprocess.Popen([*as_user(65534), sys.executable, "-c", HOLD_FORK,
                          d.sock], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    word, kid = p.stdout.readline().split()
    assert word == "connected"
    try:
        h = f.handle_of(p.pid)
        p.stdin.close()                     # the peer process exits
        p.wait(timeout=20)
        rc, _, msg, _ = f.write(1, 150000, "unix", h)
        assert rc == 0, msg                 # its connection is open
        wait_until(lambda: limit_of(d, 1) == before, 10)
        wait_log(d, "event=gpu_lease_restored_by_device gpu=1")
    finally:
        os.kill(int(kid), signal.SIGKILL)
    ran = [json.loads(x) for x in audit.read_text().splitlines()
           if json.loads(x).get("operation") == "set_power_limit"]
    assert [(x["result"], x["requested"], x.get("reason")) for x in ran] \
        == [("ok", {"power_limit_mw": 150000}, None),
            ("ok", {"power_limit_mw": before}, "process_exit")], ran


def test_the_device_process_bounds_leases_per_user(node):
    """max_leased_gpus is the device process's to enforce too: forged
    writes, which the network process's own check never sees, lease at
    most that many GPUs to one user (409 for the next, audited); more
    writes on a GPU it holds are no new lease."""
    policy = "max_leased_gpus = 1\n" + POLICY
    audit = node.base / "audit.log"
    d = node(args=["--gpu-leases", "--audit-log", str(audit)], policy=policy)
    kinds = errno_kinds()
    f = Forger(d)
    other = holder(d, 4242)         # granted GPUs 1 and 2
    try:
        h = f.handle_of(other.pid)
        rc, _, msg, _ = f.write(1, 150000, "unix", h)
        assert rc == 0, msg
        rc, kind, msg, _ = f.write(2, 150000, "unix", h)
        assert (rc, kind) == (-1, kinds["ZERR_CONFLICT"]), msg
        assert "max_leased_gpus" in msg, msg
        assert limit_of(d, 2) != 150000
        # the same GPU again is no new lease
        rc, _, msg, _ = f.write(1, 160000, "unix", h)
        assert rc == 0, msg
    finally:
        other.kill()
        other.wait()
    refused = [x for x in audit_refusals(audit) if x["gpu"] == 2]
    assert [x["identity"]["uid"] for x in refused] == [4242], refused
