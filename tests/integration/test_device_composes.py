"""What a taken-over network process cannot make systemd or the log say
(issue 42, item 4d; docs/security.md, "What a taken-over network process
can do"): the device process composes every text it sends systemd, logs a
reload's result only for a reload it sent, and stamps each relayed stderr
line with its own clock. The network process is played as in
test_device_decides.py: as root the test takes its descriptors (its end of
the control channel, its stderr) with pidfd_getfd and writes forgeries.
"""
import datetime
import os
import re
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import ZEUSD, Zeusd
from zeushelp import Notify, network_pid, peers, steal, unix_sockets

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="needs root for pidfd_getfd")

ROOT = Path(__file__).resolve().parents[2]
PSCTL_MAGIC = 0x7a706331
PSCTL_NOTIFY, PSCTL_RELOADED = 1, 2
PSCTL_N_READY = 1
RLO, PDF = "\u202e", "\u202c"


def lacks_size():
    """sizeof(struct psgpu_lacks) (src/privsep/remote_gpu.h), from the
    headers so that it cannot drift."""
    gpu = (ROOT / "src/devices/gpu.h").read_text()

    def count(enum, last):
        body = gpu[gpu.index(f"enum {enum} {{"):]
        names = re.findall(r"^\s*(GPU_[A-Z_]+)", body[:body.index("};")],
                           re.M)
        return names.index(last)

    per = int(re.search(r"#define PSGPU_LACKS_MAX (\d+)", (
        ROOT / "src/privsep/remote_gpu.h").read_text()).group(1))
    return (count("gpu_read_op", "GPU_READ_OP_COUNT") +
            count("gpu_write_op", "GPU_WRITE_OP_COUNT")) * per


def control_message(kind, value, text=None):
    """A control message as the network process sends it (struct psctl_msg,
    src/privsep/control.h); with `text`, as it did before 4d, when a
    256-byte text followed the header and the device process passed a
    notification's text to systemd as it came."""
    head = struct.pack("<IIII", PSCTL_MAGIC, kind, 0, value)
    if text is not None:
        head += struct.pack("256s", text)
    return head + bytes(lacks_size())


def control_channel(d):
    """The network process's end of the control channel: of its seqpacket
    sockets, the one whose peer in the device process was made last (the
    control channel is made after the device channels; split.c)."""
    net = network_pid(d)
    socks = unix_sockets(net)
    seq = [fd for fd, (_, typ, _, _) in socks.items() if typ == 5]
    dev_fd_of = {v[0]: fd for fd, v in unix_sockets(d.proc.pid).items()}
    peer_of = peers(net)
    ctl = max(seq, key=lambda fd: dev_fd_of.get(peer_of.get(socks[fd][0]),
                                                -1))
    return socket.socket(fileno=steal(net, ctl))


def stopped(d, timeout=20):
    """zeusd's exit status once the device process stopped it (it kills the
    network process on a message that does not check out)."""
    try:
        return d.proc.wait(timeout)
    finally:
        d.stop()


def test_a_forged_status_text_never_reaches_systemd(tmp_path):
    n = Notify(tmp_path)
    d = Zeusd(tmp_path, env={"NOTIFY_SOCKET": n.path})
    try:
        d.wait_ready()
        serving = n.wait_for(lambda m: m.startswith("STATUS=Serving"))
        ctl = control_channel(d)
        forged = f"STATUS=Serving {RLO}0 GPUs{PDF} forged"
        ctl.send(control_message(PSCTL_NOTIFY, 0, forged.encode()))
        n.drain(2)
        assert not [m for m in n.msgs if "plugh" in m or RLO in m], n.msgs
        # the only status the network process's READY brought is the
        # device process's own, once
        assert [m for m in n.msgs if m.startswith("STATUS=")] == [serving]
        assert "0 GPUs" not in serving and "4 GPUs" in serving
        # a message that does not check out: the network process is killed
        assert stopped(d) == 1, d.logs()
        assert "event=network_process_killed" in d.logs()
        assert "plugh" not in d.logs()
    finally:
        if d.proc.poll() is None:
            d.stop()
        n.close()


@pytest.mark.parametrize("layout", ["with_text", "now"])
def test_a_forged_reload_result_writes_no_line(tmp_path, layout):
    n = Notify(tmp_path)
    d = Zeusd(tmp_path, env={"NOTIFY_SOCKET": n.path})
    try:
        d.wait_ready()
        n.wait_for(lambda m: m.startswith("STATUS=Serving"))
        # a real reload: its result is logged once and told systemd
        d.proc.send_signal(signal.SIGHUP)
        n.wait_for(lambda m: m.startswith("STATUS=Reloaded"))
        deadline = time.monotonic() + 10
        while "event=reloaded " not in d.logs():
            assert time.monotonic() < deadline, d.logs()
            time.sleep(0.05)
        ctl = control_channel(d)
        if layout == "with_text":
            msg = control_message(PSCTL_RELOADED, 7,
                                  b"event=plugh_result " + RLO.encode())
        else:
            msg = control_message(PSCTL_RELOADED, 0)
        ctl.send(msg)
        n.drain(2)
        logs = d.logs()
        # no second result: nothing was reloaded
        assert logs.count("event=reloaded ") == 1, logs
        assert "failed=7" not in logs
        assert "plugh_result" not in logs
        assert len([m for m in n.msgs if m.startswith("STATUS=Reloaded")
                    ]) == 1, n.msgs
        assert stopped(d) == 1, d.logs()
        if layout == "now":
            # well formed, and answering no reload
            assert 'reason="a reload result without a reload"' in d.logs()
    finally:
        if d.proc.poll() is None:
            d.stop()
        n.close()


def relayed(d, event, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        got = [x for x in d.logs().splitlines() if f"event={event}" in x]
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def stamp(line):
    m = re.match(r"ts=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z ", line)
    assert m, line
    return datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f"
                                      ).replace(tzinfo=datetime.timezone.utc)


def test_a_relayed_line_bears_the_device_process_time(start):
    d = start()
    err = steal(network_pid(d), 2)
    before = datetime.datetime.now(datetime.timezone.utc)
    try:
        os.write(err, b"ts=2000-01-01T00:00:00.000Z level=error "
                 b"event=forged_a\n"
                 b"<3>ts=2000-01-01T00:00:01.000Z level=error "
                 b"event=forged_b\n"
                 b"ts=2000-01-01T00:00:02.000Z ts=1999-12-31T23:59:59.000Z "
                 b"level=error event=forged_c\n")
    finally:
        os.close(err)
    assert relayed(d, "forged_c"), d.logs()[-3000:]
    after = datetime.datetime.now(datetime.timezone.utc)
    lines = [x for x in d.logs().splitlines() if "event=forged_" in x]
    assert len(lines) == 3, d.logs()[-3000:]
    slack = datetime.timedelta(seconds=1)
    for line in lines:
        # the device process's clock first, the tag second, no other time
        assert before - slack <= stamp(line) <= after + slack, line
        assert line.split(" ")[1] == "proc=network", line
        assert "2000-01-01" not in line and "1999-12-31" not in line, line
    assert lines[0].endswith(" proc=network level=error event=forged_a")
    assert lines[1].endswith(" proc=network <3>level=error event=forged_b")
    assert lines[2].endswith(" proc=network level=error event=forged_c")


def test_in_the_journal_format_a_relayed_line_has_no_time(tmp_path):
    """journald stamps each line itself: a relayed line gets the tag after
    its "<P>", and keeps no ts= of its own (zlog.h, logrelay.h)."""
    log = tmp_path / "stderr.log"
    f = open(log, "wb")
    st = os.fstat(f.fileno())
    env = dict(os.environ, ZEUSD_LOG="info",
               JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
    p = subprocess.Popen([str(ZEUSD), "serve", "--simulate", "--socket-path",
                          str(tmp_path / "run" / "zeusd.sock")],
                         stdout=f, stderr=f, env=env)
    try:
        deadline = time.monotonic() + 15
        while b"event=listening" not in log.read_bytes():
            assert p.poll() is None and time.monotonic() < deadline, \
                log.read_text()
            time.sleep(0.05)
        err = steal(network_pid(SimpleNamespace(proc=p)), 2)
        try:
            os.write(err, b"ts=2000-01-01T00:00:00.000Z level=error "
                     b"event=forged_a\n"
                     b"<3>ts=2000-01-01T00:00:01.000Z level=error "
                     b"event=forged_b\n")
        finally:
            os.close(err)
        deadline = time.monotonic() + 10
        while b"event=forged_b" not in log.read_bytes():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(15)
        f.close()
    assert rc == 0, log.read_text()
    lines = [x for x in log.read_text().splitlines() if "event=forged_" in x]
    assert lines == ["proc=network level=error event=forged_a",
                     "<3>proc=network level=error event=forged_b"], lines
