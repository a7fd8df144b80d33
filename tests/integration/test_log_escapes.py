"""Characters that make a text log line read otherwise than it is (issue
30, item 8a): bidirectional overrides (U+202E "RLO" and the other bidi
controls) and line separators (U+2028, U+2029, NEL U+0085) sent by a
client, in a token's `sub` or in the request path, reach the log escaped
(\\uNNNN), never raw. Black-box: the real binary's log.
"""
import time

import jwt

from conftest import raw_request

BAD = ["\u202e", "\u2028", "\u2029", "\u0085", "\u202a", "\u202b",
       "\u202c", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069"]


def logs_with(d, needle, timeout=10):
    """The log once it holds `needle` (the request line is written when
    the answer is done, after the client may have read it)."""
    deadline = time.monotonic() + timeout
    while needle not in d.logs() and time.monotonic() < deadline:
        time.sleep(0.02)
    return d.logs()


def assert_escaped(logs):
    for ch in BAD:
        assert ch not in logs, f"raw U+{ord(ch):04X} in the log"


def test_bidi_in_request_path_escaped(start):
    d = start()
    enc = "".join("%" + "%".join(f"{b:02X}" for b in ch.encode())
                  for ch in BAD)
    status, _, _ = raw_request(d, f"/gpu/x{enc}gnp.exe")
    assert status == 404
    logs = logs_with(d, "gnp.exe")
    assert_escaped(logs)
    assert "\\u202e" in logs and "\\u2028" in logs and "\\u0085" in logs, \
        logs[-2000:]


def test_bidi_in_token_sub_escaped(start, tmp_path):
    key = tmp_path / "key"
    key.write_bytes(b"s3cret signing key\n")
    d = start("tcp", args=["--signing-key-path", str(key)])
    sub = "alice" + "".join(BAD) + "\u2067evil"
    tok = jwt.encode({"sub": sub, "scopes": ["gpu-read"]}, key.read_bytes(),
                     algorithm="HS256")
    r = d.get("/auth/whoami", headers={"Authorization": f"Bearer {tok}"})
    assert r.status_code == 200, r.text
    logs = logs_with(d, "/auth/whoami")
    assert_escaped(logs)
    assert 'user="alice\\u202e\\u2028\\u2029\\u0085' in logs, logs[-2000:]
