"""Black-box tests of zeusd's AMD backend (docs/amd.md): the real daemon
with `--gpu-backend amdsmi` on the AMD SMI simulator (sim/amdsmi_sim.c),
built once per library ABI. Most tests link the build under the
library's soname into a directory that AMDSMI_LIB_DIR names, as a ROCm
install would provide it (with `--simulate` on, so the CPU side is the
simulated RAPL tree: an AMDSMI_LIB_DIR wins over the simulator there);
the `--simulate` tests at the end load the simulator the way
`zeusd serve --simulate --gpu-backend amdsmi` does by itself
(ZEUS_AMDSMI_SIM_ABI picks the ABI). The generic GPU suite
(test_gpu.py) runs on every ABI too.

The simulator's call log (same format as the NVML simulator's, read with
simutil.SimLog) shows what the daemon asked the "hardware" to do; its
control file injects errors.
"""
import os
import re

import pytest

from conftest import BUILD, run_zeusd
from simutil import SimLog, write_control
from zeushelp import GPU_EVENT, Stream

ABIS = ["24", "25", "26"]
NGPU = 2                     # the simulator's default
WATTS = [300, 325]           # 300 + 25 * i
CAP_MAX_MW = 750_000


def lib_dir(tmp_path, abi):
    d = tmp_path / f"rocm{abi}"
    d.mkdir(exist_ok=True)
    link = d / f"libamd_smi.so.{abi}"
    if not link.exists():
        link.symlink_to(BUILD / f"libamdsmi-sim{abi}.so")
    return d


class Amd:
    def __init__(self, d, log, ctl, abi):
        self.d = d
        self.log = log
        self.ctl = ctl
        self.abi = abi

    def get(self, path):
        return self.d.get(path)

    def write(self, endpoint, ids, **params):
        q = f"gpu_ids={ids}&block=true"
        for k, v in params.items():
            q += f"&{k}={v}"
        return self.d.post(f"/gpu/{endpoint}?{q}")


@pytest.fixture(params=ABIS)
def amd(request, start, tmp_path):
    abi = request.param
    log = tmp_path / "amd.log"
    ctl = tmp_path / "amd.ctl"
    env = {"AMDSMI_LIB_DIR": str(lib_dir(tmp_path, abi)),
           "ZEUS_SIM_LOG": str(log), "ZEUS_SIM_CONTROL": str(ctl)}
    d = start("uds", args=["--gpu-backend", "amdsmi"], env=env)
    return Amd(d, SimLog(log), ctl, abi)


def assert_error(r, status, *needles):
    """A read's {"error": ...} or a blocking write's per-GPU "errors"."""
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) in ({"error"}, {"errors"}), body
    for n in needles:
        assert n in r.text, body


def test_discover(amd):
    gpus = amd.get("/discover").json()["gpus"]
    assert [g["id"] for g in gpus] == list(range(NGPU))
    assert [g["pci_address"] for g in gpus] == ["0000:c1:00.0",
                                                "0000:c2:00.0"]
    assert {g["name"] for g in gpus} == {"AMD Instinct MI300X"}
    assert all(g["cumulative_energy_available"] for g in gpus)
    # the library AMDSMI_LIB_DIR names, although --simulate is on
    lib = f'{amd.d.env["AMDSMI_LIB_DIR"]}/libamd_smi.so.{amd.abi}'
    assert f'event=amdsmi_opened library="{lib}" ' in amd.d.logs()


def test_get_power(amd):
    r = amd.get("/gpu/get_power")
    assert r.status_code == 200, r.text
    assert r.json()["power_mw"] == {str(i): w * 1000
                                    for i, w in enumerate(WATTS)}
    assert amd.log.calls("amdsmi_get_power_info", gpu=1)


def test_cumulative_energy_grows(amd):
    a = amd.get("/gpu/get_cumulative_energy").json()
    b = amd.get("/gpu/get_cumulative_energy").json()
    for i in range(NGPU):
        assert b[str(i)]["energy_mj"] >= a[str(i)]["energy_mj"] > 0


def test_power_limit_round_trip_in_microwatts(amd):
    r = amd.get("/gpu/get_power_limit_constraints?gpu_ids=0").json()
    assert r["0"] == {"min_power_limit_mw": 200_000,
                      "max_power_limit_mw": CAP_MAX_MW}
    mark = amd.log.mark()
    assert amd.write("set_power_limit", "0,1",
                     power_limit_mw=250000).status_code == 200
    calls = amd.log.calls("amdsmi_set_power_cap", since=mark)
    assert sorted((c.gpu, c.args) for c in calls) == [
        (0, ["0", "250000000"]), (1, ["0", "250000000"])]
    got = amd.get("/gpu/get_power_limit").json()
    assert got == {"0": {"power_limit_mw": 250000},
                   "1": {"power_limit_mw": 250000}}
    # out of range: the library's INVAL is a 400
    assert_error(amd.write("set_power_limit", "0", power_limit_mw=100000),
                 400)


def test_locked_clocks_and_reset(amd):
    mark = amd.log.mark()
    assert amd.write("set_gpu_locked_clocks", "0", min_clock_mhz=600,
                     max_clock_mhz=1500).status_code == 200
    # raising both limits above the range just set: the maximum first
    # (the simulator, like the driver, refuses a minimum above the maximum)
    assert amd.write("set_gpu_locked_clocks", "0", min_clock_mhz=1600,
                     max_clock_mhz=2000).status_code == 200
    assert amd.write("set_mem_locked_clocks", "0", min_clock_mhz=900,
                     max_clock_mhz=1200).status_code == 200
    assert amd.write("reset_locked_clocks", "0").status_code == 200
    got = [(c.fn, c.args) for c in amd.log.calls(gpu=0, since=mark)
           if c.fn.startswith("amdsmi_set_")]
    assert got == [
        ("amdsmi_set_gpu_clk_limit", ["SYS", "MIN", "600"]),
        ("amdsmi_set_gpu_clk_limit", ["SYS", "MAX", "1500"]),
        ("amdsmi_set_gpu_clk_limit", ["SYS", "MAX", "2000"]),
        ("amdsmi_set_gpu_clk_limit", ["SYS", "MIN", "1600"]),
        ("amdsmi_set_gpu_clk_limit", ["MEM", "MIN", "900"]),
        ("amdsmi_set_gpu_clk_limit", ["MEM", "MAX", "1200"]),
        ("amdsmi_set_gpu_perf_level", ["AUTO"]),
    ]
    assert all(c.rc == "SUCCESS" for c in amd.log.calls(
        "amdsmi_set_gpu_clk_limit", since=mark))


def test_stale_clock_range_is_read_back_and_retried(amd):
    # zeusd believes [500, 2100] (read at open); the range then changes
    # behind its back, so its first order fails and it re-reads and retries
    assert amd.write("set_gpu_locked_clocks", "1", min_clock_mhz=600,
                     max_clock_mhz=700).status_code == 200
    mark = amd.log.mark()
    write_control(amd.ctl, "fail amdsmi_set_gpu_clk_limit 1 INVAL")
    assert_error(amd.write("set_gpu_locked_clocks", "1", min_clock_mhz=800,
                           max_clock_mhz=900), 400, "GPU 1")
    write_control(amd.ctl)
    assert amd.log.calls("amdsmi_get_clock_info", gpu=1, since=mark)
    assert amd.write("set_gpu_locked_clocks", "1", min_clock_mhz=800,
                     max_clock_mhz=900).status_code == 200


def test_unsupported_on_amd_400(amd):
    mark = amd.log.mark()
    assert_error(amd.write("set_persistence_mode", "0", enabled="true"),
                 400, "persistence mode")
    assert_error(amd.get("/gpu/get_persistence_mode"), 400,
                 "persistence mode")
    assert_error(amd.write("reset_gpu_locked_clocks", "0"), 400,
                 "reset_locked_clocks")
    assert_error(amd.write("reset_mem_locked_clocks", "0"), 400)
    assert not [c for c in amd.log.calls(since=mark)
                if c.fn.startswith("amdsmi_set_")]


def test_permission_error_403(amd):
    write_control(amd.ctl, "fail amdsmi_set_power_cap * NO_PERM")
    assert_error(amd.write("set_power_limit", "1", power_limit_mw=300000),
                 403, "GPU 1", "set_power_limit")
    write_control(amd.ctl)
    assert amd.write("set_power_limit", "1",
                     power_limit_mw=300000).status_code == 200


def test_current_power_not_available_uses_average(start, tmp_path):
    env = {"AMDSMI_LIB_DIR": str(lib_dir(tmp_path, "25")),
           "ZEUS_AMDSMI_SIM_CURRENT_NA": "1"}
    d = start("uds", args=["--gpu-backend", "amdsmi"], env=env)
    assert d.get("/gpu/get_power?gpu_ids=1").json()["power_mw"] == {
        "1": 325000}


def test_energy_counter_that_disagrees_is_not_used(start, tmp_path):
    env = {"AMDSMI_LIB_DIR": str(lib_dir(tmp_path, "26")),
           "ZEUS_AMDSMI_SIM_ENERGY_SCALE": "20"}
    d = start("uds", args=["--gpu-backend", "amdsmi"], env=env)
    gpus = d.get("/discover").json()["gpus"]
    assert not any(g["cumulative_energy_available"] for g in gpus)
    assert_error(d.get("/gpu/get_cumulative_energy?gpu_ids=0"), 400,
                 "disagreed", "integrate")


def test_auto_picks_amdsmi_without_nvml(start, tmp_path):
    # no --simulate: auto probes the real NVML (absent here), then AMD SMI
    rapl = tmp_path / "rapl"
    rapl.mkdir()
    env = {"AMDSMI_LIB_DIR": str(lib_dir(tmp_path, "26")),
           "LD_LIBRARY_PATH": ""}
    d = start("uds", args=["--gpu-backend", "auto", "--rapl-dir",
                           str(rapl)], env=env, simulate=False)
    assert len(d.get("/discover").json()["gpus"]) == NGPU
    assert "backend=amdsmi" in d.logs()


def test_explicit_amdsmi_without_library_fails_fast(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_zeusd("serve", "--simulate", "--gpu-backend", "amdsmi",
                  "--socket-path", str(tmp_path / "s"),
                  env={"AMDSMI_LIB_DIR": str(empty)})
    assert r.returncode == 1
    assert "--gpu-backend amdsmi" in r.stderr
    assert "cannot load the AMD SMI library" in r.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("abi,version,needle", [
    ("24", "24.6.2.0", "oldest ROCm zeusd supports is 6.3"),   # ROCm 6.2
    ("25", "24.7.1.0", "does not match its ABI"),
    ("26", "25.0.0", "does not match its ABI"),
])
def test_refused_versions(tmp_path, abi, version, needle):
    r = run_zeusd("serve", "--simulate", "--gpu-backend", "amdsmi",
                  "--socket-path", str(tmp_path / "s"),
                  env={"AMDSMI_LIB_DIR": str(lib_dir(tmp_path, abi)),
                       "ZEUS_AMDSMI_SIM_VERSION": version})
    assert r.returncode == 1
    assert needle in r.stderr, r.stderr
    assert not (tmp_path / "s").exists()


# --- `zeusd serve --simulate --gpu-backend amdsmi` ---------------------------

def sim_env(abi=None, **extra):
    """The environment of a daemon on the simulator --simulate loads: no
    AMDSMI_LIB_DIR (empty counts as unset), the ABI when given."""
    env = {"AMDSMI_LIB_DIR": ""}
    if abi is not None:
        env["ZEUS_AMDSMI_SIM_ABI"] = abi
    env.update(extra)
    return env


@pytest.mark.parametrize("abi", [None] + ABIS)
def test_simulate_loads_the_simulator(start, abi):
    d = start("uds", args=["--gpu-backend", "amdsmi"], env=sim_env(abi))
    want = abi or "26"          # the newest by default
    # next to the binary, as /proc/self/exe names it (symbolic links
    # resolved)
    lib = os.path.realpath(BUILD / f"libamdsmi-sim{want}.so")
    assert re.search(r'event=amdsmi_opened library="%s" version=\S+ '
                     r'abi=%s gpus=%d ' % (re.escape(lib), want, NGPU),
                     d.logs()), d.logs()
    gpus = d.get("/discover").json()["gpus"]
    assert [g["name"] for g in gpus] == ["AMD Instinct MI300X"] * NGPU
    assert all(g["cumulative_energy_available"] for g in gpus)
    assert d.get("/gpu/get_power").json()["power_mw"] == {
        str(i): w * 1000 for i, w in enumerate(WATTS)}
    # the short start-up energy check of the simulated GPUs
    assert "event=amdsmi_energy_check gpus=2 ms=100" in d.logs()


@pytest.mark.parametrize("abi", ["23", "27", "26 ", "x"])
def test_simulate_bad_abi_fails_fast(tmp_path, abi):
    r = run_zeusd("serve", "--simulate", "--gpu-backend", "amdsmi",
                  "--socket-path", str(tmp_path / "s"), env=sim_env(abi))
    assert r.returncode == 1
    assert "--gpu-backend amdsmi: ZEUS_AMDSMI_SIM_ABI must be 24, 25 or " \
        "26" in r.stderr, r.stderr
    assert not (tmp_path / "s").exists()


def test_simulate_auto_stays_nvml(start):
    # --simulate alone (auto) is the NVML simulator, as it always was
    d = start("uds", env=sim_env("24"))
    assert "backend=nvml" in d.logs()
    assert "amdsmi" not in d.logs()
    assert len(d.get("/discover").json()["gpus"]) == 4


@pytest.mark.parametrize("setting,value", [
    ("ZEUS_AMDSMI_SIM_NO_POWER", "1,x"), ("ZEUS_SIM_GPUS", "17"),
    ("ZEUS_SIM_PCI", "0000:c1:00"),
])
def test_simulate_bad_simulator_setting_fails(tmp_path, setting, value):
    r = run_zeusd("serve", "--simulate", "--gpu-backend", "amdsmi",
                  "--socket-path", str(tmp_path / "s"),
                  env=sim_env(**{setting: value}))
    assert r.returncode == 1
    assert f"amdsmi-sim: bad {setting}" in r.stderr or \
        f"amdsmi-sim: {setting} must be" in r.stderr, r.stderr
    assert "amdsmi_init failed: Invalid parameters" in r.stderr


# --- a die that reports no power (MI250's second) ----------------------------

def series(text, name):
    """Index -> value of a per-GPU series in a /metrics body."""
    return {int(m.group(1)): float(m.group(2)) for m in re.finditer(
        r'^%s\{index="(\d+)"\} (\S+)$' % name, text, re.M)}


@pytest.mark.parametrize("abi", ABIS)
def test_die_without_power(start, abi):
    """GPU 1 reports its power as not available (0xFFFF for current and
    average socket power), as an MI250's second die does: its power reads
    are 400 saying so, as upstream answers them, its energy counter
    cannot be checked against its power and is not offered, streams and
    /metrics leave its power out, and everything else about it works."""
    d = start("uds", args=["--gpu-backend", "amdsmi"],
              env=sim_env(abi, ZEUS_AMDSMI_SIM_NO_POWER="1"))
    logs = d.logs()
    assert "event=amdsmi_power_source gpu=1 source=none" in logs
    assert "event=amdsmi_power_source gpu=0" not in logs
    assert "event=amdsmi_energy_unavailable gpu=1 reason=power_unreadable" \
        in logs
    gpus = d.get("/discover").json()["gpus"]
    assert [g["cumulative_energy_available"] for g in gpus] == [True, False]

    r = d.get("/gpu/get_power")
    assert_error(r, 400)
    msg = r.json()["errors"]["1"]
    assert list(r.json()["errors"]) == ["1"]
    assert msg.startswith("GPU 1: get_power failed: not supported by this "
                          "GPU: it reports its socket power as not "
                          "available"), msg
    assert "MI250" in msg
    assert d.get("/gpu/get_power?gpu_ids=0").json()["power_mw"] == \
        {"0": 300000}
    r = d.get("/gpu/get_cumulative_energy?gpu_ids=1")
    assert_error(r, 400, "GPU 1: get_cumulative_energy is not supported",
                 "integrate")
    assert d.get("/gpu/get_cumulative_energy?gpu_ids=0").status_code == 200
    # the rest of the die works
    assert d.get("/gpu/get_power_limit?gpu_ids=1").json() == \
        {"1": {"power_limit_mw": CAP_MAX_MW}}
    assert d.post("/gpu/set_power_limit?gpu_ids=1&block=true"
                  "&power_limit_mw=300000").status_code == 200

    # a stream of both: events for GPU 0 only, GPU 1's failure logged once
    s = Stream(d, "/gpu/stream_power?gpu_ids=0,1").pump(0.6)
    s.close()
    assert s.status == 200
    ids = {int(GPU_EVENT.fullmatch(e)[2]) for e in s.data()}
    assert ids == {0}
    logs = d.logs()
    assert len(re.findall(r"event=stream_sample_failed kind=gpu id=1 ",
                          logs)) == 1
    assert "stream_sample_failed kind=gpu id=0" not in logs

    # /metrics: no power or energy series for GPU 1, the rest of it there,
    # and a scrape's command for it still a success (the error count is
    # the failed requests' above, and a second scrape adds none)
    text = d.get("/metrics").text
    assert series(text, "zeusd_gpu_power_watts") == {0: 300.0}
    assert list(series(text, "zeusd_gpu_energy_joules_total")) == [0]
    assert series(text, "zeusd_gpu_power_limit_watts") == {0: 750.0,
                                                           1: 300.0}
    assert re.search(r'^zeusd_gpu_info\{index="1",', text, re.M)
    errors = 'zeusd_device_command_errors_total{device="gpu",index="1"} '
    before = [ln for ln in text.splitlines() if ln.startswith(errors)]
    again = d.get("/metrics").text
    assert len(before) == 1
    assert [ln for ln in again.splitlines() if ln.startswith(errors)] == \
        before
