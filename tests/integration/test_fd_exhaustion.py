"""No local user can stop zeusd by making it run out of descriptors (issue
42, 4a).

The device process kept one pidfd per connection of a non-root peer, while
the connection was open and 120 s after it closed: a few clients opening
one-shot connections (a malformed write is enough: every Unix-socket write
asks who the peer is) filled its descriptor table, the next socket handed
over arrived without its descriptor, and the device process took its own
exhaustion for a hostile message and exited 1.

Now a peer costs the device process no descriptor beyond the moment it is
looked at (a lease opens one when a write runs), and a socket it could not
take is answered 503 for that request alone.
"""
import os
import resource
import subprocess
import sys
from pathlib import Path


from conftest import linux_only
from zeushelp import as_user, device_pid, request_as

HERE = Path(__file__).resolve().parent
NOBODY = 65534
DAEMON = 1              # another ordinary user (Debian's `daemon`)

# One client: `count` one-shot connections, each a malformed write; prints
# how many got an answer. Standard library only: it runs as another user.
CHURN = """
import socket, sys
path, count = sys.argv[1], int(sys.argv[2])
answered = 0
for _ in range(count):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        s.sendall(b"POST /gpu/set_power_limit?gpu_ids=0&block=true"
                  b"&power_limit_mw=abc HTTP/1.1\\r\\nHost: z\\r\\n"
                  b"Content-Length: 0\\r\\nConnection: close\\r\\n\\r\\n")
        if s.recv(64).startswith(b"HTTP/1.1 "):
            answered += 1
    except OSError:
        pass
    finally:
        s.close()
print(answered)
"""

# One write as this user: prints its status and body.
def write_as(uid, d, mw):
    return request_as(d, uid, uid, "POST", "/gpu/set_power_limit?gpu_ids=0"
                      f"&block=true&power_limit_mw={mw}")


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def lowest_free_fd(pid):
    used = {int(f) for f in os.listdir(f"/proc/{pid}/fd")}
    return min(set(range(len(used) + 1)) - used)


@linux_only("unix-socket")
def test_connection_churn_under_a_low_fd_limit(start_public):
    """Four users' worth of clients churn 1,600 one-shot connections at a
    zeusd whose descriptor limit is 512: before, the device process held a
    pidfd for each for 120 s and zeusd exited 1 after about 500; now it
    stays up, its descriptors do not grow with the connections, and
    another user's write is served (and takes its lease). The network
    process sizes its connection limit from that descriptor limit (a
    socket each: since the lease record is the device process's alone,
    the network process keeps no pidfd per connection) and says so."""
    def nofile_512():
        resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))
    d = start_public(["--gpu-leases"], preexec=nofile_512)
    dev = device_pid(d)
    before = open_fds(dev)
    churners = [subprocess.Popen(
        [*as_user(NOBODY), sys.executable, "-c", CHURN, d.sock, "400"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)]
    answered = 0
    for p in churners:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        answered += int(out)
    assert d.proc.poll() is None, d.logs()
    assert answered == 1600, d.logs()
    # the peers closed: nothing of theirs stays open in the device process
    # (a few descriptors may come and go with its threads' work)
    assert open_fds(dev) <= before + 8, (before, open_fds(dev))
    status, body = write_as(DAEMON, d, 250000)
    assert status == 200, body
    assert "event=gpu_lease_taken gpu=0 uid=1" in d.logs()
    assert "network_process_died" not in d.logs()
    assert "privsep_message_refused" not in d.logs()
    # 512 - 256 kept, one a connection, less libmicrohttpd's 64 reserved
    assert "event=connection_limit_lowered limit=192 fd_limit=512" \
        in d.logs()


@linux_only("unix-socket")
def test_device_process_out_of_descriptors_answers_busy(start_public):
    """The device process's descriptor limit lowered under it (prlimit on
    the running process) to what it has open: a new connection's socket
    cannot reach it. That request gets 503 and zeusd keeps running
    (before: `privsep_message_refused reason="more than one descriptor,
    or not SCM_RIGHTS"` and exit 1); once descriptors are free again the
    same user's write is served."""
    d = start_public(["--gpu-leases"])
    dev = device_pid(d)
    soft, hard = resource.prlimit(dev, resource.RLIMIT_NOFILE)
    resource.prlimit(dev, resource.RLIMIT_NOFILE,
                     (lowest_free_fd(dev), hard))
    try:
        status, body = write_as(NOBODY, d, 250000)
    finally:
        resource.prlimit(dev, resource.RLIMIT_NOFILE, (soft, hard))
    assert status == 503, body
    assert "no descriptor free" in body, body
    assert d.proc.poll() is None, d.logs()
    status, body = write_as(NOBODY, d, 250000)
    assert status == 200, body
    assert "event=gpu_lease_taken gpu=0 uid=65534" in d.logs()
    assert "privsep_message_refused" not in d.logs()
