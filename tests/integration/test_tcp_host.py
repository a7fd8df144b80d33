"""The Host check on TCP against DNS rebinding (issue 30, item 8b; its
scope, issue 42, item 2): black-box, the real binary on a TCP port. A page
on a name the attacker points at 127.0.0.1 makes the browser talk to zeusd
as to its own origin, sending that name in Host: such requests get 421
Misdirected Request. Served: an IP literal equal to the address the
connection came to, `localhost` on a loopback address, or a name of
--tcp-allowed-hosts. The check applies only where rebinding can reach
zeusd unauthenticated: without --signing-key-path, on a connection that
came in over loopback. With a key, or on a routable address, any Host is
served, as by the upstream daemon.
"""
import ctypes
import os
import shutil
import socket
import subprocess

import jwt
import pytest

from conftest import Zeusd, raw_request, run_zeusd
from simutil import SimLog

SET_PL = "nvmlDeviceSetPowerManagementLimit"


def ask(d, host, target="/discover", method="GET"):
    """(status, body) of one request with exactly this Host header."""
    status, _, body = raw_request(d, target, method, timeout=10, host=host,
                                  headers=("Content-Length: 0",))
    return status, body.decode(errors="replace")


def tcp(tmp_path, host="127.0.0.1", allowed=None, env=None, args=()):
    args = (["--tcp-allowed-hosts", allowed] if allowed else []) + list(args)
    return Zeusd(tmp_path, "tcp", args, env=env, tcp_host=host,
                 allowed_hosts=None).wait_ready()


def test_rebinding_names_refused_addresses_served(tmp_path):
    sim = SimLog(tmp_path / "sim.log")
    d = tcp(tmp_path, env={"ZEUS_SIM_LOG": str(sim.path)})
    try:
        p = d.port
        for ok in [f"127.0.0.1:{p}", "127.0.0.1", f"localhost:{p}",
                   "localhost", "LocalHost.", f"127.0.0.1:{p + 1}"]:
            assert ask(d, ok)[0] == 200, ok
        for bad in [f"attacker.example:{p}", "attacker.example",
                    f"127.0.0.2:{p}", f"[::1]:{p}", "127.1",
                    f"localhost.attacker.example:{p}", "",
                    f"127.0.0.1:{p}:{p}", "127.0.0.1:x", "[127.0.0.1]"]:
            st, body = ask(d, bad)
            assert st == 421, (bad, st, body)
            assert "Host header" in body and "--tcp-allowed-hosts" in body
        # a write from a rebound page never reaches the GPU
        mark = sim.mark()
        st, _ = ask(d, f"rebind.attacker.example:{p}",
                    "/gpu/set_power_limit?gpu_ids=0&block=true"
                    "&power_limit_mw=200000", "POST")
        assert st == 421
        assert sim.calls(SET_PL, since=mark) == []
        assert "event=host_refused" in d.logs()
        # the client the tests use (httpx: Host 127.0.0.1:PORT)
        assert d.get("/discover").status_code == 200
    finally:
        assert d.stop() == 0, d.logs()


def test_allowed_hosts_option(tmp_path):
    d = tcp(tmp_path, allowed="gpu-node.example,[fe80::1],10.9.8.7")
    try:
        p = d.port
        for ok in [f"gpu-node.example:{p}", "GPU-NODE.EXAMPLE.",
                   "[fe80::1]:4938", "10.9.8.7", "localhost", "127.0.0.1"]:
            assert ask(d, ok)[0] == 200, ok
        for bad in ["other.example", "node.example", "gpu-node.example.x",
                    "10.9.8.8"]:
            assert ask(d, bad)[0] == 421, bad
    finally:
        assert d.stop() == 0, d.logs()


def has_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback")
def test_ipv6_bound_address(tmp_path):
    d = tcp(tmp_path, host="::1")
    try:
        p = d.port
        for ok in [f"[::1]:{p}", "[::1]", "[0:0::1]", f"localhost:{p}"]:
            assert ask(d, ok)[0] == 200, ok
        for bad in [f"127.0.0.1:{p}", "::1", "[::2]", "evil.example"]:
            assert ask(d, bad)[0] == 421, bad
    finally:
        assert d.stop() == 0, d.logs()


def test_unix_socket_has_no_host_check(start):
    d = start("uds")
    st, _ = ask(d, "attacker.example")
    assert st == 200


@pytest.mark.parametrize("value", ["", "a b", "evil,", "x/y", "[::1",
                                   "[not-v6]", "a" * 254])
def test_bad_allowed_hosts_refused_at_start(value):
    r = run_zeusd("serve", "--simulate", "--mode", "tcp",
                  "--tcp-allowed-hosts", value)
    assert r.returncode != 0
    assert "--tcp-allowed-hosts" in r.stderr, r.stderr


def test_this_nodes_own_name_is_served(tmp_path):
    """A client that reaches the node by its own name (gethostname, and
    its first label) needs no --tcp-allowed-hosts; other names still get
    421, and the listed ones are added to the node's."""
    me = socket.gethostname()
    d = tcp(tmp_path, allowed="zeusd.example")
    try:
        p = d.port
        for ok in [me, f"{me}:{p}", me.upper(), me.split(".")[0],
                   "zeusd.example"]:
            assert ask(d, ok)[0] == 200, ok
        for bad in [f"{me}.attacker.example", f"x{me}", f"{me}x"]:
            assert ask(d, bad)[0] == 421, bad
        assert f"names=\"zeusd.example,{me}" in d.logs()
    finally:
        d.stop()



# Names a real client may use for a zeusd it reaches over the network (a
# DNS alias, a container's name for its host, an SSH tunnel's local end),
# none of them this node's name, an address of it or --tcp-allowed-hosts.
FOREIGN = ["gpu.example.org", "gpu-7.cluster.example.", "host.docker.internal",
           "zeusd-svc", "localhost:9999", "attacker.example:4938"]


def test_with_a_key_any_host_is_served(tmp_path):
    """With --signing-key-path a rebinding page has no token to present,
    so the Host check is off, even on loopback: a foreign Host is served,
    with the token check as for any other request."""
    key = tmp_path / "key"
    key.write_bytes(b"host check key\n")
    tok = jwt.encode({"sub": "alice", "scopes": ["gpu-read"]},
                     key.read_bytes(), algorithm="HS256")
    d = tcp(tmp_path, args=["--signing-key-path", str(key)])
    try:
        for host in FOREIGN + [f"127.0.0.2:{d.port}"]:
            st, body = ask(d, host, "/gpu/get_power")
            assert st == 401, (host, st, body)
            status, _, body = raw_request(
                d, "/gpu/get_power", timeout=10, host=host,
                headers=(f"Authorization: Bearer {tok}",))
            assert status == 200, (host, status, body)
            assert ask(d, host, "/discover")[0] == 200, host
    finally:
        assert d.stop() == 0, d.logs()
    # read once stopped: the network process's lines are relayed
    # (logrelay.c) and may come after the reply
    assert "event=host_refused" not in d.logs()
    assert "event=tcp_host_check check=off" in d.logs()


CLONE_NEWNET = 0x40000000
NS_V4 = "10.200.0.1"        # on the namespace's own lo: nothing leaves it
NS_V6 = "fd00:200::1"
IP = shutil.which("ip")
UNSHARE = shutil.which("unshare")


def _setns(fd):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def can_make_netns():
    if os.geteuid() != 0 or IP is None or UNSHARE is None:
        return False
    return subprocess.run([UNSHARE, "--net", IP, "link", "set", "lo", "up"],
                          stderr=subprocess.DEVNULL).returncode == 0


class NetnsZeusd(Zeusd):
    """zeusd in a network namespace of its own (unshare --net: it goes when
    zeusd and its children have exited), whose lo is up and carries NS_V4
    or NS_V6 (the family of `to`) besides the loopback addresses. The
    test's sockets are made in that namespace and connect to `self.to`;
    nothing is ever sent from the test's own namespace."""

    def __init__(self, tmp, bind, to, args=()):
        add = f"-6 addr add {NS_V6}/128" if ":" in to else \
            f"addr add {NS_V4}/32"
        setup = (f"{IP} link set lo up && {IP} {add} dev lo && "
                 "exec \"$@\"")
        super().__init__(tmp, "tcp", args, tcp_host=bind, allowed_hosts=None,
                         wrapper=[UNSHARE, "--net", "sh", "-c", setup, "sh"])
        self.to = to

    def raw_socket(self, timeout=None):
        mine = os.open("/proc/self/ns/net", os.O_RDONLY)
        try:
            theirs = os.open(f"/proc/{self.proc.pid}/ns/net", os.O_RDONLY)
        except OSError:
            os.close(mine)
            raise
        try:
            # before unshare has run, the pid is still in the test's own
            # namespace, where NS_V4 would be routed off the machine
            if os.fstat(theirs).st_ino == os.fstat(mine).st_ino:
                raise ConnectionRefusedError("zeusd not in its namespace yet")
            _setns(theirs)
            try:
                s = socket.socket(socket.AF_INET6 if ":" in self.to
                                  else socket.AF_INET)
            finally:
                _setns(mine)
        finally:
            os.close(theirs)
            os.close(mine)
        s.settimeout(timeout)
        try:
            s.connect((self.to, self.port))
        except OSError:
            s.close()
            raise
        return s


@pytest.mark.skipif(not can_make_netns(),
                    reason="needs root, ip and unshare --net")
@pytest.mark.parametrize("bind,loopback,routable", [
    ("0.0.0.0", "127.0.0.1", NS_V4),
    pytest.param("::", "::1", NS_V6, marks=pytest.mark.skipif(
        not has_ipv6_loopback(), reason="no IPv6 loopback"))])
def test_no_key_host_checked_on_loopback_only(tmp_path, bind, loopback,
                                              routable):
    """Without a key, on one zeusd bound to the wildcard address of its own
    network namespace: over loopback a foreign Host is 421 (a browser on
    the node, DNS rebinding), over an address that is not loopback it is
    served, as it is to a client reaching zeusd by an alias or a tunnel."""
    d = NetnsZeusd(tmp_path, bind, routable).wait_ready()
    try:
        p = d.port
        lit = f"[{routable}]" if ":" in routable else routable
        for host in FOREIGN + [f"{lit}:{p}", "127.0.0.2"]:
            st, body = ask(d, host)
            assert st == 200, (routable, host, st, body)
        st, body = ask(d, FOREIGN[0], "/gpu/get_power")
        assert st == 200, body
        d.to = loopback
        lit = f"[{loopback}]" if ":" in loopback else loopback
        for host in [f"{lit}:{p}", f"localhost:{p}"]:
            assert ask(d, host)[0] == 200, (loopback, host)
        refused = [h for h in FOREIGN if not h.startswith("localhost")] + \
            [lit.replace(loopback, routable)]
        for host in refused:
            st, body = ask(d, host)
            assert st == 421, (loopback, host, st, body)
    finally:
        assert d.stop() == 0, d.logs()
    # read once stopped: the network process's lines are relayed
    # (logrelay.c) and may come after the reply; only the loopback
    # requests were refused
    assert d.logs().count("event=host_refused") == len(refused), d.logs()
    assert "event=tcp_host_check check=loopback" in d.logs()
