"""Black-box tests of zeusd across NVIDIA drivers and GPU generations
(docs/hardware.md, docs/simulator.md): simulated GPU models with different
limits, clocks and unsupported operations (ZEUS_SIM_PROFILE), an old
driver's library that lacks optional entry points (libnvml-sim-legacy.so),
what /discover and /metrics say about each GPU, and the simulator driven
the way NVML's Python binding drives it (ctypes, by the same symbol names,
struct layouts and call patterns), so NVML-based tools can run on it."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import BUILD, SIM
from simutil import MIXED, PROFILES, SimLog, write_control

LEGACY = BUILD / "libnvml-sim-legacy.so"
UPSTREAM = ["id", "name", "pci_address", "cumulative_energy_available"]
UUID_RE = r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

needs_legacy = pytest.mark.skipif(not LEGACY.exists(),
                                  reason="built with -Dtests=false")


def discover(d):
    r = d.get("/discover")
    assert r.status_code == 200, r.text
    return r.json()["gpus"]


# --- GPU models --------------------------------------------------------------

def test_mixed_node_discover(start, mode, tmp_path):
    d = start(mode, env={"ZEUS_SIM_PROFILE": "mixed"})
    gpus = discover(d)
    assert len(gpus) == len(MIXED)
    uuids = set()
    for g, key in zip(gpus, MIXED):
        p = PROFILES[key]
        assert list(g)[:4] == UPSTREAM
        assert g["name"] == p.name and g["architecture"] == p.arch
        assert g["cumulative_energy_available"] is p.energy
        assert g["lost"] is False
        assert re.fullmatch(UUID_RE, g["uuid"])
        uuids.add(g["uuid"])
        assert g["supports"] == {"power_limit": True,
                                 "persistence_mode": True,
                                 "gpu_locked_clocks": p.gpu_locked,
                                 "mem_locked_clocks": p.mem_locked}
        assert g["power_limit_range_mw"] == {"min": p.min_limit,
                                             "max": p.max_limit,
                                             "default": p.default_limit}
        assert g["clock_range_mhz"] == {
            "gpu": {"min": p.gpu_clocks[0], "max": p.gpu_clocks[1]},
            "mem": {"min": p.mem_clocks[0], "max": p.mem_clocks[1]}}
    assert len(uuids) == len(MIXED)
    # The same UUIDs label zeusd_gpu_info, in dcgm-exporter's spelling too.
    text = d.get("/metrics").text
    for g in gpus:
        assert re.search(r'^zeusd_gpu_info\{index="%d",.*uuid="%s",'
                         r'UUID="%s",' % (g["id"], g["uuid"], g["uuid"]),
                         text, re.M), text
    # Each GPU's own limits apply.
    r = d.get("/gpu/get_power_limit_constraints")
    assert {k: v["max_power_limit_mw"] for k, v in r.json().items()} == \
        {str(i): PROFILES[k].max_limit for i, k in enumerate(MIXED)}
    r = d.post("/gpu/set_power_limit?gpu_ids=0,2&block=true"
               "&power_limit_mw=650000")
    assert r.status_code == 400, r.text
    assert list(r.json()["errors"]) == ["0"]      # the V100 tops at 300 W


def test_gpu_decides_what_it_supports(start, mode, tmp_path):
    log = tmp_path / "sim.log"
    d = start(mode, env={"ZEUS_SIM_PROFILE": "v100,a100,rtx4090,p100",
                         "ZEUS_SIM_LOG": str(log)})
    r = d.post("/gpu/set_mem_locked_clocks?gpu_ids=0,1&block=true"
               "&min_clock_mhz=877&max_clock_mhz=877")
    assert r.status_code == 400, r.text
    assert r.json() == {"errors": {"0": (
        "GPU 0: set_mem_locked_clocks failed: Not Supported (not supported "
        "by this GPU, Tesla V100-SXM2-32GB)")}}
    r = d.post("/gpu/set_gpu_locked_clocks?gpu_ids=3&block=true"
               "&min_clock_mhz=600&max_clock_mhz=900")
    assert r.status_code == 400
    assert "Tesla P100-PCIE-16GB" in r.json()["errors"]["3"]
    r = d.get("/gpu/get_cumulative_energy")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["3"]
    # No instantaneous power field on the GeForce: the 1 s average.
    r = d.get("/gpu/get_power")
    assert r.status_code == 200 and len(r.json()["power_mw"]) == 4
    calls = SimLog(log).calls("nvmlDeviceGetPowerUsage")
    assert sorted({c.gpu for c in calls}) == [2, 3]


# --- an old driver -----------------------------------------------------------

@needs_legacy
def test_legacy_driver_degrades_per_feature(start, mode, tmp_path):
    log, ctl = tmp_path / "sim.log", tmp_path / "sim.ctl"
    d = start(mode, args=["--nvml-library", str(LEGACY)],
              env={"ZEUS_SIM_LOG": str(log), "ZEUS_SIM_CONTROL": str(ctl)})
    sim = SimLog(log)
    # Found through the older names.
    assert [c.fn for c in sim.calls()][:2] == ["nvmlInit",
                                               "nvmlDeviceGetCount"]
    logs = d.logs()
    missing = re.findall(r"event=nvml_features_missing symbols=\"([^\"]*)\""
                         r" unavailable=\"([^\"]*)\"", logs)
    assert len(missing) == 1, logs              # said once, at startup
    assert missing[0][0].split() == [
        "nvmlDeviceGetArchitecture", "nvmlDeviceGetFieldValues",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceSetMemoryLockedClocks",
        "nvmlDeviceResetMemoryLockedClocks"]
    assert "set_mem_locked_clocks" in missing[0][1]
    assert re.search(r"event=nvml_older_entry_points symbols=\"nvmlInit "
                     r"nvmlDeviceGetCount nvmlDeviceGetHandleByIndex "
                     r"nvmlDeviceGetPciInfo\"", logs)
    assert 'driver="450.80.02"' in logs

    gpus = discover(d)
    assert [g["pci_address"] for g in gpus] == \
        [f"0000:0{i}:00.0" for i in range(1, 5)]
    g = gpus[0]
    assert g["architecture"] == "unknown"
    assert g["cumulative_energy_available"] is False
    assert g["supports"]["mem_locked_clocks"] is False
    assert g["supports"]["gpu_locked_clocks"] is True

    # Reads it has work; power from the averaged call.
    for ep in ("get_power", "get_power_limit", "get_power_limit_constraints",
               "get_persistence_mode"):
        assert d.get(f"/gpu/{ep}").status_code == 200, ep
    assert sim.calls("nvmlDeviceGetPowerUsage")
    # What it lacks is one 400 for the request, whatever the GPUs.
    r = d.get("/gpu/get_cumulative_energy?gpu_ids=1,2")
    assert r.status_code == 400
    assert r.json() == {"error": "get_cumulative_energy is not supported by "
                        "this NVIDIA driver (NVML lacks "
                        "nvmlDeviceGetTotalEnergyConsumption)"}
    mark = sim.mark()
    for block in ("true", "false"):
        r = d.post(f"/gpu/set_mem_locked_clocks?gpu_ids=0&block={block}"
                   "&min_clock_mhz=405&max_clock_mhz=810")
        assert r.status_code == 400, r.text
        assert "NVML lacks nvmlDeviceSetMemoryLockedClocks" in \
            r.json()["error"]
        r = d.post(f"/gpu/reset_mem_locked_clocks?gpu_ids=0&block={block}")
        assert r.status_code == 400
    # Bad input is still reported as such first.
    r = d.post("/gpu/set_mem_locked_clocks?gpu_ids=9&block=true"
               "&min_clock_mhz=405&max_clock_mhz=810")
    assert "Unknown GPU index 9" in r.json()["error"]
    # Both domains: the one the driver can lock is reset, and that is all.
    r = d.post("/gpu/reset_locked_clocks?gpu_ids=0,1&block=true")
    assert r.status_code == 200, r.text
    assert sorted((fn, g) for fn, g, _ in sim.writes(since=mark)) == [
        ("nvmlDeviceResetGpuLockedClocks", 0),
        ("nvmlDeviceResetGpuLockedClocks", 1)]
    # The writes it has work.
    r = d.post("/gpu/set_power_limit?gpu_ids=0&block=true"
               "&power_limit_mw=250000")
    assert r.status_code == 200
    assert d.get("/gpu/get_power_limit?gpu_ids=0").json() == \
        {"0": {"power_limit_mw": 250000}}
    # /metrics leaves out what cannot be read, counts nothing as failed.
    text = d.get("/metrics").text
    assert "zeusd_gpu_energy_joules_total{" not in text
    assert re.search(r'^zeusd_gpu_power_watts\{index="3"\} ', text, re.M)
    assert re.search(r'^zeusd_device_command_errors_total\{device="gpu",'
                     r'index="0"\} 0$', text, re.M)
    # Lost GPUs work the same on it.
    write_control(ctl, "fail * 1 GPU_IS_LOST")
    assert d.get("/gpu/get_power").status_code == 503
    assert [g["lost"] for g in discover(d)] == [False, True, False, False]


@needs_legacy
def test_override_stands_in_for_missing_entry_point(start, mode, tmp_path):
    rec = tmp_path / "argv.log"
    helpers = os.path.join(os.path.dirname(__file__), "helpers")
    ov = tmp_path / "ov.toml"
    ov.write_text(f"""
[set_mem_locked_clocks]
commands = ["{helpers}/record-argv {rec} {{gpu_id}} {{max_clock_mhz}}"]
""")
    os.chmod(ov, 0o644)
    d = start(mode, args=["--nvml-library", str(LEGACY),
                          "--gpu-command-overrides", str(ov)])
    assert discover(d)[0]["supports"]["mem_locked_clocks"] is True
    r = d.post("/gpu/set_mem_locked_clocks?gpu_ids=2&block=true"
               "&min_clock_mhz=405&max_clock_mhz=810")
    assert r.status_code == 200, r.text
    assert rec.read_text().splitlines() == ["2 [2] [810]"]
    # Still refused where neither the driver nor an override can do it.
    r = d.post("/gpu/reset_mem_locked_clocks?gpu_ids=2&block=true")
    assert r.status_code == 400


# --- NVML's Python binding ---------------------------------------------------

# The calls nvidia-ml-py makes on start-up and for power and energy work,
# written against ctypes the same way: the library loaded by its soname,
# each function looked up by its exported name, buffers of nvml.h's sizes,
# size-probing calls for tables, structs with nvml.h's field order.
BINDING_CLIENT = textwrap.dedent(r"""
    import json, sys
    from ctypes import (CDLL, POINTER, Structure, byref, c_char, c_char_p,
                        c_int, c_uint, c_ulonglong, c_void_p, create_string_buffer)

    class PciInfo(Structure):
        _fields_ = [("busIdLegacy", c_char * 16), ("domain", c_uint),
                    ("bus", c_uint), ("device", c_uint),
                    ("pciDeviceId", c_uint), ("pciSubSystemId", c_uint),
                    ("busId", c_char * 32)]

    class Memory(Structure):
        _fields_ = [("total", c_ulonglong), ("free", c_ulonglong),
                    ("used", c_ulonglong)]

    class Utilization(Structure):
        _fields_ = [("gpu", c_uint), ("memory", c_uint)]

    class Dev(Structure):
        pass

    lib = CDLL("libnvidia-ml.so.1")
    lib.nvmlErrorString.restype = c_char_p

    def call(name, *args):
        rc = getattr(lib, name)(*args)
        if rc != 0:
            raise RuntimeError(name + ": " +
                               lib.nvmlErrorString(rc).decode())

    def string(name, *args, size):
        buf = create_string_buffer(size)
        call(name, *args, buf, c_uint(size))
        return buf.value.decode()

    def table(name, *args):
        n = c_uint(0)
        rc = getattr(lib, name)(*args, byref(n), None)
        if rc == 0:
            return []
        assert rc == 7, rc          # NVML_ERROR_INSUFFICIENT_SIZE
        arr = (c_uint * n.value)()
        call(name, *args, byref(n), arr)
        return list(arr)[:n.value]

    def uint(name, *args):
        v = c_uint()
        call(name, *args, byref(v))
        return v.value

    call("nvmlInitWithFlags", c_uint(0))
    out = {"driver": string("nvmlSystemGetDriverVersion", size=80),
           "nvml": string("nvmlSystemGetNVMLVersion", size=80),
           "gpus": []}
    n = c_uint()
    call("nvmlDeviceGetCount_v2", byref(n))
    for i in range(n.value):
        h = POINTER(Dev)()
        call("nvmlDeviceGetHandleByIndex_v2", c_uint(i), byref(h))
        pci = PciInfo()
        call("nvmlDeviceGetPciInfo_v3", h, byref(pci))
        mem, util = Memory(), Utilization()
        call("nvmlDeviceGetMemoryInfo", h, byref(mem))
        call("nvmlDeviceGetUtilizationRates", h, byref(util))
        lo, hi = c_uint(), c_uint()
        call("nvmlDeviceGetPowerManagementLimitConstraints", h, byref(lo),
             byref(hi))
        energy = c_ulonglong()
        call("nvmlDeviceGetTotalEnergyConsumption", h, byref(energy))
        mems = table("nvmlDeviceGetSupportedMemoryClocks", h)
        gfx = table("nvmlDeviceGetSupportedGraphicsClocks", h,
                    c_uint(mems[0]))
        out["gpus"].append({
            "name": string("nvmlDeviceGetName", h, size=96),
            "uuid": string("nvmlDeviceGetUUID", h, size=96),
            "bus_id": pci.busId.decode(), "arch":
                uint("nvmlDeviceGetArchitecture", h),
            "power_mw": uint("nvmlDeviceGetPowerUsage", h),
            "energy_mj": energy.value,
            "limit": uint("nvmlDeviceGetPowerManagementLimit", h),
            "default_limit": uint("nvmlDeviceGetPowerManagementDefaultLimit",
                                  h),
            "enforced_limit": uint("nvmlDeviceGetEnforcedPowerLimit", h),
            "constraints": [lo.value, hi.value],
            "temp": uint("nvmlDeviceGetTemperature", h, c_int(0)),
            "sm_clock": uint("nvmlDeviceGetClockInfo", h, c_int(1)),
            "max_mem_clock": uint("nvmlDeviceGetMaxClockInfo", h, c_int(2)),
            "mem": [mem.total, mem.free, mem.used],
            "util": [util.gpu, util.memory],
            "mem_clocks": mems, "gfx_clocks": [gfx[0], gfx[-1], len(gfx)]})
    # Errors come back as codes with the driver's text.
    h = POINTER(Dev)()
    rc = lib.nvmlDeviceGetHandleByIndex_v2(c_uint(99), byref(h))
    out["bad_index"] = [rc, lib.nvmlErrorString(rc).decode()]
    call("nvmlShutdown")
    json.dump(out, sys.stdout)
""")


def sanitizer_preload(lib):
    """The sanitizer runtimes a sanitized build of `lib` needs first in a
    process that was not built with them (python), for LD_PRELOAD."""
    out = subprocess.run(["ldd", str(lib)], capture_output=True,
                         text=True).stdout
    return [m.group(1) for m in re.finditer(
        r"lib(?:asan|ubsan)\.so\S*\s+=>\s+(\S+)", out)]


def run_binding_client(tmp_path, env, code=BINDING_CLIENT):
    """Runs `code` with libnvidia-ml.so.1 resolving to the simulator, the
    way docs/simulator.md tells an NVML-based Python tool to."""
    fake = tmp_path / "fake-driver"
    fake.mkdir(exist_ok=True)
    link = fake / "libnvidia-ml.so.1"
    if not link.exists():
        link.symlink_to(SIM)
    e = dict(os.environ)
    e.update(env)
    e["LD_LIBRARY_PATH"] = f"{fake}:{e.get('LD_LIBRARY_PATH', '')}"
    pre = sanitizer_preload(SIM)
    if pre:     # an ASan build: python itself is not sanitized
        e["LD_PRELOAD"] = " ".join(pre)
        e["ASAN_OPTIONS"] = "detect_leaks=0"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, env=e, timeout=60)
    assert r.returncode == 0, r.stderr
    return r


def test_python_binding_calls(tmp_path):
    log = tmp_path / "sim.log"
    out = json.loads(run_binding_client(tmp_path, {
        "ZEUS_SIM_PROFILE": "h200,v100", "ZEUS_SIM_LOG": str(log)}).stdout)
    assert out["driver"] == "570.124.06"
    assert out["nvml"].startswith("12.")
    h200, v100 = out["gpus"]
    assert h200["name"] == "NVIDIA H200" and h200["arch"] == 9
    assert re.fullmatch(UUID_RE, h200["uuid"])
    assert h200["bus_id"] == "00000000:01:00.0"
    assert h200["constraints"] == [200_000, 700_000]
    assert h200["limit"] == h200["default_limit"] == \
        h200["enforced_limit"] == 700_000
    assert h200["mem"][0] == 141 << 30 and sum(h200["mem"][1:]) == 141 << 30
    assert h200["mem_clocks"] == [3201] and h200["max_mem_clock"] == 3201
    assert h200["gfx_clocks"] == [1980, 345, 110]
    assert 345 <= h200["sm_clock"] <= 1980
    assert 30 <= h200["temp"] <= 85
    assert 0 <= h200["util"][0] <= 100
    assert 0 < h200["power_mw"] <= 700_000
    assert h200["energy_mj"] >= 3.6e9
    assert v100["arch"] == 5 and v100["mem_clocks"] == [877]
    assert out["bad_index"] == [2, "Invalid Argument"]
    # The simulator saw what a tool does: init with flags, then reads.
    calls = [c.fn for c in SimLog(log).calls()]
    assert calls[0] == "nvmlInitWithFlags" and calls[-1] == "nvmlShutdown"


def test_real_python_binding_if_installed(tmp_path):
    """nvidia-ml-py itself (Debian has no package for it; skipped unless
    someone installed it) against the simulator."""
    try:
        import pynvml  # noqa: F401
    except ImportError:
        pytest.skip("nvidia-ml-py (pynvml) not installed")
    code = textwrap.dedent("""
        import json, sys, pynvml as n
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(0)
        print(json.dumps([n.nvmlDeviceGetCount(),
                          n.nvmlDeviceGetPowerManagementLimitConstraints(h),
                          n.nvmlDeviceGetTotalEnergyConsumption(h) > 0,
                          n.nvmlDeviceGetSupportedMemoryClocks(h)]))
        n.nvmlShutdown()
    """)
    out = json.loads(run_binding_client(tmp_path, {
        "ZEUS_SIM_PROFILE": "a100", "ZEUS_SIM_GPUS": "2"}, code).stdout)
    assert out == [2, [100000, 400000], True, [1593, 1512, 810, 405]]
