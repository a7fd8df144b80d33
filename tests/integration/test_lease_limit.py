"""The node policy's max_leased_gpus (issue 42, 4d): one user cannot hold
every GPU of a shared node for as long as one of its processes lives. With
`max_leased_gpus = 2`, a user's writes lease two GPUs and the write that
would lease a third is refused (409, audited, naming the limit) until one
of its leases ends; root and GPUs the user already holds are not limited.
"""
import json
import os
import sys

import pytest

from conftest import linux_only
from zeushelp import run_as

POLICY = """
max_leased_gpus = 2

[[grant]]
users = ["nobody"]
scopes = ["gpu-read", "gpu-control"]
"""

# One process, as the lease's holder: each argument a request
# (METHOD:PATH), on a connection of its own; prints [status, body] each.
CLIENT = """
import json, socket, sys
out = []
for arg in sys.argv[2:]:
    method, _, path = arg.partition(":")
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(f"{method} {path} HTTP/1.1\\r\\nHost: z\\r\\n"
              "Content-Length: 0\\r\\nConnection: close\\r\\n\\r\\n".encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\\r\\n\\r\\n")
    out.append([int(head.split(b" ")[1]), body.decode()])
print(json.dumps(out))
"""


def limit(gpu, mw=250000):
    return (f"POST:/gpu/set_power_limit?gpu_ids={gpu}&block=true"
            f"&power_limit_mw={mw}")


def ask_as(uid, d, *reqs):
    """The answers to `reqs`, sent by one client running as uid."""
    r = run_as(uid, sys.executable, "-c", CLIENT, d.sock, *reqs)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@linux_only("unix-socket")
def test_a_user_leases_at_most_max_leased_gpus(start_public):
    base = start_public.base
    (base / "policy.toml").write_text(POLICY)
    os.chmod(base / "policy.toml", 0o644)
    audit = base / "audit.jsonl"
    d = start_public(["--gpu-leases", "--policy-file",
                      str(base / "policy.toml"), "--audit-log", str(audit)])
    got = ask_as(65534, d, limit(0), limit(1), limit(1, 200000), limit(2),
                 "POST:/gpu/release?gpu_ids=0", limit(2))
    assert [s for s, _ in got] == [200, 200, 200, 409, 200, 200], got
    assert "the node policy allows 2 at once (max_leased_gpus)" in got[3][1]
    assert "uid 65534 holds leases on 2 GPUs" in got[3][1]
    # refused before anything ran, and audited
    refused = [json.loads(x) for x in audit.read_text().splitlines()
               if '"refused"' in x]
    assert any(r.get("gpu") == 2 and "max_leased_gpus" in
               json.dumps(r) for r in refused), refused
    # root is never limited
    got = ask_as(0, d, limit(3))
    assert got[0][0] == 200, got


@pytest.mark.parametrize("bad", ["0", "257", '"2"'])
def test_max_leased_gpus_must_be_a_count(start_public, bad):
    base = start_public.base
    (base / "policy.toml").write_text(f"max_leased_gpus = {bad}\n" + POLICY
                                      .replace("max_leased_gpus = 2\n", ""))
    os.chmod(base / "policy.toml", 0o644)
    d = start_public(["--policy-file", str(base / "policy.toml")],
                     ready=False)
    assert d.proc.wait(20) != 0
    assert "max_leased_gpus must be an integer from 1 to 256" in d.logs()
