"""Black-box tests of JWT authentication through the real daemon: the order
of checks, every route under every combination of scopes, path spellings
that try to dodge a scope, bearer header variants, /auth/whoami, and the
user in the access log."""
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import jwt
import pytest

from conftest import WINE_RUN, linux_only, raw_request
from zeushelp import token

GROUPS = ["gpu-control", "gpu-read", "cpu-read", "metrics"]

# (method, path-with-query, required scope or None for open routes)
ROUTES = [
    ("POST", "/gpu/set_power_limit?gpu_ids=0&block=true&power_limit_mw=300000",
     "gpu-control"),
    ("POST", "/gpu/set_persistence_mode?gpu_ids=0&block=true&enabled=true",
     "gpu-control"),
    ("POST", "/gpu/set_gpu_locked_clocks?gpu_ids=0&block=true"
     "&min_clock_mhz=500&max_clock_mhz=1000", "gpu-control"),
    ("POST", "/gpu/reset_gpu_locked_clocks?gpu_ids=0&block=true",
     "gpu-control"),
    ("POST", "/gpu/set_mem_locked_clocks?gpu_ids=0&block=true"
     "&min_clock_mhz=500&max_clock_mhz=1000", "gpu-control"),
    ("POST", "/gpu/reset_mem_locked_clocks?gpu_ids=0&block=true",
     "gpu-control"),
    ("POST", "/gpu/reset_locked_clocks?gpu_ids=0&block=true", "gpu-control"),
    ("GET", "/gpu/get_power", "gpu-read"),
    ("GET", "/gpu/get_cumulative_energy", "gpu-read"),
    ("GET", "/gpu/get_power_limit", "gpu-read"),
    ("GET", "/gpu/get_power_limit_constraints", "gpu-read"),
    ("GET", "/gpu/get_persistence_mode", "gpu-read"),
    ("GET", "/cpu/get_cumulative_energy?cpu=true&dram=true", "cpu-read"),
    ("GET", "/cpu/get_power", "cpu-read"),
    ("GET", "/metrics", "metrics"),
    ("GET", "/discover", None),
    ("GET", "/time", None),
]
# cpu-read (RAPL) is Linux-only: zeusd.exe (ZEUSD_WINE=1) has no /cpu routes
RAPL = linux_only("rapl")
ROUTE_PARAMS = [pytest.param(*r, marks=RAPL) if r[2] == "cpu-read" else r
                for r in ROUTES]
SERVED = [r for r in ROUTES if not (WINE_RUN and r[2] == "cpu-read")]


@pytest.fixture
def key(tmp_path):
    path = tmp_path / "key"
    path.write_bytes(b"s3cret signing key\n")   # the newline is key material
    return path


@pytest.fixture
def authd(start, mode, key):
    return start(mode, args=["--signing-key-path", str(key)])


def call(d, method, path, tok=None, header=None):
    headers = {}
    if tok is not None:
        headers["Authorization"] = f"Bearer {tok}"
    if header is not None:
        headers["Authorization"] = header
    return d.client.request(method, path, headers=headers)


def test_discover_reports_auth(authd):
    assert authd.get("/discover").json()["auth_required"] is True


@pytest.mark.parametrize("method,path,scope", ROUTE_PARAMS)
def test_missing_token_401_except_open_routes(authd, method, path, scope):
    r = call(authd, method, path)
    if scope is None:
        assert r.status_code == 200
    else:
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == 'Bearer realm="zeusd"'
        assert "error" in r.json()


def test_every_route_under_every_scope_combination(authd, key):
    for n in range(len(GROUPS) + 1):
        for scopes in itertools.combinations(GROUPS, n):
            tok = token(key, scopes=scopes)
            for method, path, scope in SERVED:
                r = call(authd, method, path, tok)
                want = 200 if scope is None or scope in scopes else 403
                assert r.status_code == want, (scopes, path, r.text)
                if want == 403:
                    msg = r.json()["error"]
                    assert "'alice'" in msg and f"'{scope}'" in msg, msg
                    for s in scopes:
                        assert s in msg


def test_forbidden_names_user_scope_and_token_scopes(authd, key):
    r = call(authd, "POST", ROUTES[0][1], token(key, "bob", ["gpu-read"]))
    assert r.status_code == 403
    assert r.json()["error"] == ("User 'bob' does not have the 'gpu-control' "
                                 "scope (token scopes: gpu-read).")


def test_whoami(authd, key):
    exp = int(time.time()) + 3600
    r = call(authd, "GET", "/auth/whoami", token(key, "carol", ["cpu-read"],
                                                exp=exp))
    assert r.status_code == 200
    assert r.json() == {"sub": "carol", "scopes": ["cpu-read"], "exp": exp}
    r = call(authd, "GET", "/auth/whoami", token(key, "dave", []))
    assert r.json() == {"sub": "dave", "scopes": []}
    assert call(authd, "GET", "/auth/whoami").status_code == 401


def test_unknown_path_needs_valid_token_then_404(authd, key):
    r = call(authd, "GET", "/nope")
    assert r.status_code == 401
    r = call(authd, "GET", "/nope", token(key, scopes=[]))
    assert r.status_code == 404


def test_expired_and_leeway(authd, key):
    r = call(authd, "GET", "/gpu/get_power",
             token(key, exp=int(time.time()) - 120))
    assert r.status_code == 401
    assert r.json()["error"] == "Token has expired."
    r = call(authd, "GET", "/gpu/get_power",
             token(key, exp=int(time.time()) - 30))
    assert r.status_code == 200


@pytest.mark.parametrize("bad", ["garbage", "a.b.c", "", "x" * 9000],
                         ids=["garbage", "dots", "empty", "oversized"])
def test_bad_tokens_401(authd, bad):
    status, head, _ = raw_request(authd, "/gpu/get_power",
                                  headers=[f"Authorization: Bearer {bad}"])
    assert status == 401
    assert 'WWW-Authenticate: Bearer realm="zeusd"' in head


def test_header_beyond_memory_limit_refused(authd):
    try:
        status, _, _ = raw_request(authd, "/gpu/get_power", headers=[
            "Authorization: Bearer " + "x" * 40000])
    except ConnectionResetError:
        status = 0      # refused by the HTTP layer before any answer
    assert status in (0, 400, 413, 431)
    assert authd.get("/time").status_code == 200


def test_wrong_key_and_algorithms_401(authd, key):
    claims = {"sub": "eve", "scopes": GROUPS}
    for tok in [
        jwt.encode(claims, b"other key", algorithm="HS256"),
        jwt.encode(claims, key.read_bytes(), algorithm="HS384"),
        jwt.encode(claims, key.read_bytes(), algorithm="HS512"),
        jwt.encode(claims, None, algorithm="none"),
        jwt.encode(claims, key.read_bytes().rstrip(b"\n"), algorithm="HS256"),
    ]:
        r = call(authd, "POST", ROUTES[0][1], tok)
        assert r.status_code == 401, tok


@pytest.mark.parametrize("claims", [
    {"sub": "x", "scopes": "gpu-read"},
    {"sub": "x", "scopes": ["gpu-read", "root"]},
    {"scopes": ["gpu-read"]},
    {"sub": 5, "scopes": ["gpu-read"]},
])
def test_bad_claims_401(authd, key, claims):
    tok = jwt.encode(claims, key.read_bytes(), algorithm="HS256")
    assert call(authd, "GET", "/gpu/get_power", tok).status_code == 401


@pytest.mark.parametrize("header,ok", [
    ("Bearer {t}", True), ("bearer {t}", True), ("BEARER {t}", True),
    ("Bearer   {t}", True), ("Bearer\t{t}", True),
    ("Basic {t}", False), ("Bearer", False), ("Bearer{t}", False),
    ("{t}", False), ("Bearer {t} extra", False),
])
def test_bearer_header_variants(authd, key, header, ok):
    h = header.format(t=token(key))
    status, head, _ = raw_request(authd, "/gpu/get_power",
                                  headers=[f"Authorization: {h}"])
    assert status == (200 if ok else 401), (header, head)


@pytest.mark.parametrize("spelling", [
    "/gpu/get_power/../set_power_limit",
    "//gpu/set_power_limit",
    "/gpu/./set_power_limit",
    "/gpu/set_power_limit/",
    "/gpu%2fset_power_limit",
    "/gpu/%73et_power_limit",
    "/cpu/../gpu/set_power_limit",
    "/time/../gpu/set_power_limit",
])
def test_path_spellings_cannot_dodge_scope(authd, key, spelling):
    q = "?gpu_ids=0&block=true&power_limit_mw=300000"
    read_only = token(key, scopes=["gpu-read", "cpu-read"])
    status, _, body = raw_request(authd, spelling + q, method="POST",
                                  headers=[f"Authorization: Bearer {read_only}"])
    assert status == 403, body
    status, _, body = raw_request(authd, spelling + q, method="POST",
                                  headers=[f"Authorization: Bearer {token(key)}"])
    assert status == 200, body


def test_case_spelling_is_not_a_route(authd, key):
    status, _, _ = raw_request(
        authd, "/GPU/set_power_limit?gpu_ids=0&block=true&power_limit_mw=1",
        method="POST", headers=[f"Authorization: Bearer {token(key)}"])
    assert status == 404


def test_disabled_group_404_before_auth(start, key):
    d = start(args=["--signing-key-path", str(key), "--enable", "gpu-read"])
    r = call(d, "POST", ROUTES[0][1])
    assert r.status_code == 404
    assert "not enabled" in r.json()["error"]


def test_user_is_logged(authd, key):
    call(authd, "GET", "/gpu/get_power", token(key, "frank"))
    time.sleep(0.1)
    assert 'path="/gpu/get_power" status=200' in authd.logs()
    assert 'user="frank"' in authd.logs()


def test_tokens_from_zeusd_token_issue_work(start, key):
    from conftest import run_zeusd
    r = run_zeusd("token", "issue", "--signing-key-path", str(key),
                  "--user", "gina", "--scope", "gpu-read", "--expires", "1h")
    assert r.returncode == 0, r.stderr
    d = start(args=["--signing-key-path", str(key)])
    tok = r.stdout.strip()
    assert call(d, "GET", "/gpu/get_power", tok).status_code == 200
    assert call(d, "POST", ROUTES[0][1], tok).status_code == 403


@pytest.mark.parametrize("content", [b"", None])
def test_bad_key_file_refused(tmp_path, content):
    from conftest import run_zeusd
    path = tmp_path / "key"
    if content is not None:
        path.write_bytes(content)
    r = run_zeusd("serve", "--simulate", "--socket-path",
                  str(tmp_path / "s.sock"), "--signing-key-path", str(path))
    assert r.returncode == 1
    assert str(path) in r.stderr
    assert not (tmp_path / "s.sock").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as nobody")
@pytest.mark.parametrize("plant", ["others_file", "group_writable",
                                   "world_writable", "fifo"])
def test_key_file_others_can_write_refused(plant):
    """Whoever can write the key file can mint tokens for any user and
    scope once zeusd (re)loads it. zeusd used to take a key owned by
    another user or writable by group or others without a word, and a FIFO
    at the path blocked it in open(2) at startup. Each is refused, as the
    policy file is, with a message naming the path."""
    from conftest import ZEUSD
    base = Path(tempfile.mkdtemp(prefix="zeusd-key-"))
    os.chmod(base, 0o755)
    path = base / "key"
    try:
        if plant == "fifo":
            os.mkfifo(path, 0o600)
        else:
            path.write_bytes(b"k" * 32)
            os.chmod(path, {"others_file": 0o600, "group_writable": 0o620,
                            "world_writable": 0o602}[plant])
            if plant == "others_file":
                os.chown(path, 65534, 65534)
        p = subprocess.Popen([str(ZEUSD), "serve", "--simulate",
                              "--socket-path", str(base / "run" / "s.sock"),
                              "--signing-key-path", str(path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            _, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            pytest.fail("zeusd did not refuse the key file (it kept running "
                        "or hung opening it)")
        assert p.returncode == 1, err
        assert str(path) in err, err
        assert not (base / "run" / "s.sock").exists()
    finally:
        shutil.rmtree(base)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as nobody")
@linux_only("signals", "a reload on SIGHUP")
def test_key_reload_refuses_a_key_others_can_write(start, key):
    """SIGHUP re-reads the key: one that became world-writable (or was
    replaced by another user's file) is refused and the old key kept, so
    tokens made with the injected bytes never pass."""
    d = start(args=["--signing-key-path", str(key)])
    good = token(key)
    assert call(d, "GET", "/gpu/get_power", good).status_code == 200
    key.write_bytes(b"attacker-chosen-bytes")
    os.chmod(key, 0o666)
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while "event=reload_failed" not in d.logs():
        assert "signing_key_reloaded" not in d.logs(), d.logs()
        assert time.monotonic() < deadline, d.logs()
        time.sleep(0.05)
    forged = jwt.encode({"sub": "mallory", "scopes": list(GROUPS)},
                        b"attacker-chosen-bytes", algorithm="HS256")
    assert call(d, "GET", "/gpu/get_power", forged).status_code == 401
    assert call(d, "GET", "/gpu/get_power", good).status_code == 200


@pytest.mark.parametrize("path,scope", [
    ("/gpu/stream_power", "gpu-read"),
    pytest.param("/cpu/stream_power", "cpu-read", marks=RAPL)])
def test_stream_routes_need_their_scope(authd, key, path, scope):
    def head(tok):
        s = authd.raw_socket(5)
        auth = f"Authorization: Bearer {tok}\r\n" if tok else ""
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: z\r\n{auth}\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        return int(data.split(b" ", 2)[1])

    assert head(None) == 401
    others = [g for g in GROUPS if g != scope]
    assert head(token(key, scopes=others)) == 403
    assert head(token(key, scopes=[scope])) == 200
