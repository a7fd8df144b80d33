"""Black-box tests of the GPU half of docs/api.md (everything but streaming),
against the real zeusd on the NVML simulator, over UDS and TCP.

The suite runs on two simulated GPU models without doubling its time: the
UDS daemons simulate A100-like GPUs and the TCP daemons H100-like ones
(ZEUS_SIM_PROFILE, docs/simulator.md), so limits and names come from the
daemon's profile (Sim.default_limit, ...), never from constants.

The simulator's call log shows what the daemon asked the "hardware" to do,
and its control file injects driver errors and delays while the daemon
runs (see simutil.py and docs/simulator.md). Timing checks use generous
bounds: the file also runs under ASan.
"""
import itertools
import json
import os
import re
import signal
import socket
import threading
import time

import pytest

from conftest import SIM, Zeusd, raw_request, run_zeusd
from simutil import PROFILES, SimLog, write_control

NGPU = 4                    # the simulator's default
A100_LIMIT = PROFILES["a100"].default_limit   # the default profile's
# The profile each transport's daemons simulate.
MODE_PROFILE = {"uds": PROFILES["a100"], "tcp": PROFILES["h100"]}

READS = ["get_power", "get_cumulative_energy", "get_power_limit",
         "get_power_limit_constraints", "get_persistence_mode"]

# endpoint -> (extra parameters, the NVML calls expected on each GPU)
WRITES = {
    "set_power_limit": (
        {"power_limit_mw": "250000"},
        [("nvmlDeviceSetPowerManagementLimit", ["250000"])]),
    "set_persistence_mode": (
        {"enabled": "true"},
        [("nvmlDeviceSetPersistenceMode", ["1"])]),
    "set_gpu_locked_clocks": (
        {"min_clock_mhz": "300", "max_clock_mhz": "1200"},
        [("nvmlDeviceSetGpuLockedClocks", ["300", "1200"])]),
    "reset_gpu_locked_clocks": (
        {}, [("nvmlDeviceResetGpuLockedClocks", [])]),
    "set_mem_locked_clocks": (
        {"min_clock_mhz": "810", "max_clock_mhz": "1593"},
        [("nvmlDeviceSetMemoryLockedClocks", ["810", "1593"])]),
    "reset_mem_locked_clocks": (
        {}, [("nvmlDeviceResetMemoryLockedClocks", [])]),
    "reset_locked_clocks": (
        {}, [("nvmlDeviceResetGpuLockedClocks", []),
             ("nvmlDeviceResetMemoryLockedClocks", [])]),
}

_seq = itertools.count()


class Sim:
    """A daemon on the simulator with its call log and control file, and
    the simulated GPU model's facts (simutil.Profile)."""

    def __init__(self, d, log, ctl, profile):
        self.d = d
        self.log = log
        self.ctl = ctl
        self.profile = profile
        self.name = profile.name
        self.default_limit = profile.default_limit
        self.min_limit = profile.min_limit
        self.max_limit = profile.max_limit

    def control(self, *rules):
        write_control(self.ctl, *rules)

    def get(self, path, **kw):
        return self.d.get(path, **kw)

    def post(self, path, **kw):
        return self.d.post(path, **kw)

    def write(self, endpoint, ids, block=True, **params):
        q = f"gpu_ids={ids}&block={'true' if block else 'false'}"
        for k, v in params.items():
            q += f"&{k}={v}"
        return self.d.post(f"/gpu/{endpoint}?{q}")

    def set_limit(self, ids, mw, block=True):
        return self.write("set_power_limit", ids, block, power_limit_mw=mw)


@pytest.fixture
def sim_start(start, mode, tmp_path):
    """sim_start(env={...}, args=[...]) -> Sim, on the test's transport."""
    def _start(env=None, args=(), **kw):
        n = next(_seq)
        log = tmp_path / f"sim-{n}.log"
        ctl = tmp_path / f"sim-{n}.ctl"
        prof = MODE_PROFILE[mode]
        e = {"ZEUS_SIM_LOG": str(log), "ZEUS_SIM_CONTROL": str(ctl),
             "ZEUS_SIM_PROFILE": prof.key}
        e.update(env or {})
        return Sim(start(mode, args=args, env=e, **kw), SimLog(log), ctl,
                   prof)
    return _start


@pytest.fixture
def sim(sim_start):
    return sim_start()


def keys(text, inner=None):
    """Top-level (or `inner` object's) keys in the order of the raw JSON,
    after checking that the raw text has no key twice."""
    pairs = json.loads(text, object_pairs_hook=lambda p: p)
    if inner is not None:
        pairs = dict(pairs)[inner]
    names = [k for k, _ in pairs]
    assert len(names) == len(set(names)), text
    return names


def limits(s, ids=None):
    q = "" if ids is None else f"?gpu_ids={ids}"
    r = s.get("/gpu/get_power_limit" + q)
    assert r.status_code == 200, r.text
    return {int(k): v["power_limit_mw"] for k, v in r.json().items()}


def wait_until(pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# --- success shapes ----------------------------------------------------------

def test_get_power_shape(sim):
    before = int(time.time() * 1000)
    r = sim.get("/gpu/get_power")
    after = int(time.time() * 1000)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert set(body) == {"timestamp_ms", "power_mw"}
    assert before - 5 <= body["timestamp_ms"] <= after + 5
    assert keys(r.text, "power_mw") == ["0", "1", "2", "3"]
    for mw in body["power_mw"].values():
        assert isinstance(mw, int) and 0 < mw <= sim.default_limit
    # The instantaneous field, not the averaged call.
    assert sim.log.calls("nvmlDeviceGetFieldValues", 0)[-1].args == ["186"]


def test_read_shapes(sim):
    r = sim.get("/gpu/get_cumulative_energy")
    assert r.status_code == 200 and keys(r.text) == ["0", "1", "2", "3"]
    for v in r.json().values():
        assert set(v) == {"energy_mj"} and isinstance(v["energy_mj"], int)
        assert v["energy_mj"] > 0
    r = sim.get("/gpu/get_power_limit")
    assert r.status_code == 200
    assert r.json() == {str(i): {"power_limit_mw": sim.default_limit}
                        for i in range(NGPU)}
    r = sim.get("/gpu/get_power_limit_constraints")
    assert r.status_code == 200
    assert r.json() == {str(i): {"min_power_limit_mw": sim.min_limit,
                                 "max_power_limit_mw": sim.max_limit}
                        for i in range(NGPU)}
    r = sim.get("/gpu/get_persistence_mode")
    assert r.status_code == 200
    assert r.json() == {str(i): {"enabled": False} for i in range(NGPU)}


def test_read_keys_ascending_and_deduplicated(sim):
    for endpoint in READS:
        r = sim.get(f"/gpu/{endpoint}?gpu_ids=3,1,2,1")
        assert r.status_code == 200, r.text
        inner = "power_mw" if endpoint == "get_power" else None
        assert keys(r.text, inner) == ["1", "2", "3"], endpoint
        assert re.search(r'"1".*"2".*"3"', r.text)


def test_energy_never_decreases(sim):
    first = sim.get("/gpu/get_cumulative_energy").json()
    time.sleep(0.1)
    second = sim.get("/gpu/get_cumulative_energy").json()
    for i in first:
        assert second[i]["energy_mj"] > first[i]["energy_mj"]


def test_discover_gpus(sim):
    gpus = sim.get("/discover").json()["gpus"]
    assert [g["id"] for g in gpus] == list(range(NGPU))
    for i, g in enumerate(gpus):
        assert g["name"] == sim.name
        assert g["pci_address"] == f"0000:{i + 1:02x}:00.0"
        assert g["cumulative_energy_available"] is True


@pytest.mark.parametrize("endpoint", list(WRITES))
def test_write_success_shape_and_sim_calls(sim, endpoint):
    params, expected = WRITES[endpoint]
    r = sim.write(endpoint, "2,0", **params)
    assert r.status_code == 200, r.text
    assert r.content == b""
    got = sorted(sim.log.writes())
    want = sorted((fn, gpu, args) for gpu in (0, 2) for fn, args in expected)
    assert got == want


# --- values round-trip -------------------------------------------------------

def test_power_limit_round_trip(sim):
    assert sim.set_limit("1,3", 250_000).status_code == 200
    d = sim.default_limit
    assert limits(sim) == {0: d, 1: 250_000, 2: d, 3: 250_000}
    assert sorted(sim.log.writes()) == [
        ("nvmlDeviceSetPowerManagementLimit", 1, ["250000"]),
        ("nvmlDeviceSetPowerManagementLimit", 3, ["250000"])]
    # The boundaries of the constraints are accepted.
    mark = sim.log.mark()
    assert sim.set_limit("0", sim.min_limit).status_code == 200
    assert sim.set_limit("0", sim.max_limit).status_code == 200
    assert sim.log.writes(since=mark) == [
        ("nvmlDeviceSetPowerManagementLimit", 0, [str(sim.min_limit)]),
        ("nvmlDeviceSetPowerManagementLimit", 0, [str(sim.max_limit)])]
    assert limits(sim, "0") == {0: sim.max_limit}


def test_power_limit_caps_power(sim):
    assert sim.set_limit("0", 210_000).status_code == 200
    for _ in range(5):
        assert sim.get("/gpu/get_power?gpu_ids=0").json()["power_mw"]["0"] \
            <= 210_000


def test_persistence_round_trip(sim):
    assert sim.write("set_persistence_mode", "1,3",
                     enabled="true").status_code == 200
    r = sim.get("/gpu/get_persistence_mode")
    assert r.json() == {"0": {"enabled": False}, "1": {"enabled": True},
                        "2": {"enabled": False}, "3": {"enabled": True}}
    mark = sim.log.mark()
    assert sim.write("set_persistence_mode", "3",
                     enabled="false").status_code == 200
    assert sim.log.writes(since=mark) == [
        ("nvmlDeviceSetPersistenceMode", 3, ["0"])]
    r = sim.get("/gpu/get_persistence_mode?gpu_ids=1,3")
    assert r.json() == {"1": {"enabled": True}, "3": {"enabled": False}}


def test_locked_clocks_set_and_reset(sim):
    assert sim.write("set_gpu_locked_clocks", "1", min_clock_mhz=210,
                     max_clock_mhz=1005).status_code == 200
    assert sim.write("set_mem_locked_clocks", "1", min_clock_mhz=405,
                     max_clock_mhz=1215).status_code == 200
    assert sim.write("reset_locked_clocks", "1").status_code == 200
    assert sim.log.writes() == [
        ("nvmlDeviceSetGpuLockedClocks", 1, ["210", "1005"]),
        ("nvmlDeviceSetMemoryLockedClocks", 1, ["405", "1215"]),
        ("nvmlDeviceResetGpuLockedClocks", 1, []),
        ("nvmlDeviceResetMemoryLockedClocks", 1, [])]
    # min == max is a valid lock.
    assert sim.write("set_gpu_locked_clocks", "1", min_clock_mhz=1410,
                     max_clock_mhz=1410).status_code == 200


def test_duplicate_ids_collapse(sim):
    assert sim.set_limit("1,1", 300_000).status_code == 200
    assert sim.set_limit(" 2 , 2,2 ", 310_000).status_code == 200
    assert sim.log.writes() == [
        ("nvmlDeviceSetPowerManagementLimit", 1, ["300000"]),
        ("nvmlDeviceSetPowerManagementLimit", 2, ["310000"])]


# --- 400s --------------------------------------------------------------------

def assert_error(r, status, *needles):
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and isinstance(body["error"], str), body
    for n in needles:
        assert n in body["error"], body


UNKNOWN_IDS = ["4", "0,4", "1,2,3,4", "99", "4294967295"]


def test_unknown_gpu_write_400_and_nothing_written(sim):
    for ids in UNKNOWN_IDS:
        for endpoint, (params, _) in WRITES.items():
            for block in (True, False):
                r = sim.write(endpoint, ids, block, **params)
                assert_error(r, 400, "Unknown GPU index",
                             "available: 0, 1, 2, 3")
    time.sleep(0.05)        # a wrongly queued block=false write would land
    assert sim.log.writes() == []


def test_unknown_gpu_read_400(sim):
    for ids in UNKNOWN_IDS:
        for endpoint in READS:
            r = sim.get(f"/gpu/{endpoint}?gpu_ids={ids}")
            assert_error(r, 400, "Unknown GPU index",
                         "available: 0, 1, 2, 3")


BAD_IDS = [
    ("", "empty element"), ("0,,1", "empty element"), ("0,", "empty"),
    (",0", "empty"), ("%20", "empty"), ("a", "not a non-negative integer"),
    ("-1", "not a non-negative integer"), ("1.0", "not a non-negative"),
    ("0x1", "not a non-negative"), ("4294967296", "not a non-negative"),
    (",".join(["0"] * 257), "more than 256 elements"),
]


def test_bad_gpu_ids_400(sim):
    for ids, needle in BAD_IDS:
        for endpoint, (params, _) in WRITES.items():
            assert_error(sim.write(endpoint, ids, **params), 400, "gpu_ids",
                         needle)
        for endpoint in READS:
            assert_error(sim.get(f"/gpu/{endpoint}?gpu_ids={ids}"), 400,
                         "gpu_ids", needle)
    assert sim.log.writes() == []


def test_spaces_around_ids_trimmed(sim):
    assert sim.set_limit("%201%20,%203", 280_000).status_code == 200
    assert sorted(sim.log.writes()) == [
        ("nvmlDeviceSetPowerManagementLimit", 1, ["280000"]),
        ("nvmlDeviceSetPowerManagementLimit", 3, ["280000"])]
    r = sim.get("/gpu/get_power_limit?gpu_ids=%202,0%20")
    assert r.status_code == 200 and keys(r.text) == ["0", "2"]


def test_missing_and_unknown_parameters_400(sim):
    for endpoint, (params, _) in WRITES.items():
        full = {"gpu_ids": "0", "block": "true", **params}
        for drop in full:
            q = "&".join(f"{k}={v}" for k, v in full.items() if k != drop)
            r = sim.post(f"/gpu/{endpoint}?{q}")
            assert_error(r, 400, f"missing field `{drop}`")
        q = "&".join(f"{k}={v}" for k, v in full.items())
        assert_error(sim.post(f"/gpu/{endpoint}?{q}&bogus=1"), 400,
                     "unknown field `bogus`, expected one of `gpu_ids`")
        # Another endpoint's parameter is unknown here.
        other = "enabled=true" if endpoint != "set_persistence_mode" \
            else "power_limit_mw=1"
        assert_error(sim.post(f"/gpu/{endpoint}?{q}&{other}"), 400,
                     "unknown field `" + other.split("=")[0] + "`")
    for endpoint in READS:
        assert_error(sim.get(f"/gpu/{endpoint}?block=true"), 400,
                     "unknown field `block`")
    assert sim.log.writes() == []


@pytest.mark.parametrize("endpoint,query,needle", [
    ("set_persistence_mode", "enabled=1", "enabled"),
    ("set_persistence_mode", "enabled=TRUE", "enabled"),
    ("set_persistence_mode", "enabled=", "enabled"),
    ("set_gpu_locked_clocks", "min_clock_mhz=x&max_clock_mhz=1",
     "min_clock_mhz"),
    ("set_mem_locked_clocks", "min_clock_mhz=1&max_clock_mhz=-1",
     "max_clock_mhz"),
    ("reset_locked_clocks", "block=maybe", "block"),
])
def test_bad_values_400(sim, endpoint, query, needle):
    q = "gpu_ids=0" + ("" if "block=" in query else "&block=true")
    r = sim.post(f"/gpu/{endpoint}?{q}&{query}")
    assert_error(r, 400, needle)
    assert sim.log.writes() == []


# The phrases the upstream daemon's decoder uses, which Zeus's clients and
# tests match (lower case), next to the parameter's name.
@pytest.mark.parametrize("endpoint,query,needle", [
    ("set_persistence_mode", "gpu_ids=0&disabled=false&block=true",
     "unknown field `disabled`"),
    ("set_persistence_mode", "gpu_ids=0&enabled=1&block=true",
     "invalid value `1` for field `enabled`: not `true` or `false`"),
    ("set_power_limit", "gpu_ids=0&power_limit_wwww=100000&block=true",
     "unknown field `power_limit_wwww`"),
    ("set_power_limit", "gpu_ids=0&block=true", "missing field "
     "`power_limit_mw`"),
    ("set_gpu_locked_clocks",
     "gpu_ids=0&min_clock_mhz=1000&max_clock_mhz=abc&block=true",
     "invalid value `abc` for field `max_clock_mhz`: expected u32"),
    ("reset_gpu_locked_clocks", "gpu_ids=0&lego=false",
     "unknown field `lego`"),
])
def test_upstream_error_phrases(sim, endpoint, query, needle):
    assert_error(sim.post(f"/gpu/{endpoint}?{query}"), 400, needle)
    assert sim.log.writes() == []


@pytest.mark.parametrize("which", ["zero", "below_min", "above_max", "u32_max"])
def test_power_limit_out_of_range_400(sim, which):
    mw = {"zero": 0, "below_min": sim.min_limit - 1,
          "above_max": sim.max_limit + 1, "u32_max": 4294967295}[which]
    r = sim.set_limit("0,2", mw)
    assert r.status_code == 400, r.text
    assert r.json() == {"errors": {
        "0": "GPU 0: set_power_limit failed: Invalid Argument",
        "2": "GPU 2: set_power_limit failed: Invalid Argument"}}
    assert [c.rc for c in sim.log.calls(
        "nvmlDeviceSetPowerManagementLimit")] == ["INVALID_ARGUMENT"] * 2
    assert limits(sim) == {i: sim.default_limit for i in range(NGPU)}


@pytest.mark.parametrize("endpoint", ["set_gpu_locked_clocks",
                                      "set_mem_locked_clocks"])
def test_min_above_max_clocks_400(sim, endpoint):
    for lo, hi in ((1000, 999), (5, 0)):
        r = sim.write(endpoint, "1", min_clock_mhz=lo, max_clock_mhz=hi)
        assert r.status_code == 400, r.text
        assert list(r.json()) == ["errors"]
        msg = r.json()["errors"]["1"]
        assert msg == f"GPU 1: {endpoint} failed: Invalid Argument"


# --- injected driver errors --------------------------------------------------

def test_no_permission_on_one_gpu(sim):
    sim.control("fail nvmlDeviceSetPowerManagementLimit 1 NO_PERMISSION")
    r = sim.set_limit("0,1,2", 200_000)
    assert r.status_code == 403, r.text
    assert r.json() == {"errors": {
        "1": "GPU 1: set_power_limit failed: Insufficient Permissions (the "
             "NVIDIA driver lets only root change this setting; zeusd runs "
             f"as uid {os.geteuid()})"}}
    calls = {c.gpu: (c.args, c.rc) for c in
             sim.log.calls("nvmlDeviceSetPowerManagementLimit")}
    assert calls == {0: (["200000"], "SUCCESS"), 1: (["200000"],
                     "NO_PERMISSION"), 2: (["200000"], "SUCCESS")}
    d = sim.default_limit
    assert limits(sim) == {0: 200_000, 1: d, 2: 200_000, 3: d}


@pytest.mark.parametrize("code,status,text", [
    ("NO_PERMISSION", 403, "Insufficient Permissions"),
    ("NOT_SUPPORTED", 400, "Not Supported (not supported by this GPU, "),
    ("INVALID_ARGUMENT", 400, "Invalid Argument"),
    ("GPU_IS_LOST", 503, "GPU is lost (it has fallen off the bus"),
    ("UNKNOWN", 500, "Unknown Error"),
    ("DRIVER_NOT_LOADED", 500, ""),
])
def test_driver_error_status(sim, code, status, text):
    sim.control(f"fail nvmlDeviceSetMemoryLockedClocks 2 {code}",
                f"fail nvmlDeviceGetPersistenceMode 2 {code}")
    r = sim.write("set_mem_locked_clocks", "1,2,3", min_clock_mhz=405,
                  max_clock_mhz=810)
    assert r.status_code == status, r.text
    assert set(r.json()) == {"errors"}
    errs = r.json()["errors"]
    assert list(errs) == ["2"]
    assert errs["2"].startswith("GPU 2: set_mem_locked_clocks failed: ")
    assert text in errs["2"]
    assert sorted(c.gpu for c in sim.log.calls(
        "nvmlDeviceSetMemoryLockedClocks", since=0) if c.rc == "SUCCESS") \
        == [1, 3]
    r = sim.get("/gpu/get_persistence_mode")
    assert r.status_code == status, r.text
    assert list(r.json()["errors"]) == ["2"]
    assert "GPU 2" in r.json()["errors"]["2"] and text in \
        r.json()["errors"]["2"]
    r = sim.get("/gpu/get_persistence_mode?gpu_ids=0,1,3")
    assert r.status_code == 200 and keys(r.text) == ["0", "1", "3"]


@pytest.mark.parametrize("codes,status", [
    (("INVALID_ARGUMENT", "NO_PERMISSION", "UNKNOWN"), 500),
    (("NOT_SUPPORTED", "NO_PERMISSION", None), 403),
    ((None, "NOT_SUPPORTED", "INVALID_ARGUMENT"), 400),
])
def test_mixed_errors_worst_status(sim, codes, status):
    rules = [f"fail {fn} {gpu} {code}" for gpu, code in enumerate(codes)
             if code for fn in ("nvmlDeviceSetPersistenceMode",
                                "nvmlDeviceGetPowerManagementLimit")]
    sim.control(*rules)
    failed = [str(g) for g, c in enumerate(codes) if c]
    r = sim.write("set_persistence_mode", "0,1,2,3", enabled="true")
    assert r.status_code == status, r.text
    assert keys(r.text, "errors") == failed
    r = sim.get("/gpu/get_power_limit")
    assert r.status_code == status, r.text
    assert keys(r.text, "errors") == failed
    # The GPUs without a fault got the write.
    ok = sorted(c.gpu for c in sim.log.calls("nvmlDeviceSetPersistenceMode")
                if c.rc == "SUCCESS")
    assert ok == [g for g in range(NGPU) if str(g) not in failed]


@pytest.mark.parametrize("fn,endpoint", [
    ("nvmlDeviceGetFieldValues", "get_power"),
    ("nvmlDeviceGetTotalEnergyConsumption", "get_cumulative_energy"),
    ("nvmlDeviceGetPowerManagementLimit", "get_power_limit"),
    ("nvmlDeviceGetPowerManagementLimitConstraints",
     "get_power_limit_constraints"),
    ("nvmlDeviceGetPersistenceMode", "get_persistence_mode"),
])
def test_read_errors(sim, fn, endpoint):
    sim.control(f"fail {fn} 1 NO_PERMISSION", f"fail {fn} 3 UNKNOWN")
    r = sim.get(f"/gpu/{endpoint}")
    assert r.status_code == 500, r.text
    errs = r.json()["errors"]
    assert keys(r.text, "errors") == ["1", "3"]
    assert errs["1"] == f"GPU 1: {endpoint} failed: Insufficient " \
        "Permissions (the NVIDIA driver lets only privileged users read " \
        f"this; zeusd runs as uid {os.geteuid()})"
    assert errs["3"] == f"GPU 3: {endpoint} failed: Unknown Error"
    r = sim.get(f"/gpu/{endpoint}?gpu_ids=1")
    assert r.status_code == 403
    r = sim.get(f"/gpu/{endpoint}?gpu_ids=0,2")
    assert r.status_code == 200, r.text
    inner = "power_mw" if endpoint == "get_power" else None
    assert keys(r.text, inner) == ["0", "2"]


def test_reset_locked_clocks_tries_both_reports_first(sim):
    sim.control("fail nvmlDeviceResetGpuLockedClocks 0 NO_PERMISSION",
                "fail nvmlDeviceResetMemoryLockedClocks 0 UNKNOWN",
                "fail nvmlDeviceResetMemoryLockedClocks 1 NOT_SUPPORTED")
    r = sim.write("reset_locked_clocks", "0,1,2")
    assert r.status_code == 403, r.text
    errs = r.json()["errors"]
    assert list(errs) == ["0", "1"]
    assert "Insufficient Permissions" in errs["0"]
    assert "Unknown Error" not in errs["0"]
    assert "Not Supported" in errs["1"]
    got = sorted(sim.log.writes())
    assert got == sorted(
        (fn, g, []) for g in (0, 1, 2)
        for fn in ("nvmlDeviceResetGpuLockedClocks",
                   "nvmlDeviceResetMemoryLockedClocks"))


def test_power_falls_back_to_average(sim):
    sim.control("fail nvmlDeviceGetFieldValues 0 NOT_SUPPORTED")
    mark = sim.log.mark()
    r = sim.get("/gpu/get_power?gpu_ids=0,1")
    assert r.status_code == 200, r.text
    assert r.json()["power_mw"]["0"] > 0
    assert len(sim.log.calls("nvmlDeviceGetPowerUsage", 0, mark)) == 1
    assert sim.log.calls("nvmlDeviceGetPowerUsage", 1, mark) == []


def test_faults_lifted_at_runtime(sim):
    sim.control("fail nvmlDeviceSetPowerManagementLimit * GPU_IS_LOST")
    assert sim.set_limit("0", 200_000).status_code == 503
    sim.control()
    assert sim.set_limit("0", 200_000).status_code == 200
    assert limits(sim, "0") == {0: 200_000}


# --- a GPU without an energy counter -----------------------------------------

def test_gpu_without_energy_counter(sim_start):
    s = sim_start(env={"ZEUS_SIM_FAULTS":
                       "fail nvmlDeviceGetTotalEnergyConsumption 3 "
                       "NOT_SUPPORTED"})
    gpus = s.get("/discover").json()["gpus"]
    assert [g["cumulative_energy_available"] for g in gpus] == \
        [True, True, True, False]
    r = s.get("/gpu/get_cumulative_energy")
    assert r.status_code == 400, r.text
    assert r.json() == {"errors": {
        "3": "GPU 3: get_cumulative_energy failed: Not Supported (not "
             f"supported by this GPU, {s.name})"}}
    assert s.get("/gpu/get_cumulative_energy?gpu_ids=3").status_code == 400
    r = s.get("/gpu/get_cumulative_energy?gpu_ids=0,1,2")
    assert r.status_code == 200 and keys(r.text) == ["0", "1", "2"]
    # Everything else about GPU 3 works.
    for endpoint in READS:
        if endpoint != "get_cumulative_energy":
            assert s.get(f"/gpu/{endpoint}?gpu_ids=3").status_code == 200
    assert s.set_limit("3", 300_000).status_code == 200


# --- block=false -------------------------------------------------------------

def test_nonblocking_write_takes_effect(sim):
    r = sim.set_limit("0,2", 250_000, block=False)
    assert r.status_code == 200 and r.content == b""
    got = sim.log.wait_for("nvmlDeviceSetPowerManagementLimit", count=2)
    assert sorted((c.gpu, c.args) for c in got) == \
        [(0, ["250000"]), (2, ["250000"])]
    d = sim.default_limit
    assert limits(sim) == {0: 250_000, 1: d, 2: 250_000, 3: d}
    for endpoint, (params, expected) in WRITES.items():
        mark = sim.log.mark()
        assert sim.write(endpoint, "3", False, **params).status_code == 200
        fn = expected[-1][0]
        assert sim.log.wait_for(fn, 3, since=mark), endpoint


def test_nonblocking_answers_before_slow_write(sim):
    sim.control("delay nvmlDeviceSetPowerManagementLimit 1 1500")
    t0 = time.monotonic_ns()
    r = sim.set_limit("1", 222_000, block=False)
    answered = time.monotonic_ns()
    assert r.status_code == 200
    assert answered - t0 < 900_000_000
    assert sim.log.calls("nvmlDeviceSetPowerManagementLimit") == []
    got = sim.log.wait_for("nvmlDeviceSetPowerManagementLimit", 1,
                           timeout=10)
    assert len(got) == 1 and got[0].args == ["222000"]
    assert got[0].rc == "SUCCESS"
    assert got[0].end_ns > answered
    assert got[0].end_ns - got[0].start_ns >= 1_400_000_000
    assert limits(sim, "1") == {1: 222_000}


def test_nonblocking_failure_is_logged(sim):
    sim.control("fail nvmlDeviceSetPersistenceMode 2 NO_PERMISSION")
    r = sim.write("set_persistence_mode", "1,2", False, enabled="true")
    assert r.status_code == 200 and r.content == b""
    assert wait_until(lambda: "event=nonblocking_write_failed" in
                      sim.d.logs())
    logs = sim.d.logs()
    assert re.search(r"event=nonblocking_write_failed gpu=2 "
                     r"op=set_persistence_mode error=.*Insufficient "
                     r"Permissions", logs)
    assert wait_until(lambda: re.search(
        r"event=nonblocking_write_done gpu=1 op=set_persistence_mode",
        sim.d.logs()))


# --- concurrency and ordering ------------------------------------------------

def test_writes_to_different_gpus_run_in_parallel(sim):
    sim.control("delay nvmlDeviceSetPowerManagementLimit 0 1000",
                "delay nvmlDeviceSetPowerManagementLimit 1 1000")
    t0 = time.monotonic()
    r = sim.set_limit("0,1", 300_000)
    took = time.monotonic() - t0
    assert r.status_code == 200, r.text
    assert 0.95 <= took < 1.8, took
    a, b = sim.log.calls("nvmlDeviceSetPowerManagementLimit")
    assert a.start_ns < b.end_ns and b.start_ns < a.end_ns   # overlap


def test_writes_to_one_gpu_keep_order(sim):
    sim.control("delay nvmlDeviceSetPowerManagementLimit 2 150")
    values = [250_000, 390_000, 220_000, 333_000, 275_000]
    for v in values:
        assert sim.set_limit("2", v, block=False).status_code == 200
    # A read queues behind the writes on the same GPU.
    assert limits(sim, "2") == {2: values[-1]}
    calls = sim.log.calls("nvmlDeviceSetPowerManagementLimit", 2)
    # A queued block=false write is replaced by a newer one of the same
    # setting before it starts (docs/design.md), so what ran is the sent
    # values in order with some left out, and always the last one.
    ran = [int(c.args[0]) for c in calls]
    sent = iter(values)
    assert all(v in sent for v in ran), ran
    assert ran[-1] == values[-1]
    for prev, nxt in zip(calls, calls[1:]):
        assert nxt.start_ns >= prev.end_ns      # one at a time


def test_slow_gpu_does_not_hold_up_others(sim):
    sim.control("delay nvmlDeviceSetPowerManagementLimit 0 1500")
    assert sim.set_limit("0", 211_000, block=False).status_code == 200
    t0 = time.monotonic()
    assert sim.set_limit("1", 222_000).status_code == 200
    assert limits(sim, "1,2,3") == {1: 222_000, 2: sim.default_limit,
                                    3: sim.default_limit}
    assert time.monotonic() - t0 < 1.0
    # GPU 0's read waits for its queued write.
    assert limits(sim, "0") == {0: 211_000}


def test_concurrent_clients(sim):
    """Many clients writing and reading at once all get sane answers."""
    errors = []

    def client(k):
        try:
            c = sim.d.make_client()
            for j in range(10):
                v = sim.min_limit + 1000 * (k * 10 + j)
                r = c.post(f"/gpu/set_power_limit?gpu_ids={k % NGPU},"
                           f"{(k + 1) % NGPU}&block=true&power_limit_mw={v}")
                assert r.status_code == 200, r.text
                r = c.get("/gpu/get_power")
                assert r.status_code == 200, r.text
            c.close()
        except Exception as e:     # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert len(sim.log.calls("nvmlDeviceSetPowerManagementLimit")) == 160


# --- a GPU lost mid-run ------------------------------------------------------

def lost_series(d):
    """zeusd_gpu_lost per GPU index from a /metrics scrape."""
    text = d.get("/metrics").text
    return {int(m.group(1)): int(m.group(2)) for m in re.finditer(
        r'^zeusd_gpu_lost\{index="(\d+)"\} (\d)$', text, re.M)}


def test_gpu_lost_mid_run(sim):
    assert sim.get("/gpu/get_power").status_code == 200
    assert [g["lost"] for g in sim.get("/discover").json()["gpus"]] == \
        [False] * NGPU
    sim.control("fail * 2 GPU_IS_LOST")
    for endpoint in READS:
        r = sim.get(f"/gpu/{endpoint}")
        assert r.status_code == 503, (endpoint, r.text)
        errs = r.json()["errors"]
        assert list(errs) == ["2"], endpoint
        assert errs["2"] == f"GPU 2: {endpoint} failed: GPU is lost (it " \
            "has fallen off the bus or is otherwise inaccessible)"
        r = sim.get(f"/gpu/{endpoint}?gpu_ids=0,1,3")
        assert r.status_code == 200, (endpoint, r.text)
    # Visible where operators look, without asking the GPU again.
    assert [g["lost"] for g in sim.get("/discover").json()["gpus"]] == \
        [False, False, True, False]
    assert lost_series(sim.d) == {0: 0, 1: 0, 2: 1, 3: 0}
    assert re.search(r"event=gpu_lost gpu=2", sim.d.logs())
    r = sim.set_limit("1,2", 260_000)
    assert r.status_code == 503
    assert list(r.json()["errors"]) == ["2"]
    assert limits(sim, "1") == {1: 260_000}
    assert sim.set_limit("2", 260_000, block=False).status_code == 200
    # Worst status wins, and 503 is above another GPU's 500.
    sim.control("fail * 2 GPU_IS_LOST",
                "fail nvmlDeviceGetPowerManagementLimit 0 UNKNOWN")
    assert sim.get("/gpu/get_power_limit").status_code == 503
    # The rest of the daemon is unaffected.
    assert sim.get("/time").status_code == 200
    assert sim.get("/cpu/get_cumulative_energy?cpu=true&dram=true"
                   ).status_code == 200
    # The GPU comes back: the first call that works clears the flag.
    sim.control()
    assert sim.get("/gpu/get_power").status_code == 200
    assert sim.set_limit("2", 270_000).status_code == 200
    d = sim.default_limit
    assert limits(sim) == {0: d, 1: 260_000, 2: 270_000, 3: d}
    assert [g["lost"] for g in sim.get("/discover").json()["gpus"]] == \
        [False] * NGPU
    assert lost_series(sim.d)[2] == 0
    assert re.search(r"event=gpu_recovered gpu=2", sim.d.logs())


def test_client_gone_during_blocking_write(sim):
    sim.control("delay nvmlDeviceSetPowerManagementLimit 0 700")
    target = "/gpu/set_power_limit?gpu_ids=0,1&block=true&power_limit_mw=" \
             "223000"
    d = sim.d
    if d.mode == "uds":
        s = socket.socket(socket.AF_UNIX)
        s.connect(d.sock)
    else:
        s = socket.create_connection((d.host, d.port))
    s.sendall(f"POST {target} HTTP/1.1\r\nHost: zeusd\r\n\r\n".encode())
    time.sleep(0.1)
    s.close()
    assert sim.log.wait_for("nvmlDeviceSetPowerManagementLimit", 0,
                            timeout=5)
    time.sleep(0.1)
    assert sim.get("/time").status_code == 200
    assert limits(sim, "0,1") == {0: 223_000, 1: 223_000}


# --- node configurations -----------------------------------------------------

@pytest.mark.parametrize("n", [8, 12])
def test_many_gpus(sim_start, n):
    s = sim_start(env={"ZEUS_SIM_GPUS": str(n)})
    gpus = s.get("/discover").json()["gpus"]
    assert [g["id"] for g in gpus] == list(range(n))
    assert [g["pci_address"] for g in gpus] == \
        [f"0000:{i + 1:02x}:00.0" for i in range(n)]
    want = [str(i) for i in range(n)]
    r = s.get("/gpu/get_power")
    assert keys(r.text, "power_mw") == want     # "10" after "9"
    r = s.get(f"/gpu/get_power_limit?gpu_ids={','.join(reversed(want))}")
    assert keys(r.text) == want
    assert s.set_limit(",".join(want), 200_000).status_code == 200
    assert sorted(c.gpu for c in
                  s.log.calls("nvmlDeviceSetPowerManagementLimit")) == \
        list(range(n))
    assert_error(s.get(f"/gpu/get_power?gpu_ids={n}"), 400,
                 f"Unknown GPU index {n}")


def test_zero_gpus(sim_start):
    s = sim_start(env={"ZEUS_SIM_GPUS": "0"})
    assert s.get("/discover").json()["gpus"] == []
    for endpoint in READS:
        r = s.get(f"/gpu/{endpoint}")
        assert r.status_code == 200, r.text
        if endpoint == "get_power":
            assert set(r.json()) == {"timestamp_ms", "power_mw"}
            assert r.json()["power_mw"] == {}
        else:
            assert r.json() == {}
        assert_error(s.get(f"/gpu/{endpoint}?gpu_ids=0"), 400,
                     "Unknown GPU index 0", "none")
    for endpoint, (params, _) in WRITES.items():
        assert_error(s.write(endpoint, "0", **params), 400,
                     "Unknown GPU index 0")
        assert_error(s.write(endpoint, "0", False, **params), 400,
                     "Unknown GPU index 0")


def test_sim_settings(sim_start):
    s = sim_start(env={"ZEUS_SIM_GPUS": "2",
                       "ZEUS_SIM_GPU_NAME": "NVIDIA H100",
                       "ZEUS_SIM_PCI": "0001:AB:1f.0"})
    gpus = s.get("/discover").json()["gpus"]
    assert [(g["name"], g["pci_address"]) for g in gpus] == [
        ("NVIDIA H100", "0001:ab:1f.0"), ("NVIDIA H100", "0000:02:00.0")]


# --- choosing the library ----------------------------------------------------

@pytest.mark.parametrize("extra", [[], ["--gpu-backend", "nvml"],
                                   ["--simulate"]])
def test_missing_nvml_library(tmp_path, extra):
    lib = tmp_path / "no" / "libnvidia-ml.so.1"
    r = run_zeusd("serve", "--nvml-library", str(lib), "--enable",
                  "gpu-read", "--socket-path", str(tmp_path / "s.sock"),
                  *extra)
    assert r.returncode == 1, r.stderr
    assert f"cannot load NVML library '{lib}'" in r.stderr
    assert r.stderr.startswith("zeusd: ")
    assert not (tmp_path / "s.sock").exists()


def test_library_without_nvml_symbols(tmp_path):
    r = run_zeusd("serve", "--nvml-library", "libc.so.6", "--enable",
                  "gpu-read", "--socket-path", str(tmp_path / "s.sock"))
    assert r.returncode == 1, r.stderr
    assert "lacks symbol nvmlInit_v2" in r.stderr


def test_bad_simulator_setting_fails_startup(tmp_path):
    r = run_zeusd("serve", "--simulate", "--socket-path",
                  str(tmp_path / "s.sock"), env={"ZEUS_SIM_GPUS": "65"})
    assert r.returncode == 1
    assert "nvmlInit_v2 failed: Invalid Argument" in r.stderr


def test_gpu_lost_at_startup_others_serve(sim_start):
    # Lost before zeusd could get a handle: listed, flagged, 503; the rest
    # of the node serves as usual.
    s = sim_start(env={"ZEUS_SIM_FAULTS": "fail * 2 GPU_IS_LOST"})
    gpus = s.get("/discover").json()["gpus"]
    assert [g["lost"] for g in gpus] == [False, False, True, False]
    assert gpus[2]["name"] == "" and gpus[2]["uuid"] is None
    assert gpus[2]["cumulative_energy_available"] is False
    assert gpus[1]["name"] == s.name
    for endpoint in READS:
        r = s.get(f"/gpu/{endpoint}")
        assert r.status_code == 503, r.text
        assert r.json()["errors"]["2"].startswith(
            f"GPU 2: {endpoint} failed: GPU is lost")
        assert s.get(f"/gpu/{endpoint}?gpu_ids=0,1,3").status_code == 200
    assert s.set_limit("2", 250_000).status_code == 503
    assert s.set_limit("3", 250_000).status_code == 200
    assert lost_series(s.d) == {0: 0, 1: 0, 2: 1, 3: 0}
    assert re.search(r"event=gpu_lost gpu=2", s.d.logs())


def test_gpu_unknown_error_at_startup_fails_clearly(tmp_path):
    r = run_zeusd("serve", "--simulate", "--socket-path",
                  str(tmp_path / "s.sock"),
                  env={"ZEUS_SIM_FAULTS":
                       "fail nvmlDeviceGetHandleByIndex_v2 2 UNKNOWN"})
    assert r.returncode == 1
    assert re.search(r"^zeusd: GPU 2: .*Unknown Error$", r.stderr, re.M), \
        r.stderr


def test_nvml_backend_on_simulator_library(start, mode, tmp_path):
    log = tmp_path / "sim.log"
    d = start(mode, args=["--gpu-backend", "nvml", "--nvml-library",
                          str(SIM), "--enable", "gpu-read"],
              env={"ZEUS_SIM_LOG": str(log), "ZEUS_SIM_GPUS": "3"},
              simulate=False)
    body = d.get("/discover").json()
    assert [g["id"] for g in body["gpus"]] == [0, 1, 2]
    assert body["enabled_api_groups"] == ["gpu-read"]
    r = d.get("/gpu/get_power")
    assert r.status_code == 200 and keys(r.text, "power_mw") == \
        ["0", "1", "2"]
    assert d.get("/gpu/get_power_limit?gpu_ids=2").json() == \
        {"2": {"power_limit_mw": A100_LIMIT}}
    assert f'library="{SIM}"' in d.logs()
    assert SimLog(log).calls("nvmlInit_v2")


# --- shutdown ----------------------------------------------------------------

def test_shutdown_during_blocking_write(sim):
    sim.control("delay nvmlDeviceSetPowerManagementLimit 3 800")
    result = {}

    def slow():
        c = sim.d.make_client()
        result["r"] = c.post("/gpu/set_power_limit?gpu_ids=2,3&block=true"
                             "&power_limit_mw=299000")
        c.close()

    t = threading.Thread(target=slow)
    t.start()
    assert sim.log.wait_for("nvmlDeviceSetPowerManagementLimit", 2)
    sim.d.proc.send_signal(signal.SIGTERM)
    t.join(10)
    assert result["r"].status_code == 200
    assert sim.d.proc.wait(10) == 0


def test_shutdown_drains_nonblocking_writes(sim):
    # two different settings, so neither write supersedes the other
    sim.control("delay nvmlDeviceSetPersistenceMode 1 300",
                "delay nvmlDeviceSetPowerManagementLimit 1 300")
    assert sim.write("set_persistence_mode", "1", False,
                     enabled="true").status_code == 200
    assert sim.set_limit("1", 200000, block=False).status_code == 200
    sim.d.proc.send_signal(signal.SIGTERM)
    assert sim.d.proc.wait(10) == 0
    assert [c.args for c in sim.log.calls("nvmlDeviceSetPersistenceMode")] \
        == [["1"]]
    assert [c.args for c in
            sim.log.calls("nvmlDeviceSetPowerManagementLimit")] == [["200000"]]


def test_shutdown_with_command_longer_than_grace(tmp_path):
    # regression: MHD_stop_daemon() aborted on the still-suspended request
    ctl = tmp_path / "sim.ctl"
    write_control(ctl, "delay nvmlDeviceSetPowerManagementLimit 0 5600")
    d = Zeusd(tmp_path, env={"ZEUS_SIM_CONTROL": str(ctl)}).wait_ready()
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(d.sock)
        s.sendall(b"POST /gpu/set_power_limit?gpu_ids=0&block=true"
                  b"&power_limit_mw=200000 HTTP/1.1\r\nHost: zeusd\r\n\r\n")
        time.sleep(0.2)
        d.proc.send_signal(signal.SIGTERM)
        rc = d.proc.wait(20)
        s.close()
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
        d.proc.wait()
        d.log.close()
    assert rc == 0, d.logs()[-2000:]


def test_raw_request_empty_body_on_write(sim):
    status, head, body = raw_request(
        sim.d, "/gpu/reset_gpu_locked_clocks?gpu_ids=0&block=true", "POST")
    assert status == 200 and body == b""
    assert re.search(r"(?im)^content-length: 0\r?$", head)
