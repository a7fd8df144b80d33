"""Black-box tests of the GPU half of docs/api.md (everything but
streaming), against the real zeusd on the NVML simulator, over UDS and TCP,
and on the AMD SMI simulator of every library ABI (.24, .25, .26).

Each test runs on each target of TARGETS. The NVML suite runs on two
simulated GPU models without doubling its time: the UDS daemons simulate
A100-like GPUs and the TCP daemons H100-like ones (ZEUS_SIM_PROFILE,
docs/simulator.md); each AMD ABI runs on one transport (the transports
are the same code whatever the backend). Limits, names, library function
names and error texts come from the target (Target.default_limit,
Target.fn(), Target.err(), ...), never from constants in the tests. What
AMD GPUs do not have (persistence mode, resetting one clock domain) is
checked to be refused with 400 saying so (docs/amd.md), on every test
that touches it.

The simulator's call log shows what the daemon asked the "hardware" to do,
and its control file injects driver errors and delays while the daemon
runs (see simutil.py and docs/simulator.md). Timing checks use generous
bounds: the file also runs under ASan.
"""
import itertools
import json
import os
import re
import threading
import time

import pytest

from conftest import SIM, STOP_SIGNAL, WINE_RUN, Zeusd, linux_only, \
    raw_request, run_zeusd
from simutil import PROFILES, SimLog, write_control
from zeushelp import wait_until

NGPU = 4                    # the NVML simulator's default; AMD's is set
A100_LIMIT = PROFILES["a100"].default_limit   # the default profile's
# The profile each transport's NVML daemons simulate.
MODE_PROFILE = {"uds": PROFILES["a100"], "tcp": PROFILES["h100"]}

# (backend, transport) of each run of the suite.
TARGETS = [("nvml", "uds"), ("nvml", "tcp"), ("amdsmi24", "uds"),
           ("amdsmi25", "tcp"), ("amdsmi26", "uds")]

READS = ["get_power", "get_cumulative_energy", "get_power_limit",
         "get_power_limit_constraints", "get_persistence_mode"]

# endpoint -> parameters; clocks valid on every simulated GPU (the AMD
# simulator refuses a limit outside 500-2100 / 900-1300 MHz)
WRITES = {
    "set_power_limit": {"power_limit_mw": "250000"},
    "set_persistence_mode": {"enabled": "true"},
    "set_gpu_locked_clocks": {"min_clock_mhz": "600", "max_clock_mhz": "1200"},
    "reset_gpu_locked_clocks": {},
    "set_mem_locked_clocks": {"min_clock_mhz": "900", "max_clock_mhz": "1200"},
    "reset_mem_locked_clocks": {},
    "reset_locked_clocks": {},
}

# The library function behind each operation.
NVML_FNS = {
    "get_power": "nvmlDeviceGetFieldValues",
    "get_cumulative_energy": "nvmlDeviceGetTotalEnergyConsumption",
    "get_power_limit": "nvmlDeviceGetPowerManagementLimit",
    "get_power_limit_constraints":
        "nvmlDeviceGetPowerManagementLimitConstraints",
    "get_persistence_mode": "nvmlDeviceGetPersistenceMode",
    "set_power_limit": "nvmlDeviceSetPowerManagementLimit",
    "set_persistence_mode": "nvmlDeviceSetPersistenceMode",
    "set_gpu_locked_clocks": "nvmlDeviceSetGpuLockedClocks",
    "reset_gpu_locked_clocks": "nvmlDeviceResetGpuLockedClocks",
    "set_mem_locked_clocks": "nvmlDeviceSetMemoryLockedClocks",
    "reset_mem_locked_clocks": "nvmlDeviceResetMemoryLockedClocks",
    "handle": "nvmlDeviceGetHandleByIndex_v2",
}
AMD_FNS = {
    "get_power": "amdsmi_get_power_info",
    "get_cumulative_energy": "amdsmi_get_energy_count",
    "get_power_limit": "amdsmi_get_power_cap_info",
    "get_power_limit_constraints": "amdsmi_get_power_cap_info",
    "set_power_limit": "amdsmi_set_power_cap",
    "set_gpu_locked_clocks": "amdsmi_set_gpu_clk_limit",
    "set_mem_locked_clocks": "amdsmi_set_gpu_clk_limit",
    "reset_locked_clocks": "amdsmi_set_gpu_perf_level",
    "handle": "amdsmi_get_processor_handles",
}
# What AMD GPUs refuse (400, before anything is queued), and a phrase the
# reason has (docs/amd.md).
AMD_REFUSED = {
    "get_persistence_mode": "AMD GPUs have no persistence mode",
    "set_persistence_mode": "AMD GPUs have no persistence mode",
    "reset_gpu_locked_clocks": "resets GPU and memory clocks together "
                               "(use reset_locked_clocks)",
    "reset_mem_locked_clocks": "resets GPU and memory clocks together "
                               "(use reset_locked_clocks)",
}

# Library errors by what they mean: (the status's name in fault rules,
# HTTP status, text of the message), per library.
ERRORS = {
    "perm": {"nvml": ("NO_PERMISSION", 403, "Insufficient Permissions"),
             "amd": ("NO_PERM", 403, "Permission Denied")},
    "unsupported": {
        "nvml": ("NOT_SUPPORTED", 400,
                 "Not Supported (not supported by this GPU, "),
        "amd": ("NOT_SUPPORTED", 400,
                "Command not supported (not supported by this GPU)")},
    "invalid": {"nvml": ("INVALID_ARGUMENT", 400, "Invalid Argument"),
                "amd": ("INVAL", 400, "Invalid parameters")},
    # a GPU that cannot answer: NVML's lost one, AMD SMI's busy one
    "unavailable": {
        "nvml": ("GPU_IS_LOST", 503, "GPU is lost (it has fallen off the "
                 "bus"),
        "amd": ("BUSY", 503, "Device busy (retry later)")},
    "unknown": {"nvml": ("UNKNOWN", 500, "Unknown Error"),
                "amd": ("UNKNOWN_ERROR", 500, "An unknown error occurred")},
    "driver": {"nvml": ("DRIVER_NOT_LOADED", 500, ""),
               "amd": ("DRIVER_NOT_LOADED", 500, "")},
}

_seq = itertools.count()

# zeusd.exe (ZEUSD_WINE=1) answers persistence mode as Windows has it
# (docs/windows.md): the parametrizations that drive it are Linux-only.
PERSISTENCE = linux_only("persistence")


def params_but_persistence(names):
    """names as parameters, those of persistence mode marked Linux-only."""
    return [pytest.param(n, marks=PERSISTENCE) if "persistence" in n else n
            for n in names]


class Target:
    """Where a test's daemons run: the GPU backend (NVML, or the AMD SMI
    simulator of one ABI) and the transport, with the facts about the
    simulated GPUs and library that tests check."""

    def __init__(self, backend, mode):
        self.backend = backend
        self.mode = mode
        self.amd = backend.startswith("amdsmi")
        self.lib = "amd" if self.amd else "nvml"
        if self.amd:
            self.abi = int(backend[len("amdsmi"):])
            # releases before 26.2 are called one call at a time
            self.serialized = self.abi < 26
            self.name = "AMD Instinct MI300X"
            self.min_limit, self.max_limit = 200_000, 750_000
            self.default_limit = self.max_limit
            # gpu and mem locks within the simulator's ranges, and a
            # min == max lock
            self.locks = {"gpu": (600, 1005), "mem": (900, 1215),
                          "equal": 2100}
            self.args = ["--gpu-backend", "amdsmi"]
            # the simulator --simulate loads, not an AMDSMI_LIB_DIR
            self.env = {"ZEUS_AMDSMI_SIM_ABI": str(self.abi),
                        "ZEUS_SIM_GPUS": str(NGPU), "AMDSMI_LIB_DIR": ""}
        else:
            self.serialized = False
            self.profile = MODE_PROFILE[mode]
            self.name = self.profile.name
            self.default_limit = self.profile.default_limit
            self.min_limit = self.profile.min_limit
            self.max_limit = self.profile.max_limit
            self.locks = {"gpu": (210, 1005), "mem": (405, 1215),
                          "equal": 1410}
            self.args = []
            self.env = {"ZEUS_SIM_PROFILE": self.profile.key}

    def fn(self, op):
        """The library function behind an operation."""
        return (AMD_FNS if self.amd else NVML_FNS)[op]

    def refusal(self, endpoint):
        """A phrase of the 400 this backend answers to an operation it
        does not have; None when it has it."""
        return AMD_REFUSED.get(endpoint) if self.amd else None

    def err(self, kind):
        """(status name, HTTP status, text) of a kind of library error."""
        return ERRORS[kind][self.lib]

    def pci(self, i):
        """The simulator's default PCI address of GPU i."""
        return f"0000:{(0xc1 if self.amd else 1) + i:02x}:00.0"

    def perm_msg(self, gpu, op, write):
        """The whole message of a permission error on one GPU."""
        uid = os.geteuid()
        if self.amd:
            return f"GPU {gpu}: {op} failed: Permission Denied (the AMD " \
                f"driver lets only root change or read this; zeusd runs " \
                f"as uid {uid})"
        why = "change this setting" if write else \
            "privileged users read this"
        return f"GPU {gpu}: {op} failed: Insufficient Permissions (the " \
            f"NVIDIA driver lets only {'root ' if write else ''}{why}; " \
            f"zeusd runs as uid {uid})"

    def limit_of(self, call):
        """The limit in mW a set-power-limit call wrote (AMD SMI: uW)."""
        return int(call.args[-1]) // (1000 if self.amd else 1)

    def expect(self, endpoint, gpu, **p):
        """The library calls, (fn, gpu, args), that a write makes on one
        GPU (none for one this backend refuses). AMD clock limits are
        written minimum first: no test raises a range above the last."""
        if self.amd:
            if endpoint == "set_power_limit":
                return [("amdsmi_set_power_cap", gpu,
                         ["0", str(int(p["power_limit_mw"]) * 1000)])]
            if endpoint in ("set_gpu_locked_clocks",
                            "set_mem_locked_clocks"):
                dom = "SYS" if endpoint == "set_gpu_locked_clocks" else "MEM"
                return [("amdsmi_set_gpu_clk_limit", gpu,
                         [dom, "MIN", str(p["min_clock_mhz"])]),
                        ("amdsmi_set_gpu_clk_limit", gpu,
                         [dom, "MAX", str(p["max_clock_mhz"])])]
            if endpoint == "reset_locked_clocks":
                return [("amdsmi_set_gpu_perf_level", gpu, ["AUTO"])]
            return []
        if endpoint == "set_power_limit":
            return [(self.fn(endpoint), gpu, [str(p["power_limit_mw"])])]
        if endpoint == "set_persistence_mode":
            return [(self.fn(endpoint), gpu,
                     ["1" if p["enabled"] == "true" else "0"])]
        if endpoint in ("set_gpu_locked_clocks", "set_mem_locked_clocks"):
            return [(self.fn(endpoint), gpu, [str(p["min_clock_mhz"]),
                                              str(p["max_clock_mhz"])])]
        if endpoint == "reset_locked_clocks":
            return self.expect("reset_gpu_locked_clocks", gpu) + \
                self.expect("reset_mem_locked_clocks", gpu)
        return [(self.fn(endpoint), gpu, [])]


class Sim:
    """A daemon on the simulator with its call log and control file; the
    target's facts read through (sim.name, sim.fn(...), ...)."""

    def __init__(self, d, log, ctl, target):
        self.d = d
        self.log = log
        self.ctl = ctl
        self.target = target

    def __getattr__(self, name):
        return getattr(self.target, name)

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


@pytest.fixture(params=TARGETS, ids=[f"{b}-{m}" for b, m in TARGETS])
def target(request):
    return Target(*request.param)


@pytest.fixture
def sim_start(start, target, tmp_path):
    """sim_start(env={...}, args=[...]) -> Sim, on the test's target."""
    def _start(env=None, args=(), **kw):
        n = next(_seq)
        log = tmp_path / f"sim-{n}.log"
        ctl = tmp_path / f"sim-{n}.ctl"
        e = {"ZEUS_SIM_LOG": str(log), "ZEUS_SIM_CONTROL": str(ctl)}
        e.update(target.env)
        e.update(env or {})
        return Sim(start(target.mode, args=[*target.args, *args], env=e,
                         **kw), SimLog(log), ctl, target)
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





def assert_error(r, status, *needles):
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and isinstance(body["error"], str), body
    for n in needles:
        assert n in body["error"], body


def assert_refused(sim, r, endpoint):
    """The 400 of an operation this backend does not have."""
    assert_error(r, 400, f"{endpoint} is not supported: ",
                 sim.refusal(endpoint))


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
    # The instantaneous reading, not the averaged one: NVML's field, AMD
    # SMI's current socket power (only another choice is logged).
    last = sim.log.calls(sim.fn("get_power"), 0)[-1]
    if sim.amd:
        assert "event=amdsmi_power_source" not in sim.d.logs()
    else:
        assert last.args == ["186"]


@PERSISTENCE
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
    if sim.refusal("get_persistence_mode"):
        assert_refused(sim, r, "get_persistence_mode")
        return
    assert r.status_code == 200
    assert r.json() == {str(i): {"enabled": False} for i in range(NGPU)}


def test_read_keys_ascending_and_deduplicated(sim):
    for endpoint in READS:
        r = sim.get(f"/gpu/{endpoint}?gpu_ids=3,1,2,1")
        if sim.refusal(endpoint):
            assert_refused(sim, r, endpoint)
            continue
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
        assert g["pci_address"] == sim.pci(i)
        assert g["cumulative_energy_available"] is True


@pytest.mark.parametrize("endpoint", params_but_persistence(WRITES))
def test_write_success_shape_and_sim_calls(sim, endpoint):
    params = WRITES[endpoint]
    r = sim.write(endpoint, "2,0", **params)
    if sim.refusal(endpoint):
        assert_refused(sim, r, endpoint)
        assert sim.log.writes() == []
        return
    assert r.status_code == 200, r.text
    assert r.content == b""
    got = sorted(sim.log.writes())
    want = sorted(c for gpu in (0, 2) for c in
                  sim.expect(endpoint, gpu, **params))
    assert got == want


# --- values round-trip -------------------------------------------------------

def test_power_limit_round_trip(sim):
    assert sim.set_limit("1,3", 250_000).status_code == 200
    d = sim.default_limit
    assert limits(sim) == {0: d, 1: 250_000, 2: d, 3: 250_000}
    assert sorted(sim.log.writes()) == \
        sim.expect("set_power_limit", 1, power_limit_mw=250_000) + \
        sim.expect("set_power_limit", 3, power_limit_mw=250_000)
    # The boundaries of the constraints are accepted.
    mark = sim.log.mark()
    assert sim.set_limit("0", sim.min_limit).status_code == 200
    assert sim.set_limit("0", sim.max_limit).status_code == 200
    assert sim.log.writes(since=mark) == \
        sim.expect("set_power_limit", 0, power_limit_mw=sim.min_limit) + \
        sim.expect("set_power_limit", 0, power_limit_mw=sim.max_limit)
    assert limits(sim, "0") == {0: sim.max_limit}


def test_power_limit_caps_power(sim):
    assert sim.set_limit("0", 210_000).status_code == 200
    for _ in range(5):
        assert sim.get("/gpu/get_power?gpu_ids=0").json()["power_mw"]["0"] \
            <= 210_000


@PERSISTENCE
def test_persistence_round_trip(sim):
    r = sim.write("set_persistence_mode", "1,3", enabled="true")
    if sim.refusal("set_persistence_mode"):
        # AMD: neither way, blocking or not, and nothing reaches the GPU
        assert_refused(sim, r, "set_persistence_mode")
        assert_refused(sim, sim.write("set_persistence_mode", "3", False,
                                      enabled="false"),
                       "set_persistence_mode")
        assert_refused(sim, sim.get("/gpu/get_persistence_mode?gpu_ids=1,3"),
                       "get_persistence_mode")
        time.sleep(0.05)    # a wrongly queued block=false write would land
        assert sim.log.writes() == []
        return
    assert r.status_code == 200
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
    (glo, ghi), (mlo, mhi) = sim.locks["gpu"], sim.locks["mem"]
    assert sim.write("set_gpu_locked_clocks", "1", min_clock_mhz=glo,
                     max_clock_mhz=ghi).status_code == 200
    assert sim.write("set_mem_locked_clocks", "1", min_clock_mhz=mlo,
                     max_clock_mhz=mhi).status_code == 200
    assert sim.write("reset_locked_clocks", "1").status_code == 200
    assert sim.log.writes() == \
        sim.expect("set_gpu_locked_clocks", 1, min_clock_mhz=glo,
                   max_clock_mhz=ghi) + \
        sim.expect("set_mem_locked_clocks", 1, min_clock_mhz=mlo,
                   max_clock_mhz=mhi) + \
        sim.expect("reset_locked_clocks", 1)
    # min == max is a valid lock.
    top = sim.locks["equal"]
    assert sim.write("set_gpu_locked_clocks", "1", min_clock_mhz=top,
                     max_clock_mhz=top).status_code == 200


def test_duplicate_ids_collapse(sim):
    assert sim.set_limit("1,1", 300_000).status_code == 200
    assert sim.set_limit(" 2 , 2,2 ", 310_000).status_code == 200
    assert sim.log.writes() == \
        sim.expect("set_power_limit", 1, power_limit_mw=300_000) + \
        sim.expect("set_power_limit", 2, power_limit_mw=310_000)


# --- 400s --------------------------------------------------------------------

UNKNOWN_IDS = ["4", "0,4", "1,2,3,4", "99", "4294967295"]


def test_unknown_gpu_write_400_and_nothing_written(sim):
    # an unknown GPU is named before an operation AMD refuses is
    for ids in UNKNOWN_IDS:
        for endpoint, params in WRITES.items():
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
        for endpoint, params in WRITES.items():
            assert_error(sim.write(endpoint, ids, **params), 400, "gpu_ids",
                         needle)
        for endpoint in READS:
            assert_error(sim.get(f"/gpu/{endpoint}?gpu_ids={ids}"), 400,
                         "gpu_ids", needle)
    assert sim.log.writes() == []


def test_spaces_around_ids_trimmed(sim):
    assert sim.set_limit("%201%20,%203", 280_000).status_code == 200
    assert sorted(sim.log.writes()) == \
        sim.expect("set_power_limit", 1, power_limit_mw=280_000) + \
        sim.expect("set_power_limit", 3, power_limit_mw=280_000)
    r = sim.get("/gpu/get_power_limit?gpu_ids=%202,0%20")
    assert r.status_code == 200 and keys(r.text) == ["0", "2"]


def test_missing_and_unknown_parameters_400(sim):
    for endpoint, params in WRITES.items():
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
    code, _, text = sim.err("invalid")
    r = sim.set_limit("0,2", mw)
    assert r.status_code == 400, r.text
    assert r.json() == {"errors": {
        "0": f"GPU 0: set_power_limit failed: {text}",
        "2": f"GPU 2: set_power_limit failed: {text}"}}
    assert [c.rc for c in sim.log.calls(sim.fn("set_power_limit"))] == \
        [code] * 2
    assert limits(sim) == {i: sim.default_limit for i in range(NGPU)}


@pytest.mark.parametrize("endpoint", ["set_gpu_locked_clocks",
                                      "set_mem_locked_clocks"])
def test_min_above_max_clocks_400(sim, endpoint):
    for lo, hi in ((1000, 999), (5, 0)):
        r = sim.write(endpoint, "1", min_clock_mhz=lo, max_clock_mhz=hi)
        assert r.status_code == 400, r.text
        assert list(r.json()) == ["errors"]
        msg = r.json()["errors"]["1"]
        if sim.amd:
            # zeusd's own check: AMD SMI takes one limit per call, so the
            # pair never reaches the library to be refused there
            assert msg == f"GPU 1: {endpoint} failed: min_clock_mhz {lo} " \
                f"is above max_clock_mhz {hi}"
        else:
            assert msg == f"GPU 1: {endpoint} failed: Invalid Argument"
    if sim.amd:
        assert sim.log.writes() == []


# --- injected driver errors --------------------------------------------------

@linux_only("uid-wording")
def test_no_permission_on_one_gpu(sim):
    fn, code = sim.fn("set_power_limit"), sim.err("perm")[0]
    sim.control(f"fail {fn} 1 {code}")
    r = sim.set_limit("0,1,2", 200_000)
    assert r.status_code == 403, r.text
    assert r.json() == {"errors": {
        "1": sim.perm_msg(1, "set_power_limit", write=True)}}
    calls = {c.gpu: (c.args, c.rc) for c in sim.log.calls(fn)}
    args = sim.expect("set_power_limit", 0, power_limit_mw=200_000)[0][2]
    assert calls == {0: (args, "SUCCESS"), 1: (args, code),
                     2: (args, "SUCCESS")}
    d = sim.default_limit
    assert limits(sim) == {0: 200_000, 1: d, 2: 200_000, 3: d}


@PERSISTENCE    # its read is persistence mode
@pytest.mark.parametrize("kind", list(ERRORS))
def test_driver_error_status(sim, kind):
    code, status, text = sim.err(kind)
    wfn = sim.fn("set_mem_locked_clocks")
    # a read with the same fault: persistence mode, which AMD lacks
    read = "get_power_limit" if sim.amd else "get_persistence_mode"
    sim.control(f"fail {wfn} 2 {code}", f"fail {sim.fn(read)} 2 {code}")
    lo, hi = sim.locks["mem"]
    r = sim.write("set_mem_locked_clocks", "1,2,3", min_clock_mhz=lo,
                  max_clock_mhz=hi)
    assert r.status_code == status, r.text
    assert set(r.json()) == {"errors"}
    errs = r.json()["errors"]
    assert list(errs) == ["2"]
    assert errs["2"].startswith("GPU 2: set_mem_locked_clocks failed: ")
    assert text in errs["2"]
    assert sorted({c.gpu for c in sim.log.calls(wfn) if c.rc == "SUCCESS"}) \
        == [1, 3]
    r = sim.get(f"/gpu/{read}")
    assert r.status_code == status, r.text
    assert list(r.json()["errors"]) == ["2"]
    assert "GPU 2" in r.json()["errors"]["2"] and text in \
        r.json()["errors"]["2"]
    r = sim.get(f"/gpu/{read}?gpu_ids=0,1,3")
    assert r.status_code == 200 and keys(r.text) == ["0", "1", "3"]


@pytest.mark.parametrize("kinds,status", [
    (("invalid", "perm", "unknown"), 500),
    (("unsupported", "perm", None), 403),
    ((None, "unsupported", "invalid"), 400),
])
@PERSISTENCE    # its write is persistence mode
def test_mixed_errors_worst_status(sim, kinds, status):
    # a write every backend has besides the power limit read below
    if sim.amd:
        op, params = "set_gpu_locked_clocks", sim.locks["gpu"]
        params = {"min_clock_mhz": params[0], "max_clock_mhz": params[1]}
    else:
        op, params = "set_persistence_mode", {"enabled": "true"}
    rules = [f"fail {fn} {gpu} {sim.err(kind)[0]}"
             for gpu, kind in enumerate(kinds) if kind
             for fn in (sim.fn(op), sim.fn("get_power_limit"))]
    sim.control(*rules)
    failed = [str(g) for g, k in enumerate(kinds) if k]
    r = sim.write(op, "0,1,2,3", **params)
    assert r.status_code == status, r.text
    assert keys(r.text, "errors") == failed
    r = sim.get("/gpu/get_power_limit")
    assert r.status_code == status, r.text
    assert keys(r.text, "errors") == failed
    # The GPUs without a fault got the write.
    ok = sorted({c.gpu for c in sim.log.calls(sim.fn(op))
                 if c.rc == "SUCCESS"})
    assert ok == [g for g in range(NGPU) if str(g) not in failed]


@linux_only("uid-wording")
@pytest.mark.parametrize("endpoint", params_but_persistence(READS))
def test_read_errors(sim, endpoint):
    if sim.refusal(endpoint):
        # nothing to fail: refused before any GPU is asked
        assert_refused(sim, sim.get(f"/gpu/{endpoint}"), endpoint)
        assert_refused(sim, sim.get(f"/gpu/{endpoint}?gpu_ids=1"), endpoint)
        return
    fn = sim.fn(endpoint)
    perm, unknown = sim.err("perm"), sim.err("unknown")
    sim.control(f"fail {fn} 1 {perm[0]}", f"fail {fn} 3 {unknown[0]}")
    r = sim.get(f"/gpu/{endpoint}")
    assert r.status_code == 500, r.text
    errs = r.json()["errors"]
    assert keys(r.text, "errors") == ["1", "3"]
    assert errs["1"] == sim.perm_msg(1, endpoint, write=False)
    assert errs["3"] == f"GPU 3: {endpoint} failed: {unknown[2]}"
    # One failed GPU among several: the same status and words as above
    # (for get_power under privsep, one failure is answered from the
    # device process's batched reply on the HTTP loop, two go through the
    # power reader's thread: both paths must agree).
    for ids, bad, status in (("0,1,2", "1", 403), ("2,3", "3", 500)):
        r = sim.get(f"/gpu/{endpoint}?gpu_ids={ids}")
        assert r.status_code == status, r.text
        assert r.json()["errors"] == {bad: errs[bad]}, ids
    r = sim.get(f"/gpu/{endpoint}?gpu_ids=1")
    assert r.status_code == 403
    r = sim.get(f"/gpu/{endpoint}?gpu_ids=0,2")
    assert r.status_code == 200, r.text
    inner = "power_mw" if endpoint == "get_power" else None
    assert keys(r.text, inner) == ["0", "2"]


def test_reset_locked_clocks_tries_both_reports_first(sim):
    if sim.amd:
        # AMD SMI resets both domains in one call (the performance level)
        fn = sim.fn("reset_locked_clocks")
        sim.control(f"fail {fn} 0 NO_PERM", f"fail {fn} 1 NOT_SUPPORTED")
        r = sim.write("reset_locked_clocks", "0,1,2")
        assert r.status_code == 403, r.text
        errs = r.json()["errors"]
        assert list(errs) == ["0", "1"]
        assert "Permission Denied" in errs["0"]
        assert "Command not supported" in errs["1"]
        assert sorted(sim.log.writes()) == [
            (fn, g, ["AUTO"]) for g in (0, 1, 2)]
        return
    # GPU 1: both domains unsupported is the GPU's error; GPU 2: a domain
    # the GPU cannot lock (memory, as an H200 answers) has nothing to
    # reset, so resetting the other one is the whole answer
    sim.control("fail nvmlDeviceResetGpuLockedClocks 0 NO_PERMISSION",
                "fail nvmlDeviceResetMemoryLockedClocks 0 UNKNOWN",
                "fail nvmlDeviceResetGpuLockedClocks 1 NOT_SUPPORTED",
                "fail nvmlDeviceResetMemoryLockedClocks 1 NOT_SUPPORTED",
                "fail nvmlDeviceResetMemoryLockedClocks 2 NOT_SUPPORTED")
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
    r = sim.write("reset_locked_clocks", "2")
    assert r.status_code == 200, r.text


def test_power_falls_back_to_average(sim_start, target):
    if target.amd:
        # chosen once per GPU at start-up, when the current socket power
        # reads as not available (docs/amd.md)
        s = sim_start(env={"ZEUS_AMDSMI_SIM_CURRENT_NA": "1"})
        r = s.get("/gpu/get_power?gpu_ids=0,1")
        assert r.status_code == 200, r.text
        assert r.json()["power_mw"]["0"] > 0
        for g in range(NGPU):
            assert f"event=amdsmi_power_source gpu={g} source=average " \
                in s.d.logs()
        return
    s = sim_start()
    s.control("fail nvmlDeviceGetFieldValues 0 NOT_SUPPORTED")
    mark = s.log.mark()
    r = s.get("/gpu/get_power?gpu_ids=0,1")
    assert r.status_code == 200, r.text
    assert r.json()["power_mw"]["0"] > 0
    assert len(s.log.calls("nvmlDeviceGetPowerUsage", 0, mark)) == 1
    assert s.log.calls("nvmlDeviceGetPowerUsage", 1, mark) == []


def test_faults_lifted_at_runtime(sim):
    code, status, _ = sim.err("unavailable")
    sim.control(f"fail {sim.fn('set_power_limit')} * {code}")
    assert sim.set_limit("0", 200_000).status_code == status
    sim.control()
    assert sim.set_limit("0", 200_000).status_code == 200
    assert limits(sim, "0") == {0: 200_000}


# --- a GPU without an energy counter -----------------------------------------

def test_gpu_without_energy_counter(sim_start, target):
    fault = f"fail {target.fn('get_cumulative_energy')} 3 " \
        f"{target.err('unsupported')[0]}"
    s = sim_start(env={"ZEUS_SIM_FAULTS": fault})
    gpus = s.get("/discover").json()["gpus"]
    assert [g["cumulative_energy_available"] for g in gpus] == \
        [True, True, True, False]
    r = s.get("/gpu/get_cumulative_energy")
    assert r.status_code == 400, r.text
    if s.amd:
        # no counter to check at start-up: not offered, and said so
        assert list(r.json()["errors"]) == ["3"]
        assert r.json()["errors"]["3"].startswith(
            "GPU 3: get_cumulative_energy is not supported: ")
        assert "integrate" in r.json()["errors"]["3"]
        assert "event=amdsmi_energy_unavailable gpu=3 " \
            "reason=counter_unreadable" in s.d.logs()
    else:
        assert r.json() == {"errors": {
            "3": "GPU 3: get_cumulative_energy failed: Not Supported (not "
                 f"supported by this GPU, {s.name})"}}
    assert s.get("/gpu/get_cumulative_energy?gpu_ids=3").status_code == 400
    r = s.get("/gpu/get_cumulative_energy?gpu_ids=0,1,2")
    assert r.status_code == 200 and keys(r.text) == ["0", "1", "2"]
    # Everything else about GPU 3 works.
    for endpoint in READS:
        if endpoint == "get_cumulative_energy":
            continue
        r = s.get(f"/gpu/{endpoint}?gpu_ids=3")
        if s.refusal(endpoint):
            assert_refused(s, r, endpoint)
        else:
            assert r.status_code == 200, r.text
    assert s.set_limit("3", 300_000).status_code == 200


# --- block=false -------------------------------------------------------------

@PERSISTENCE    # one of its writes is persistence mode
def test_nonblocking_write_takes_effect(sim):
    r = sim.set_limit("0,2", 250_000, block=False)
    assert r.status_code == 200 and r.content == b""
    got = sim.log.wait_for(sim.fn("set_power_limit"), count=2)
    assert sorted((c.fn, c.gpu, c.args) for c in got) == \
        sim.expect("set_power_limit", 0, power_limit_mw=250_000) + \
        sim.expect("set_power_limit", 2, power_limit_mw=250_000)
    d = sim.default_limit
    assert limits(sim) == {0: 250_000, 1: d, 2: 250_000, 3: d}
    for endpoint, params in WRITES.items():
        mark = sim.log.mark()
        r = sim.write(endpoint, "3", False, **params)
        if sim.refusal(endpoint):
            # refused whole, not a 200 for a write that cannot happen
            assert_refused(sim, r, endpoint)
            continue
        assert r.status_code == 200
        fn, _, _ = sim.expect(endpoint, 3, **params)[-1]
        assert sim.log.wait_for(fn, 3, since=mark), endpoint


def test_nonblocking_answers_before_slow_write(sim):
    fn = sim.fn("set_power_limit")
    sim.control(f"delay {fn} 1 1500")
    t0 = time.monotonic_ns()
    r = sim.set_limit("1", 222_000, block=False)
    answered = time.monotonic_ns()
    assert r.status_code == 200
    assert answered - t0 < 900_000_000
    assert sim.log.calls(fn) == []
    got = sim.log.wait_for(fn, 1, timeout=10)
    assert len(got) == 1 and sim.limit_of(got[0]) == 222_000
    assert got[0].rc == "SUCCESS"
    assert got[0].end_ns > answered
    assert got[0].end_ns - got[0].start_ns >= 1_400_000_000
    assert limits(sim, "1") == {1: 222_000}


@PERSISTENCE
def test_nonblocking_failure_is_logged(sim):
    # persistence mode where the GPU has it, else the power limit
    if sim.amd:
        op, params = "set_power_limit", {"power_limit_mw": 300_000}
    else:
        op, params = "set_persistence_mode", {"enabled": "true"}
    code, _, text = sim.err("perm")
    sim.control(f"fail {sim.fn(op)} 2 {code}")
    r = sim.write(op, "1,2", False, **params)
    assert r.status_code == 200 and r.content == b""
    assert wait_until(lambda: "event=nonblocking_write_failed" in
                      sim.d.logs())
    logs = sim.d.logs()
    assert re.search(rf"event=nonblocking_write_failed gpu=2 op={op} "
                     rf"error=.*{text}", logs)
    assert wait_until(lambda: re.search(
        rf"event=nonblocking_write_done gpu=1 op={op}", sim.d.logs()))


# --- concurrency and ordering ------------------------------------------------

def test_writes_to_different_gpus_run_in_parallel(sim):
    fn = sim.fn("set_power_limit")
    sim.control(f"delay {fn} 0 1000", f"delay {fn} 1 1000")
    t0 = time.monotonic()
    r = sim.set_limit("0,1", 300_000)
    took = time.monotonic() - t0
    assert r.status_code == 200, r.text
    a, b = sim.log.calls(fn)
    if sim.serialized:
        # AMD SMI before 26.2 is not thread-safe: zeusd calls it one call
        # at a time (docs/amd.md), so the two writes follow each other
        assert "serialized=yes" in sim.d.logs()
        assert took >= 1.9, took
        assert a.end_ns <= b.start_ns or b.end_ns <= a.start_ns
        return
    assert 0.95 <= took < 1.8, took
    assert a.start_ns < b.end_ns and b.start_ns < a.end_ns   # overlap


def test_writes_to_one_gpu_keep_order(sim):
    fn = sim.fn("set_power_limit")
    sim.control(f"delay {fn} 2 150")
    values = [250_000, 390_000, 220_000, 333_000, 275_000]
    for v in values:
        assert sim.set_limit("2", v, block=False).status_code == 200
    # A read queues behind the writes on the same GPU.
    assert limits(sim, "2") == {2: values[-1]}
    calls = sim.log.calls(fn, 2)
    # A queued block=false write is replaced by a newer one of the same
    # setting before it starts (docs/design.md), so what ran is the sent
    # values in order with some left out, and always the last one.
    ran = [sim.limit_of(c) for c in calls]
    sent = iter(values)
    assert all(v in sent for v in ran), ran
    assert ran[-1] == values[-1]
    for prev, nxt in zip(calls, calls[1:]):
        assert nxt.start_ns >= prev.end_ns      # one at a time


def test_slow_gpu_does_not_hold_up_others(sim):
    sim.control(f"delay {sim.fn('set_power_limit')} 0 1500")
    assert sim.set_limit("0", 211_000, block=False).status_code == 200
    t0 = time.monotonic()
    assert sim.set_limit("1", 222_000).status_code == 200
    assert limits(sim, "1,2,3") == {1: 222_000, 2: sim.default_limit,
                                    3: sim.default_limit}
    if sim.serialized:
        # one library call at a time (AMD SMI before 26.2): GPU 1's calls
        # may wait for GPU 0's, so only the values are checked
        assert "serialized=yes" in sim.d.logs()
    else:
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
    assert len(sim.log.calls(sim.fn("set_power_limit"))) == 160


# --- a GPU lost mid-run ------------------------------------------------------

def lost_series(d):
    """zeusd_gpu_lost per GPU index from a /metrics scrape."""
    text = d.get("/metrics").text
    return {int(m.group(1)): int(m.group(2)) for m in re.finditer(
        r'^zeusd_gpu_lost\{index="(\d+)"\} (\d)$', text, re.M)}


def amd_gpu_failing_mid_run(sim):
    """AMD SMI has no "GPU is lost" status (docs/amd.md): a GPU whose every
    call fails answers 500 for each and is never flagged lost."""
    assert sim.get("/gpu/get_power").status_code == 200
    sim.control("fail * 2 NOT_FOUND")
    for endpoint in READS:
        r = sim.get(f"/gpu/{endpoint}")
        if sim.refusal(endpoint):
            assert_refused(sim, r, endpoint)
            continue
        assert r.status_code == 500, (endpoint, r.text)
        assert list(r.json()["errors"]) == ["2"], endpoint
        assert r.json()["errors"]["2"] == f"GPU 2: {endpoint} failed: " \
            "An unknown error occurred"
        r = sim.get(f"/gpu/{endpoint}?gpu_ids=0,1,3")
        assert r.status_code == 200, (endpoint, r.text)
    r = sim.set_limit("1,2", 260_000)
    assert r.status_code == 500
    assert list(r.json()["errors"]) == ["2"]
    assert [g["lost"] for g in sim.get("/discover").json()["gpus"]] == \
        [False] * NGPU
    assert lost_series(sim.d) == {i: 0 for i in range(NGPU)}
    assert "event=gpu_lost" not in sim.d.logs()
    sim.control()
    assert sim.get("/gpu/get_power").status_code == 200
    assert sim.set_limit("2", 270_000).status_code == 200
    d = sim.default_limit
    assert limits(sim) == {0: d, 1: 260_000, 2: 270_000, 3: d}


@PERSISTENCE    # it reads persistence mode of the lost GPU
@linux_only("rapl", "it reads /cpu/get_cumulative_energy")
def test_gpu_lost_mid_run(sim):
    if sim.amd:
        amd_gpu_failing_mid_run(sim)
        return
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
    fn = sim.fn("set_power_limit")
    sim.control(f"delay {fn} 0 700")
    target = "/gpu/set_power_limit?gpu_ids=0,1&block=true&power_limit_mw=" \
             "223000"
    d = sim.d
    s = d.raw_socket()
    s.sendall(f"POST {target} HTTP/1.1\r\nHost: zeusd\r\n\r\n".encode())
    time.sleep(0.1)
    s.close()
    assert sim.log.wait_for(fn, 0, timeout=5)
    time.sleep(0.1)
    assert sim.get("/time").status_code == 200
    assert limits(sim, "0,1") == {0: 223_000, 1: 223_000}


# --- node configurations -----------------------------------------------------

@pytest.mark.parametrize("n", [8, 12])
def test_many_gpus(sim_start, n):
    s = sim_start(env={"ZEUS_SIM_GPUS": str(n)})
    gpus = s.get("/discover").json()["gpus"]
    assert [g["id"] for g in gpus] == list(range(n))
    assert [g["pci_address"] for g in gpus] == [s.pci(i) for i in range(n)]
    want = [str(i) for i in range(n)]
    r = s.get("/gpu/get_power")
    assert keys(r.text, "power_mw") == want     # "10" after "9"
    r = s.get(f"/gpu/get_power_limit?gpu_ids={','.join(reversed(want))}")
    assert keys(r.text) == want
    assert s.set_limit(",".join(want), 200_000).status_code == 200
    assert sorted(c.gpu for c in s.log.calls(s.fn("set_power_limit"))) == \
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
    for endpoint, params in WRITES.items():
        assert_error(s.write(endpoint, "0", **params), 400,
                     "Unknown GPU index 0")
        assert_error(s.write(endpoint, "0", False, **params), 400,
                     "Unknown GPU index 0")


def test_sim_settings(sim_start):
    s = sim_start(env={"ZEUS_SIM_GPUS": "2",
                       "ZEUS_SIM_GPU_NAME": "Simulated GPU 9000",
                       "ZEUS_SIM_PCI": "0001:AB:1f.0"})
    gpus = s.get("/discover").json()["gpus"]
    assert [(g["name"], g["pci_address"]) for g in gpus] == [
        ("Simulated GPU 9000", "0001:ab:1f.0"),
        ("Simulated GPU 9000", s.pci(1))]


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
    # a library of the system that every process has loaded
    lib = "kernel32.dll" if WINE_RUN else "libc.so.6"
    r = run_zeusd("serve", "--nvml-library", lib, "--enable",
                  "gpu-read", "--socket-path", str(tmp_path / "s.sock"))
    assert r.returncode == 1, r.stderr
    assert "lacks symbol nvmlInit_v2" in r.stderr



@pytest.mark.parametrize("backend", ["nvml", "amdsmi"])
def test_bad_simulator_setting_fails_startup(tmp_path, backend):
    args = ["--gpu-backend", "amdsmi"] if backend == "amdsmi" else []
    r = run_zeusd("serve", "--simulate", *args, "--socket-path",
                  str(tmp_path / "s.sock"),
                  env={"ZEUS_SIM_GPUS": "65", "AMDSMI_LIB_DIR": ""})
    assert r.returncode == 1
    assert ("amdsmi_init failed: Invalid parameters" if args else
            "nvmlInit_v2 failed: Invalid Argument") in r.stderr, r.stderr


def test_gpu_lost_at_startup_others_serve(sim_start, target, tmp_path):
    if target.amd:
        # AMD SMI has no lost GPU to list: a GPU that fails at start-up
        # stops start-up, named
        r = run_zeusd("serve", "--simulate", "--socket-path",
                      str(tmp_path / "s.sock"), *target.args,
                      env={**target.env,
                           "ZEUS_SIM_FAULTS": "fail * 2 NOT_FOUND"})
        assert r.returncode == 1
        assert re.search(r"^zeusd: --gpu-backend amdsmi: GPU 2: "
                         r"amdsmi_get_processor_handles failed: ", r.stderr,
                         re.M), r.stderr
        assert not (tmp_path / "s.sock").exists()
        return
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


@pytest.mark.parametrize("backend", ["nvml", "amdsmi24", "amdsmi25",
                                     "amdsmi26"])
def test_gpu_unknown_error_at_startup_fails_clearly(tmp_path, backend):
    t = Target(backend, "uds")
    r = run_zeusd("serve", "--simulate", "--socket-path",
                  str(tmp_path / "s.sock"), *t.args,
                  env={**t.env, "ZEUS_SIM_FAULTS":
                       f"fail {t.fn('handle')} 2 {t.err('unknown')[0]}"})
    assert r.returncode == 1
    prefix = "--gpu-backend amdsmi: " if t.amd else ""
    assert re.search(rf"^zeusd: {prefix}GPU 2: .*{t.err('unknown')[2]}$",
                     r.stderr, re.M), r.stderr


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
    fn = sim.fn("set_power_limit")
    sim.control(f"delay {fn} 3 800")
    result = {}

    def slow():
        c = sim.d.make_client()
        result["r"] = c.post("/gpu/set_power_limit?gpu_ids=2,3&block=true"
                             "&power_limit_mw=299000")
        c.close()

    t = threading.Thread(target=slow)
    t.start()
    assert sim.log.wait_for(fn, 2)
    sim.d.proc.send_signal(STOP_SIGNAL)
    t.join(10)
    assert result["r"].status_code == 200
    assert sim.d.proc.wait(10) == 0


@PERSISTENCE    # one of its writes is persistence mode
def test_shutdown_drains_nonblocking_writes(sim):
    # two different settings, so neither write supersedes the other
    if sim.amd:
        lo, hi = sim.locks["gpu"]
        op, params = "set_gpu_locked_clocks", {"min_clock_mhz": lo,
                                               "max_clock_mhz": hi}
    else:
        op, params = "set_persistence_mode", {"enabled": "true"}
    sim.control(f"delay {sim.fn(op)} 1 300",
                f"delay {sim.fn('set_power_limit')} 1 300")
    assert sim.write(op, "1", False, **params).status_code == 200
    assert sim.set_limit("1", 200000, block=False).status_code == 200
    sim.d.proc.send_signal(STOP_SIGNAL)
    assert sim.d.proc.wait(10) == 0
    assert sim.log.writes() == sim.expect(op, 1, **params) + \
        sim.expect("set_power_limit", 1, power_limit_mw=200000)


def test_shutdown_with_command_longer_than_grace(tmp_path):
    # regression: MHD_stop_daemon() aborted on the still-suspended request
    ctl = tmp_path / "sim.ctl"
    write_control(ctl, "delay nvmlDeviceSetPowerManagementLimit 0 5600")
    d = Zeusd(tmp_path, env={"ZEUS_SIM_CONTROL": str(ctl)}).wait_ready()
    try:
        s = d.raw_socket()
        s.sendall(b"POST /gpu/set_power_limit?gpu_ids=0&block=true"
                  b"&power_limit_mw=200000 HTTP/1.1\r\nHost: zeusd\r\n\r\n")
        time.sleep(0.2)
        d.proc.send_signal(STOP_SIGNAL)
        rc = d.proc.wait(20)
        s.close()
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
        d.proc.wait()
        d.log.close()
    assert rc == 0, d.logs()[-2000:]



def test_raw_request_empty_body_on_write(sim):
    endpoint = "reset_gpu_locked_clocks"
    if sim.refusal(endpoint):
        status, _, body = raw_request(
            sim.d, f"/gpu/{endpoint}?gpu_ids=0&block=true", "POST")
        assert status == 400 and b"reset_locked_clocks" in body
        endpoint = "reset_locked_clocks"    # what AMD resets with
    status, head, body = raw_request(
        sim.d, f"/gpu/{endpoint}?gpu_ids=0&block=true", "POST")
    assert status == 200 and body == b""
    assert re.search(r"(?im)^content-length: 0\r?$", head)
