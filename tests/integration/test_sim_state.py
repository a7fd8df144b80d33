"""Black-box tests of the NVML simulator's shared state (ZEUS_SIM_STATE,
docs/simulator.md): every process that loads libnvml-sim.so with the same
file sees one set of GPUs whose settings and energy counters outlive the
process, as a real GPU's do; concurrent writers leave a consistent file;
a file that fails a check makes nvmlInit fail with one line on stderr; and
zeusd's settings stay on the GPU after zeusd is gone.

Each simulator process here is a fresh Python running a small ctypes
script (the way NVML's Python binding calls the library), so the state
crosses real process boundaries."""
import json
import os
import struct
import subprocess
import sys
import textwrap

import pytest

from conftest import SIM, WINE_RUN, build_sanitizers

pytestmark = [
    pytest.mark.skipif(
        WINE_RUN, reason="ZEUS_SIM_STATE is not supported on Windows; "
        "the ctypes side loads the Linux simulator"),
    # python cannot load an ASan-instrumented library without the runtime
    # first; the state module runs under ASan in the unit test sim_state
    pytest.mark.skipif(
        build_sanitizers() != "", reason="the ctypes side loads the "
        "simulator into python, which a sanitizer build cannot"),
]

HEADER = 48             # sim/nvml_state.c: struct sim_file_header
RECORD = 64             # struct sim_file_record

# A ctypes client: prints one JSON line {init, limit, energy, ...}; argv:
# gpu [op value]... with op one of set, persist, loop (n alternating sets
# of v1 and v2, "v1:v2:n"; rc 0 when all succeeded) and energy (n readings
# of the energy counter; rc 0 when each succeeded and none was lower than
# the one before, else -1).
CLIENT = textwrap.dedent("""
    import ctypes, json, sys
    lib = ctypes.CDLL(sys.argv[1])
    out = {"init": lib.nvmlInit_v2()}
    if out["init"] != 0:
        print(json.dumps(out)); sys.exit(0)
    h = ctypes.c_void_p()
    assert lib.nvmlDeviceGetHandleByIndex_v2(int(sys.argv[2]),
                                             ctypes.byref(h)) == 0
    rcs = []
    args = sys.argv[3:]
    for op, val in zip(args[::2], args[1::2]):
        if op == "set":
            rcs.append(lib.nvmlDeviceSetPowerManagementLimit(h, int(val)))
        elif op == "persist":
            rcs.append(lib.nvmlDeviceSetPersistenceMode(h, int(val)))
        elif op == "loop":
            a, b, n = (int(x) for x in val.split(":"))
            for i in range(n):
                rc = lib.nvmlDeviceSetPowerManagementLimit(
                    h, a if i % 2 == 0 else b)
                if rc != 0:
                    rcs.append(rc)
                    break
            else:
                rcs.append(0)
        elif op == "energy":
            e, last, rc = ctypes.c_ulonglong(), 0, 0
            for i in range(int(val)):
                if lib.nvmlDeviceGetTotalEnergyConsumption(
                        h, ctypes.byref(e)) != 0 or e.value < last:
                    rc = -1
                    break
                last = e.value
            rcs.append(rc)
    out["rcs"] = rcs
    v = ctypes.c_uint()
    out["limit_rc"] = lib.nvmlDeviceGetPowerManagementLimit(h,
                                                            ctypes.byref(v))
    out["limit"] = v.value
    m = ctypes.c_int()
    lib.nvmlDeviceGetPersistenceMode(h, ctypes.byref(m))
    out["persistence"] = m.value
    e = ctypes.c_ulonglong()
    out["energy_rc"] = lib.nvmlDeviceGetTotalEnergyConsumption(
        h, ctypes.byref(e))
    out["energy"] = e.value
    lib.nvmlShutdown()
    print(json.dumps(out))
""")


def sim_env(state, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ZEUS_SIM_")}
    if state is not None:
        env["ZEUS_SIM_STATE"] = str(state)
    env.update(extra)
    return env


def client_proc(state, *args, gpu=0, env=None):
    return subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(SIM), str(gpu)] +
        [str(a) for a in args], env=sim_env(state, **(env or {})),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def client(state, *args, gpu=0, env=None):
    p = client_proc(state, *args, gpu=gpu, env=env)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    return json.loads(out), err


def test_settings_and_energy_outlive_the_process(tmp_path):
    state = tmp_path / "gpus.state"
    first, err = client(state, "set", 250000, "persist", 1)
    assert first["init"] == 0 and first["rcs"] == [0, 0], err
    assert first["limit"] == 250000 and first["persistence"] == 1
    assert state.stat().st_mode & 0o777 == 0o600
    assert state.stat().st_size == HEADER + 4 * RECORD
    second, err = client(state)
    assert second["init"] == 0, err
    assert second["limit"] == 250000 and second["persistence"] == 1
    assert second["energy_rc"] == 0
    assert second["energy"] >= first["energy"]
    # Other GPUs keep their own state.
    other, _ = client(state, gpu=1)
    assert other["limit"] == 400000 and other["persistence"] == 0
    # Without the file: the power-on state, as before.
    fresh, _ = client(None)
    assert fresh["limit"] == 400000 and fresh["persistence"] == 0


def test_energy_keeps_counting_between_processes(tmp_path):
    state = tmp_path / "gpus.state"
    readings = [client(state)[0]["energy"] for _ in range(3)]
    assert readings == sorted(readings)
    assert readings[-1] > readings[0]


def test_concurrent_writers_leave_a_consistent_file(tmp_path):
    state = tmp_path / "gpus.state"
    client(state)
    procs = [client_proc(state, "loop", "200000:210000:200"),
             client_proc(state, "loop", "300000:310000:200"),
             client_proc(state, "energy", 400)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert err == ""
        outs.append(json.loads(out))
    assert all(o["rcs"] == [0] for o in outs), outs
    final, err = client(state)
    assert final["init"] == 0, err
    assert final["limit"] in (200000, 210000, 300000, 310000)
    assert state.stat().st_size == HEADER + 4 * RECORD


def refused(state, why, env=None):
    out, err = client(state, env=env)
    assert out["init"] != 0, out
    assert "ZEUS_SIM_STATE" in err and why in err, err


def test_garbled_file_is_refused(tmp_path):
    state = tmp_path / "gpus.state"
    client(state, "set", 250000)
    data = bytearray(state.read_bytes())
    data[HEADER + 20] ^= 0x40          # GPU 0's limit, checksum now wrong
    state.write_bytes(bytes(data))
    refused(state, "checksum")


def test_truncated_file_is_refused(tmp_path):
    state = tmp_path / "gpus.state"
    client(state)
    data = state.read_bytes()
    state.write_bytes(data[:-10])
    refused(state, "truncated")
    state.write_bytes(data[:20])
    refused(state, "truncated")
    state.write_bytes(data + b"\0")
    refused(state, "trailing")


def test_not_a_state_file_is_refused(tmp_path):
    state = tmp_path / "gpus.state"
    state.write_bytes(b"not a state file, just text\n" * 20)
    state.chmod(0o600)
    refused(state, "magic")


def test_out_of_range_value_is_refused(tmp_path):
    """A record with a consistent checksum but a limit outside the part's
    constraints: checked value by value, not trusted for its checksum."""
    state = tmp_path / "gpus.state"
    client(state)
    data = bytearray(state.read_bytes())
    struct.pack_into("=I", data, HEADER + 20, 5)       # GPU 0: 5 mW
    data[24:32] = b"\0" * 8
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    struct.pack_into("=Q", data, 24, h)
    state.write_bytes(bytes(data))
    refused(state, "out of range")


def test_file_for_another_configuration_is_refused(tmp_path):
    state = tmp_path / "gpus.state"
    client(state)
    refused(state, "made for 4 GPUs", env={"ZEUS_SIM_GPUS": "2"})
    refused(state, "GPU 0 is a", env={"ZEUS_SIM_PROFILE": "h100"})
    refused(state, "GPU 1 is a", env={"ZEUS_SIM_PCI": "0000:01:00.0,"
                                      "0000:41:00.0"})
    # The file itself is left alone: the right configuration still works.
    assert client(state)[0]["init"] == 0


def test_symlink_is_refused(tmp_path):
    real = tmp_path / "real.state"
    client(real)
    link = tmp_path / "link.state"
    link.symlink_to(real)
    refused(link, "symbolic link")
    dangling = tmp_path / "dangling.state"
    dangling.symlink_to(tmp_path / "nowhere")
    refused(dangling, "symbolic link")
    assert not (tmp_path / "nowhere").exists()


def test_unsafe_files_are_refused(tmp_path):
    state = tmp_path / "gpus.state"
    client(state)
    state.chmod(0o606)
    refused(state, "writable by group or others")
    state.chmod(0o620)
    refused(state, "writable by group or others")
    state.chmod(0o600)
    os.link(state, tmp_path / "hard.state")
    refused(state, "hard links")
    os.unlink(tmp_path / "hard.state")
    refused(tmp_path, "Is a directory")
    fifo = tmp_path / "fifo.state"
    os.mkfifo(fifo, 0o600)
    refused(fifo, "not a regular file")
    assert client(state)[0]["init"] == 0


def test_empty_file_starts_at_power_on(tmp_path):
    state = tmp_path / "gpus.state"
    state.touch(mode=0o600)
    out, err = client(state)
    assert out["init"] == 0, err
    assert out["limit"] == 400000
    assert state.stat().st_size == HEADER + 4 * RECORD


def test_zeusd_limit_stays_on_the_gpu(start, tmp_path):
    """The point of the feature: what zeusd set is what the GPU is at
    after zeusd has gone, read through NVML from another process."""
    state = tmp_path / "gpus.state"
    d = start(env={"ZEUS_SIM_STATE": str(state)})
    r = d.post("/gpu/set_power_limit?gpu_ids=1&block=true"
               "&power_limit_mw=275000")
    assert r.status_code == 200, r.text
    assert d.stop() == 0, d.logs()
    out, err = client(state, gpu=1)
    assert out["init"] == 0, err
    assert out["limit"] == 275000, d.logs()
    assert client(state, gpu=0)[0]["limit"] == 400000
