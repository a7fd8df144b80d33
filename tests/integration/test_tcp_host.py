"""The Host check on TCP against DNS rebinding (issue 30, item 8b):
black-box, the real binary on a TCP port. A page on a name the attacker
points at 127.0.0.1 makes the browser talk to zeusd as to its own origin,
sending that name in Host: such requests get 421 Misdirected Request.
Served: an IP literal equal to the address the connection came to,
`localhost` on a loopback address, or a name of --tcp-allowed-hosts.
"""
import socket

import pytest

from conftest import Zeusd, raw_request, run_zeusd
from simutil import SimLog

SET_PL = "nvmlDeviceSetPowerManagementLimit"


def ask(d, host, target="/discover", method="GET"):
    """(status, body) of one request with exactly this Host header."""
    status, _, body = raw_request(d, target, method, timeout=10, host=host,
                                  headers=("Content-Length: 0",))
    return status, body.decode(errors="replace")


def tcp(tmp_path, host="127.0.0.1", allowed=None, env=None):
    args = ["--tcp-allowed-hosts", allowed] if allowed else []
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

