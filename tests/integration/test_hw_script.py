"""Black-box tests of the GPU acceptance run, tests/hw/nvidia.sh, on the
NVML simulator (its --nvml-library flag): the report, the exit status, and
above all that every GPU is left as the script found it (the simulator's
call log shows each write zeusd made). docs/hardware.md."""
import json
import subprocess

import pytest

from conftest import BUILD, ROOT, SIM
from simutil import SimLog, write_control

SCRIPT = ROOT / "tests" / "hw" / "nvidia.sh"
LEGACY = BUILD / "libnvml-sim-legacy.so"



def run_script(tmp_path, *args, lib=SIM, env=None, timeout=120):
    e = {"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)}
    e.update(env or {})
    return subprocess.run(
        ["bash", str(SCRIPT), "--no-build", "--build-dir", str(BUILD),
         "--nvml-library", str(lib), "--iterations", "20",
         "--report", str(tmp_path / "report.json"), *args],
        capture_output=True, text=True, env=e, timeout=timeout)


def final_state(log, ngpu):
    """Per GPU: the last power limit and persistence written, and whether
    every clock lock was followed by a reset of its domain."""
    state = {}
    for g in range(ngpu):
        calls = [c for c in log.calls(gpu=g) if c.fn.startswith(
            "nvmlDeviceSet") or c.fn.startswith("nvmlDeviceReset")]
        ok = [c for c in calls if c.rc == "SUCCESS"]
        limits = [c.args[0] for c in ok
                  if c.fn == "nvmlDeviceSetPowerManagementLimit"]
        pers = [c.args[0] for c in ok if c.fn == "nvmlDeviceSetPersistenceMode"]
        locked = {}
        for c in ok:
            for dom in ("Gpu", "Memory"):
                if c.fn == f"nvmlDeviceSet{dom}LockedClocks":
                    locked[dom] = True
                if c.fn == f"nvmlDeviceReset{dom}LockedClocks":
                    locked[dom] = False
        state[g] = (limits[-1] if limits else None,
                    pers[-1] if pers else None, any(locked.values()))
    return state


def test_full_run_restores_everything(tmp_path):
    log = tmp_path / "sim.log"
    r = run_script(tmp_path, env={"ZEUS_SIM_LOG": str(log)})
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith("zeusd GPU acceptance run")
    assert "driver 570.124.06, NVML 12.570.124.06" in out
    assert "NVML entry points missing: none" in out
    assert out.count("NVIDIA A100-SXM4-80GB") == 4
    assert "result: PASS" in out and "0 failed" in out
    assert "GPU 3 get_power: zeusd " in out and "(instant field)" in out
    sim = SimLog(log)
    # It wrote, and left each GPU as it found it.
    assert len(sim.calls("nvmlDeviceSetPowerManagementLimit")) >= 12
    assert final_state(sim, 4) == {g: ("400000", "0", False)
                                   for g in range(4)}
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["verdict"] == "PASS" and rep["driver"] == "570.124.06"
    assert set(rep["latency_us"]["0"]) == {"get_power",
                                           "get_cumulative_energy"}
    assert rep["raw"]["gpus"][0]["power_instant_us"]["median"] >= 0


def test_mixed_node_unsupported_is_not_a_failure(tmp_path):
    log = tmp_path / "sim.log"
    r = run_script(tmp_path, env={"ZEUS_SIM_LOG": str(log),
                                  "ZEUS_SIM_PROFILE": "v100,h100,p100"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "GPU 0: unsupported: set_mem_locked_clocks" in r.stdout
    assert "not supported by this GPU, Tesla V100-SXM2-32GB" in r.stdout
    assert "GPU 2: unsupported: set_gpu_locked_clocks" in r.stdout
    assert "raw NVML" in r.stdout and "(average)" in r.stdout
    assert final_state(SimLog(log), 3) == {
        0: ("300000", "0", False), 1: ("700000", "0", False),
        2: ("250000", "0", False)}


@pytest.mark.skipif(not LEGACY.exists(), reason="no legacy simulator")
def test_old_driver(tmp_path):
    log = tmp_path / "sim.log"
    r = run_script(tmp_path, lib=LEGACY, env={"ZEUS_SIM_LOG": str(log)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "driver 450.80.02" in r.stdout
    assert "NVML entry points missing: nvmlDeviceGetArchitecture" in r.stdout
    assert "NVML lacks nvmlDeviceSetMemoryLockedClocks" in r.stdout
    assert final_state(SimLog(log), 4) == {g: ("400000", "0", False)
                                           for g in range(4)}


def test_failures_fail_the_run_and_still_restore(tmp_path):
    log, ctl = tmp_path / "sim.log", tmp_path / "sim.ctl"
    write_control(ctl, "fail nvmlDeviceSetPowerManagementLimit 1 "
                  "NO_PERMISSION")
    r = run_script(tmp_path, env={"ZEUS_SIM_LOG": str(log),
                                  "ZEUS_SIM_CONTROL": str(ctl),
                                  "ZEUS_SIM_FAULTS": "fail * 3 GPU_IS_LOST"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "GPU 1: FAIL: set_power_limit (403: GPU 1: set_power_limit " \
        "failed: Insufficient Permissions" in r.stdout
    assert "GPU 3: FAIL: GPU present (zeusd reports it lost)" in r.stdout
    assert "result: FAIL" in r.stdout
    state = final_state(SimLog(log), 4)
    assert state[0] == ("400000", "0", False)
    assert state[1][1:] == ("0", False)     # the rest restored all the same
    assert state[3] == (None, None, False)  # never written


def test_read_only_writes_nothing(tmp_path):
    log = tmp_path / "sim.log"
    r = run_script(tmp_path, "--read-only", env={"ZEUS_SIM_LOG": str(log)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "writes: skipped (--read-only)" in r.stdout
    assert SimLog(log).writes() == []


@pytest.mark.parametrize("args,needle", [
    (["--iterations", "abc"], "wants a number"),
    (["--iterations", "5"], "must be 10..100000"),
    (["--bogus"], "unknown argument"),
])
def test_bad_usage(tmp_path, args, needle):
    r = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2
    assert needle in r.stderr


def test_missing_library_is_clear(tmp_path):
    r = run_script(tmp_path, lib=tmp_path / "nope.so")
    assert r.returncode == 1
    assert "cannot use NVML" in r.stderr
