"""Black-box tests of the AMD SMI simulator's shared state (ZEUS_SIM_STATE,
docs/simulator.md, sim/amdsmi_state.c): every process that loads one of
the libamdsmi-simN.so builds with the same file sees one set of GPUs whose
power caps, clock limits, performance levels and energy accumulators
outlive the process; concurrent writers (processes and threads) leave a
consistent file; a file that fails a check makes amdsmi_init fail with one
line on stderr; a file garbled while in use fails writes and leaves reads
on the last good copy; and without ZEUS_SIM_STATE every process has its
own GPUs, as before.

Each simulator process is a fresh Python running a small ctypes script,
so the state crosses real process boundaries."""
import json
import os
import struct
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import BUILD, WINE_RUN, build_sanitizers

pytestmark = [
    pytest.mark.skipif(
        WINE_RUN, reason="the AMD SMI simulator is not built for Windows"),
    pytest.mark.skipif(
        build_sanitizers() != "", reason="the ctypes side loads the "
        "simulator into python, which a sanitizer build cannot"),
]

ABIS = ["24", "25", "26"]
NGPU = 2                # the simulator's default
HEADER = 48             # sim/amdsmi_state.c: struct sim_file_header
RECORD = 64             # struct sim_file_record
CAP_OFF = 24            # the record's cap_uw
RES_UJ = 15.259         # the accumulator's resolution
FILE_ERROR = 14         # AMDSMI_STATUS_FILE_ERROR
INVAL = 1               # AMDSMI_STATUS_INVAL


def lib(abi):
    return BUILD / f"libamdsmi-sim{abi}.so"


# A ctypes client: prints one JSON line {init, rcs, cap, clk, locked,
# energy, ...}; argv: library gpu [op value]..., ops:
#   cap UW          amdsmi_set_power_cap
#   clk D:L:MHZ     amdsmi_set_gpu_clk_limit, D SYS|MEM, L MIN|MAX
#   perf N          amdsmi_set_gpu_perf_level
#   loop A:B:N      N alternating caps A, B (rc 0 when all succeeded)
#   energy N        N readings (rc 0 when each succeeded and none went
#                   down)
#   threads T:N     T threads, each N caps (300 W + thread index, in uW)
#                   and N readings of the cap and energy; rc 0 when all
#                   succeeded, every cap read was one of them, and each
#                   thread's energy readings never went down
#   pause -         prints "paused", waits for a line on stdin
CLIENT = textwrap.dedent("""
    import ctypes as C, json, sys, threading
    lib = C.CDLL(sys.argv[1])
    P = C.c_void_p
    lib.amdsmi_init.argtypes = [C.c_uint64]
    lib.amdsmi_get_socket_handles.argtypes = [C.POINTER(C.c_uint32), P]
    lib.amdsmi_get_processor_handles.argtypes = [P, C.POINTER(C.c_uint32),
                                                 C.POINTER(P)]
    lib.amdsmi_set_power_cap.argtypes = [P, C.c_uint32, C.c_uint64]
    lib.amdsmi_get_power_cap_info.argtypes = [P, C.c_uint32, P]
    lib.amdsmi_set_gpu_clk_limit.argtypes = [P, C.c_int, C.c_int,
                                             C.c_uint64]
    lib.amdsmi_set_gpu_perf_level.argtypes = [P, C.c_int]
    lib.amdsmi_get_clock_info.argtypes = [P, C.c_int, P]
    lib.amdsmi_get_energy_count.argtypes = [
        P, C.POINTER(C.c_uint64), C.POINTER(C.c_float),
        C.POINTER(C.c_uint64)]
    DOM = {"SYS": 0, "MEM": 4}
    LIM = {"MIN": 0, "MAX": 1}

    def cap(h):
        info = (C.c_uint64 * 8)()
        rc = lib.amdsmi_get_power_cap_info(h, 0, info)
        return rc, info[0]

    def energy(h):
        acc, res, ts = C.c_uint64(), C.c_float(), C.c_uint64()
        rc = lib.amdsmi_get_energy_count(h, C.byref(acc), C.byref(res),
                                         C.byref(ts))
        return rc, acc.value

    out = {"init": lib.amdsmi_init(0)}
    if out["init"] != 0:
        print(json.dumps(out)); sys.exit(0)
    n = C.c_uint32(0)
    assert lib.amdsmi_get_socket_handles(C.byref(n), None) == 0
    socks = (P * n.value)()
    assert lib.amdsmi_get_socket_handles(C.byref(n), socks) == 0
    h, one = P(), C.c_uint32(1)
    assert lib.amdsmi_get_processor_handles(socks[int(sys.argv[2])],
                                            C.byref(one), C.byref(h)) == 0
    rcs = []
    args = sys.argv[3:]
    for op, val in zip(args[::2], args[1::2]):
        if op == "cap":
            rcs.append(lib.amdsmi_set_power_cap(h, 0, int(val)))
        elif op == "clk":
            d, l, mhz = val.split(":")
            rcs.append(lib.amdsmi_set_gpu_clk_limit(h, DOM[d], LIM[l],
                                                    int(mhz)))
        elif op == "perf":
            rcs.append(lib.amdsmi_set_gpu_perf_level(h, int(val)))
        elif op == "loop":
            a, b, k = (int(x) for x in val.split(":"))
            rc = 0
            for i in range(k):
                rc = lib.amdsmi_set_power_cap(h, 0, a if i % 2 == 0 else b)
                if rc != 0:
                    break
            rcs.append(rc)
        elif op == "energy":
            last, rc = 0, 0
            for i in range(int(val)):
                r, e = energy(h)
                if r != 0 or e < last:
                    rc = -1
                    break
                last = e
            rcs.append(rc)
        elif op == "threads":
            t, k = (int(x) for x in val.split(":"))
            caps = {(300 + j) * 1000000 for j in range(t)}
            bad = []

            def work(j):
                last = 0
                for i in range(k):
                    if lib.amdsmi_set_power_cap(h, 0,
                                                (300 + j) * 1000000) != 0:
                        bad.append("set")
                    r, c = cap(h)
                    if r != 0 or c not in caps:
                        bad.append(("cap", r, c))
                    r, e = energy(h)
                    if r != 0 or e < last:
                        bad.append(("energy", r, e, last))
                    last = e
            ts = [threading.Thread(target=work, args=(j,))
                  for j in range(t)]
            for x in ts:
                x.start()
            for x in ts:
                x.join()
            rcs.append(0 if not bad else str(bad[:3]))
        elif op == "pause":
            print("paused", flush=True)
            sys.stdin.readline()
    out["rcs"] = rcs
    out["cap_rc"], out["cap"] = cap(h)
    clk = {}
    for d, v in DOM.items():
        info = (C.c_uint32 * 8)()
        rc = lib.amdsmi_get_clock_info(h, v, info)
        clk[d] = [rc, info[1], info[2], C.cast(info, C.POINTER(
            C.c_uint8))[12]]
    out["clk"] = clk
    out["energy_rc"], out["energy"] = energy(h)
    lib.amdsmi_shut_down()
    print(json.dumps(out))
""")


def sim_env(state, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ZEUS_SIM_", "ZEUS_AMDSMI_SIM_"))}
    if state is not None:
        env["ZEUS_SIM_STATE"] = str(state)
    env.update(extra)
    return env


def client_proc(state, *args, gpu=0, abi="24", env=None, stdin=None):
    return subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(lib(abi)), str(gpu)] +
        [str(a) for a in args], env=sim_env(state, **(env or {})),
        stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def client(state, *args, gpu=0, abi="24", env=None):
    p = client_proc(state, *args, gpu=gpu, abi=abi, env=env)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    return json.loads(out), err


def fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def reseal(data):
    """The file with its checksum made right again."""
    data = bytearray(data)
    data[24:32] = b"\0" * 8
    struct.pack_into("=Q", data, 24, fnv1a(data))
    return bytes(data)


def test_settings_are_seen_by_other_processes_and_abis(tmp_path):
    state = tmp_path / "amd.state"
    first, err = client(state, "cap", 250_000_000, "clk", "SYS:MAX:1800",
                        "clk", "MEM:MIN:1000", abi="24")
    assert first["init"] == 0 and first["rcs"] == [0, 0, 0], err
    assert err == ""
    assert first["cap"] == 250_000_000
    assert state.stat().st_mode & 0o777 == 0o600
    assert state.stat().st_size == HEADER + NGPU * RECORD
    assert state.read_bytes()[:8] == b"ZSIMAMD1"
    for abi in ABIS:
        out, err = client(state, abi=abi)
        assert out["init"] == 0, err
        assert out["cap"] == 250_000_000, abi
        # [rc, min, max, locked]: MANUAL after a clock limit
        assert out["clk"] == {"SYS": [0, 500, 1800, 1],
                              "MEM": [0, 1000, 1300, 1]}, abi
    # A limit that crosses the stored other one is refused, as in one
    # process: the check runs on the file's values.
    out, _ = client(state, "clk", "SYS:MIN:1900", abi="26")
    assert out["rcs"] == [INVAL]
    assert out["clk"]["SYS"] == [0, 500, 1800, 1]
    # AUTO puts the full ranges back, for the next process too.
    out, _ = client(state, "perf", 0, abi="25")
    assert out["rcs"] == [0]
    out, _ = client(state)
    assert out["clk"] == {"SYS": [0, 500, 2100, 0], "MEM": [0, 900, 1300, 0]}
    assert out["cap"] == 250_000_000
    # The other GPU keeps its own (power-on) state.
    other, _ = client(state, gpu=1)
    assert other["cap"] == 750_000_000


def energy_uj(out):
    assert out["energy_rc"] == 0, out
    return out["energy"] * RES_UJ


def test_energy_continues_across_processes(tmp_path):
    """The accumulator goes on counting between processes at the power in
    force: GPU 0 draws 300 W, 200 W once another process capped it."""
    state = tmp_path / "amd.state"
    t0 = time.monotonic()
    e1 = energy_uj(client(state)[0])
    t1 = time.monotonic()
    time.sleep(0.5)
    t2 = time.monotonic()
    e2 = energy_uj(client(state, abi="26")[0])
    t3 = time.monotonic()
    # From e1's reading to e2's at 300 W: at least the gap between the
    # processes, at most the whole span (plus the resolution).
    assert 300 * (t2 - t1) * 1e6 <= e2 - e1 <= 300 * (t3 - t0) * 1e6 + 50
    # Another process caps it: what it drew up to then at 300 W, 200 W on.
    t4 = time.monotonic()
    e3 = energy_uj(client(state, "cap", 200_000_000, abi="25")[0])
    t5 = time.monotonic()
    time.sleep(0.5)
    t6 = time.monotonic()
    e4 = energy_uj(client(state)[0])
    t7 = time.monotonic()
    assert e3 >= e2
    assert 200 * (t6 - t5) * 1e6 <= e4 - e3 <= 200 * (t7 - t4) * 1e6 + 50
    # Readings alone never move it back.
    readings = [energy_uj(client(state)[0]) for _ in range(3)]
    assert readings == sorted(readings) and readings[0] >= e4


def test_concurrent_writers_leave_a_consistent_file(tmp_path):
    state = tmp_path / "amd.state"
    client(state)
    procs = [client_proc(state, "loop", "200000000:210000000:200"),
             client_proc(state, "loop", "300000000:310000000:200",
                         abi="26"),
             client_proc(state, "energy", 400, abi="25")]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert err == ""
        outs.append(json.loads(out))
    assert all(o["rcs"] == [0] for o in outs), outs
    # Each writer's last write is 210 W or 310 W: one of them is last.
    final, err = client(state)
    assert final["init"] == 0, err
    assert final["cap"] in (210_000_000, 310_000_000)
    assert state.stat().st_size == HEADER + NGPU * RECORD
    data = state.read_bytes()
    assert struct.unpack_from("=Q", data, 24)[0] == fnv1a(
        data[:24] + b"\0" * 8 + data[32:])
    assert struct.unpack_from("=Q", data, HEADER + CAP_OFF)[0] == \
        final["cap"]


def test_threads_of_one_process_share_the_file(tmp_path):
    state = tmp_path / "amd.state"
    out, err = client(state, "threads", "4:100")
    assert out["init"] == 0 and out["rcs"] == [0], (out, err)
    assert err == ""
    assert out["cap"] in {(300 + j) * 1_000_000 for j in range(4)}
    again, _ = client(state)
    assert again["cap"] == out["cap"]


def refused(state, why, env=None):
    before = state.read_bytes() if state.is_file() else None
    out, err = client(state, env=env)
    assert out["init"] != 0, out
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("amdsmi-sim: ZEUS_SIM_STATE "), err
    assert why in err, err
    if before is not None:
        assert state.read_bytes() == before     # left as it is


def test_garbled_file_is_refused(tmp_path):
    state = tmp_path / "amd.state"
    client(state, "cap", 250_000_000)
    data = bytearray(state.read_bytes())
    data[HEADER + CAP_OFF + 1] ^= 0x40    # GPU 0's cap, checksum now wrong
    state.write_bytes(bytes(data))
    refused(state, "checksum")


def test_wrong_sizes_are_refused(tmp_path):
    state = tmp_path / "amd.state"
    client(state)
    data = state.read_bytes()
    state.write_bytes(data[:-10])
    refused(state, "truncated")
    state.write_bytes(data[:20])
    refused(state, "truncated")
    state.write_bytes(data + b"\0")
    refused(state, "trailing")
    # a consistent file of another layout: record size 80
    bad = bytearray(data)
    struct.pack_into("=I", bad, 16, 80)
    state.write_bytes(reseal(bad))
    refused(state, "unsupported version")
    state.write_bytes(data)
    assert client(state)[0]["init"] == 0


def test_not_a_state_file_is_refused(tmp_path):
    state = tmp_path / "amd.state"
    state.write_bytes(b"not a state file, just text\n" * 20)
    state.chmod(0o600)
    refused(state, "magic")
    # the NVML simulator's file is not the AMD one's
    state.write_bytes(b"ZSIMNVS1" + bytes(HEADER + NGPU * RECORD - 8))
    refused(state, "magic")


@pytest.mark.parametrize("offset,value,fmt", [
    (CAP_OFF, 100_000_000, "=Q"),       # cap below 200 W
    (CAP_OFF, 800_000_000, "=Q"),       # above 750 W
    (20, 4, "=I"),                      # no such performance level
    (32, 2200, "=I"),                   # SYS min above its range
    (36, 400, "=I"),                    # SYS max below its min
    (44, 1400, "=I"),                   # MEM max above its range
    (48, 0x7ff8000000000000, "=Q"),     # energy NaN
    (48, 0xbff0000000000000, "=Q"),     # energy -1.0
])
def test_out_of_range_value_is_refused(tmp_path, offset, value, fmt):
    """A record with a right checksum but a value the simulator cannot be
    at: checked value by value, not trusted for its checksum."""
    state = tmp_path / "amd.state"
    client(state)
    data = bytearray(state.read_bytes())
    struct.pack_into(fmt, data, HEADER + offset, value)
    state.write_bytes(reseal(data))
    refused(state, "out of range")


def test_auto_with_narrowed_clocks_is_refused(tmp_path):
    """AUTO always has the full ranges (a limit sets MANUAL)."""
    state = tmp_path / "amd.state"
    client(state)
    data = bytearray(state.read_bytes())
    struct.pack_into("=I", data, HEADER + 36, 1800)    # SYS max, AUTO
    state.write_bytes(reseal(data))
    refused(state, "out of range")
    struct.pack_into("=I", data, HEADER + 20, 3)       # MANUAL: fine
    state.write_bytes(reseal(data))
    out, err = client(state)
    assert out["init"] == 0, err
    assert out["clk"]["SYS"] == [0, 500, 1800, 1]


def test_file_for_another_configuration_is_refused(tmp_path):
    state = tmp_path / "amd.state"
    client(state)
    refused(state, "made for 2 GPUs", env={"ZEUS_SIM_GPUS": "3"})
    refused(state, "GPU 1 is at 0000:c2:00.0",
            env={"ZEUS_SIM_PCI": "0000:c1:00.0,0000:c3:00.0"})
    refused(state, "GPU 0 is at 0000:c1:00.0",
            env={"ZEUS_SIM_PCI": "0000:c1:00.1"})
    assert client(state)[0]["init"] == 0


def test_unsafe_files_are_refused(tmp_path):
    state = tmp_path / "amd.state"
    client(state)
    state.chmod(0o620)
    refused(state, "writable by group or others")
    state.chmod(0o602)
    refused(state, "writable by group or others")
    state.chmod(0o600)
    link = tmp_path / "link.state"
    link.symlink_to(state)
    refused(link, "symbolic link")
    dangling = tmp_path / "dangling.state"
    dangling.symlink_to(tmp_path / "nowhere")
    refused(dangling, "symbolic link")
    assert not (tmp_path / "nowhere").exists()
    refused(tmp_path, "Is a directory")
    assert client(state)[0]["init"] == 0


def test_empty_file_starts_at_power_on(tmp_path):
    state = tmp_path / "amd.state"
    state.touch(mode=0o600)
    out, err = client(state)
    assert out["init"] == 0, err
    assert out["cap"] == 750_000_000
    assert out["clk"] == {"SYS": [0, 500, 2100, 0], "MEM": [0, 900, 1300, 0]}
    assert state.stat().st_size == HEADER + NGPU * RECORD


def test_file_garbled_while_in_use(tmp_path):
    """Writes fail with FILE_ERROR and change nothing; reads answer from
    the last good copy; one line on stderr for the run of failures; a good
    file again is used again."""
    state = tmp_path / "amd.state"
    client(state, "cap", 250_000_000)
    good = state.read_bytes()
    p = client_proc(state, "pause", "-", "cap", 300_000_000, "perf", 1,
                    "energy", 3, "pause", "-", "cap", 320_000_000,
                    stdin=subprocess.PIPE)
    assert p.stdout.readline() == "paused\n"
    bad = bytearray(good)
    bad[HEADER + CAP_OFF + 1] ^= 0x01
    state.write_bytes(bytes(bad))
    p.stdin.write("\n")
    p.stdin.flush()
    assert p.stdout.readline() == "paused\n"
    assert state.read_bytes() == bytes(bad)     # no write went through
    state.write_bytes(good)
    p.stdin.write("\n")
    p.stdin.flush()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    out = json.loads(out)
    # the two writes failed, the energy readings went on from the copy;
    # then the good file again took the last write
    assert out["rcs"] == [FILE_ERROR, FILE_ERROR, 0, 0], out
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "amdsmi-sim: ZEUS_SIM_STATE ") and "checksum" in err, err
    assert out["cap"] == 320_000_000
    assert client(state)[0]["cap"] == 320_000_000


def test_without_state_each_process_has_its_own_gpus(tmp_path):
    first, err = client(None, "cap", 250_000_000, "clk", "SYS:MAX:1800")
    assert first["rcs"] == [0, 0] and err == ""
    assert first["cap"] == 250_000_000
    time.sleep(0.3)
    second, err = client(None)
    assert err == ""
    assert second["cap"] == 750_000_000
    assert second["clk"]["SYS"] == [0, 500, 2100, 0]
    # a fresh accumulator from this process's init: well below the
    # first's plus the 0.3 s at 300 W between them
    assert energy_uj(second) < energy_uj(first) + 300 * 0.3 * 1e6
    # empty is unset; and no file is made anywhere
    out, err = client("", "cap", 260_000_000)
    assert out["init"] == 0 and err == ""
    assert client("")[0]["cap"] == 750_000_000
    assert list(tmp_path.iterdir()) == []
