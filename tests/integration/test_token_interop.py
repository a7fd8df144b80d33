"""`zeusd token issue` / `zeusd token verify` against PyJWT, both ways.

Tokens made by zeusd must decode in PyJWT with the same key file, and
tokens made by PyJWT must pass zeusd's verifier (`zeusd token verify`, which
runs the same auth_verify as the daemon). Also the CLI's usage errors.

The binary comes from $ZEUSD_BUILD (see conftest.py).
"""

import json
import os
import subprocess
import time

import jwt
import pytest

from conftest import ZEUSD

KEY = b"correct horse battery staple\n"  # the newline is part of the key


def run(*args, stdin=None):
    return subprocess.run(
        [ZEUSD, "token", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def key_path(tmp_path):
    p = tmp_path / "signing.key"
    p.write_bytes(KEY)
    p.chmod(0o600)
    return str(p)


def issue(key_path, user="alice", scope="gpu-read,cpu-read", expires="1h"):
    r = run("issue", "--signing-key-path", key_path, "--user", user,
            "--scope", scope, "--expires", expires)
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith("\n") and r.stdout.count("\n") == 1
    return r.stdout.strip()


def verify(key_path, token):
    return run("verify", "--signing-key-path", key_path, stdin=token + "\n")


# --- zeusd -> PyJWT ----------------------------------------------------------

def test_issued_token_decodes_in_pyjwt(key_path):
    before = int(time.time())
    tok = issue(key_path, expires="1h 30m")
    after = int(time.time())
    claims = jwt.decode(tok, KEY, algorithms=["HS256"])
    assert claims["sub"] == "alice"
    assert claims["scopes"] == ["gpu-read", "cpu-read"]
    assert before + 5400 <= claims["exp"] <= after + 5400
    assert before <= claims["iat"] <= after
    assert jwt.get_unverified_header(tok)["alg"] == "HS256"


def test_scopes_in_enum_order(key_path):
    tok = issue(key_path, scope="cpu-read, gpu-control,gpu-read,cpu-read")
    claims = jwt.decode(tok, KEY, algorithms=["HS256"])
    assert claims["scopes"] == ["gpu-control", "gpu-read", "cpu-read"]


@pytest.mark.parametrize("never", ["never", "0"])
def test_never_expires(key_path, never):
    tok = issue(key_path, expires=never)
    claims = jwt.decode(tok, KEY, algorithms=["HS256"])
    assert "exp" not in claims


@pytest.mark.parametrize("dur,secs", [("90m", 5400), ("7d", 7 * 86400),
                                      ("30d", 30 * 86400), ("45s", 45),
                                      ("1h30m", 5400), ("2hours", 7200)])
def test_durations(key_path, dur, secs):
    now = int(time.time())
    claims = jwt.decode(issue(key_path, expires=dur), KEY, algorithms=["HS256"])
    assert abs(claims["exp"] - (now + secs)) <= 2


def test_empty_scope_allowed(key_path):
    claims = jwt.decode(issue(key_path, scope=""), KEY, algorithms=["HS256"])
    assert claims["scopes"] == []


def test_trailing_newline_is_part_of_key(key_path):
    tok = issue(key_path)
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(tok, KEY.rstrip(b"\n"), algorithms=["HS256"])


def test_issue_then_verify(key_path):
    tok = issue(key_path, user="bob", scope="gpu-control")
    r = verify(key_path, tok)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["sub"] == "bob" and out["scopes"] == ["gpu-control"]
    assert isinstance(out["exp"], int)


# --- PyJWT -> zeusd -------------------------------------------------------------

def pyjwt(claims, key=KEY, algorithm="HS256", headers=None):
    return jwt.encode(claims, key, algorithm=algorithm, headers=headers)


def test_pyjwt_token_accepted(key_path):
    exp = int(time.time()) + 600
    tok = pyjwt({"sub": "carol", "scopes": ["gpu-read", "gpu-control"],
                 "exp": exp})
    r = verify(key_path, tok)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {
        "sub": "carol", "scopes": ["gpu-control", "gpu-read"], "exp": exp}


def test_pyjwt_no_exp_accepted(key_path):
    r = verify(key_path, pyjwt({"sub": "d", "scopes": []}))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"sub": "d", "scopes": []}


def test_expired_within_leeway_accepted(key_path):
    tok = pyjwt({"sub": "e", "scopes": [], "exp": int(time.time()) - 30})
    assert verify(key_path, tok).returncode == 0


def test_expired_beyond_leeway_rejected(key_path):
    tok = pyjwt({"sub": "e", "scopes": [], "exp": int(time.time()) - 120})
    r = verify(key_path, tok)
    assert r.returncode == 1
    assert "Token has expired." in r.stderr


def test_future_nbf_rejected(key_path):
    tok = pyjwt({"sub": "e", "scopes": [], "nbf": int(time.time()) + 600})
    r = verify(key_path, tok)
    assert r.returncode == 1 and "not yet valid" in r.stderr


@pytest.mark.parametrize("alg", ["HS384", "HS512"])
def test_other_hmac_algs_rejected(key_path, alg):
    tok = pyjwt({"sub": "f", "scopes": []}, algorithm=alg)
    assert verify(key_path, tok).returncode == 1


def test_alg_none_rejected(key_path):
    tok = jwt.encode({"sub": "f", "scopes": ["gpu-control"]}, None,
                     algorithm="none")
    assert verify(key_path, tok).returncode == 1


def test_rs256_rejected(key_path):
    rsa = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.rsa")
    priv = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    tok = pyjwt({"sub": "f", "scopes": []}, key=priv, algorithm="RS256")
    assert verify(key_path, tok).returncode == 1


def test_wrong_key_rejected(key_path):
    tok = pyjwt({"sub": "f", "scopes": []}, key=KEY.rstrip(b"\n"))
    r = verify(key_path, tok)
    assert r.returncode == 1 and "signature" in r.stderr
    assert tok not in r.stderr


@pytest.mark.parametrize("claims", [
    {"scopes": []},
    {"sub": 5, "scopes": []},
    {"sub": "", "scopes": []},
    {"sub": "g"},
    {"sub": "g", "scopes": "gpu-read"},
    {"sub": "g", "scopes": ["gpu-write"]},
    {"sub": "g", "scopes": [None]},
    {"sub": "g", "scopes": [], "exp": "tomorrow"},
])
def test_bad_claims_rejected(key_path, claims):
    assert verify(key_path, pyjwt(claims)).returncode == 1


def test_tampered_payload_rejected(key_path):
    tok = issue(key_path, scope="gpu-read")
    h, _, s = tok.split(".")
    evil = jwt.encode({"sub": "alice", "scopes": ["gpu-control"]}, b"x",
                      algorithm="HS256").split(".")[1]
    assert verify(key_path, f"{h}.{evil}.{s}").returncode == 1


def test_garbage_and_oversized_rejected(key_path):
    assert verify(key_path, "garbage").returncode == 1
    assert verify(key_path, "").returncode == 1
    big = pyjwt({"sub": "h", "scopes": [], "pad": "x" * 9000})
    r = verify(key_path, big)
    assert r.returncode == 1 and "too large" in r.stderr


# --- CLI errors --------------------------------------------------------------

def one_line(r):
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1, r.stderr
    return r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--user", "a", "--scope", "gpu-write", "--expires", "1h"], "gpu-write"),
    (["--user", "a", "--scope", "gpu-read,", "--expires", "1h"], "scope"),
    (["--user", "a", "--scope", "gpu-read", "--expires", "1x"], "unit"),
    (["--user", "a", "--scope", "gpu-read", "--expires", "90"], "unit"),
    (["--user", "a", "--scope", "gpu-read", "--expires", "-1h"], "duration"),
    (["--user", "a", "--scope", "gpu-read", "--expires", "0s"], "never"),
    (["--user", "a", "--scope", "gpu-read"], "--expires"),
    (["--scope", "gpu-read", "--expires", "1h"], "--user"),
    (["--user", "", "--scope", "gpu-read", "--expires", "1h"], "user"),
    (["--user", "a", "--scope", "gpu-read", "--expires", "1h", "--frob"],
     "--frob"),
    (["--user", "a", "--scope", "gpu-read", "--expires", "1h", "x"], "'x'"),
])
def test_usage_errors(key_path, args, needle):
    r = run("issue", "--signing-key-path", key_path, *args)
    assert r.returncode == 2
    assert needle in one_line(r)


def test_missing_key_option():
    r = run("issue", "--user", "a", "--scope", "gpu-read", "--expires", "1h")
    assert r.returncode == 2 and "--signing-key-path" in one_line(r)


def test_unreadable_or_empty_key(tmp_path):
    empty = tmp_path / "empty.key"
    empty.write_bytes(b"")
    for path, needle in [(str(tmp_path / "missing.key"), "cannot open"),
                         (str(empty), "empty")]:
        r = run("issue", "--signing-key-path", path, "--user", "a",
                "--scope", "gpu-read", "--expires", "1h")
        assert r.returncode == 1
        assert needle in one_line(r)


def test_help():
    for args in (["--help"], ["issue", "--help"], ["verify", "--help"]):
        r = run(*args)
        assert r.returncode == 0 and r.stdout.startswith("Usage:")
    r = run()
    assert r.returncode == 2 and "Usage:" in r.stderr
    r = run("frobnicate")
    assert r.returncode == 2 and "frobnicate" in r.stderr
