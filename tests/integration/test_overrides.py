"""Black-box tests of GPU command overrides through the real daemon: the
override replaces the driver write (argv recorded by a helper script),
failures are 500 with command/reason/output, operations without an override
use the driver, startup trust checks and parse errors refuse, and a non-root
daemon serves gpu-control through its overrides."""
import os
import tempfile
import time
from pathlib import Path

import pytest

from conftest import SIM, Zeusd, linux_only, run_zeusd
from zeushelp import as_user

HELPERS = Path(__file__).resolve().parent / "helpers"


def write_overrides(path, text):
    path.write_text(text)
    os.chmod(path, 0o644)
    return path


@pytest.fixture
def record(tmp_path):
    return tmp_path / "argv.log"


def sim_log_lines(path, fn):
    if not Path(path).exists():
        return []
    return [l for l in Path(path).read_text().splitlines() if f" {fn} " in l]


@linux_only("overrides-sh")
@linux_only("persistence", "it enables persistence mode through the driver")
def test_override_replaces_driver_write(start, mode, tmp_path, record):
    # one record file per GPU: the GPUs run their commands concurrently
    ov = write_overrides(tmp_path / "ov.toml", f"""
[set_power_limit]
commands = [
  "{HELPERS}/record-argv {record}.{{gpu_id}} first {{gpu_id}} {{power_limit_mw}}",
  "{HELPERS}/record-argv {record}.{{gpu_id}} 'second one' w={{power_limit_w}}",
]
""")
    simlog = tmp_path / "sim.log"
    d = start(mode, args=["--gpu-command-overrides", str(ov)],
              env={"ZEUS_SIM_LOG": str(simlog)})
    r = d.post("/gpu/set_power_limit?gpu_ids=1,2&block=true"
               "&power_limit_mw=250000")
    assert r.status_code == 200, r.text
    for gpu in (1, 2):
        lines = Path(f"{record}.{gpu}").read_text().splitlines()
        assert lines == [f"3 [first] [{gpu}] [250000]",
                         "2 [second one] [w=250]"]
    assert not Path(f"{record}.0").exists()
    assert sim_log_lines(simlog, "nvmlDeviceSetPowerManagementLimit") == []
    # an operation without an override still reaches the driver
    r = d.post("/gpu/set_persistence_mode?gpu_ids=0&block=true&enabled=true")
    assert r.status_code == 200
    assert sim_log_lines(simlog, "nvmlDeviceSetPersistenceMode")
    assert d.get("/gpu/get_persistence_mode?gpu_ids=0").json() == \
        {"0": {"enabled": True}}


@linux_only("overrides-sh")
def test_failed_override_is_500_with_details(start, tmp_path, record):
    ov = write_overrides(tmp_path / "ov.toml", f"""
[set_gpu_locked_clocks]
commands = [
  "{HELPERS}/exit-with 3 'some output' 'something broke'",
  "{HELPERS}/record-argv {record} never",
]
[reset_gpu_locked_clocks]
commands = ["{HELPERS}/exit-with 0 'Error: not really fine'"]
error_pattern = "(?i)error|fail"
""")
    d = start(args=["--gpu-command-overrides", str(ov)])
    r = d.post("/gpu/set_gpu_locked_clocks?gpu_ids=0&block=true"
               "&min_clock_mhz=500&max_clock_mhz=1000")
    assert r.status_code == 500
    msg = r.json()["errors"]["0"]
    for needle in ["exit-with", "exit code 3", "some output",
                   "something broke"]:
        assert needle in msg, msg
    assert not record.exists()          # stopped at the first failure
    r = d.post("/gpu/reset_gpu_locked_clocks?gpu_ids=0&block=true")
    assert r.status_code == 500
    assert "error_pattern" in r.json()["errors"]["0"] or \
        "pattern" in r.json()["errors"]["0"]


@linux_only("overrides-sh")
def test_timeout_kills_and_reports(start, tmp_path):
    ov = write_overrides(tmp_path / "ov.toml", f"""
[reset_mem_locked_clocks]
commands = ["{HELPERS}/sleep-for 30"]
timeout_s = 1
""")
    d = start(args=["--gpu-command-overrides", str(ov)])
    t0 = time.monotonic()
    r = d.post("/gpu/reset_mem_locked_clocks?gpu_ids=0&block=true")
    assert time.monotonic() - t0 < 10
    assert r.status_code == 500
    assert "timed out" in r.json()["errors"]["0"]


@pytest.mark.parametrize("mode_bits,owner,ok", [
    (0o646, None, False), (0o664, None, True), (0o644, 12345, False)])
def test_trust_check(tmp_path, mode_bits, owner, ok):
    ov = tmp_path / "ov.toml"
    ov.write_text('[reset_gpu_locked_clocks]\ncommands = ["/bin/true"]\n')
    os.chmod(ov, mode_bits)
    if owner is not None:
        os.chown(ov, owner, owner)
    d = Zeusd(tmp_path, args=["--gpu-command-overrides", str(ov)])
    if ok:
        d.wait_ready()
        assert d.stop() == 0
        assert "group" in d.logs()      # group-writable warns
    else:
        assert d.proc.wait(10) == 1
        d.stop()
        assert str(ov) in d.logs()


@pytest.mark.parametrize("text,needle", [
    ('[set_power_limit]\ncommands = ["x {bogus}"]\n', "bogus"),
    ('[set_power_limit]\ncommands = ["x {enabled}"]\n', "enabled"),
    ('[set_power_limit]\ncommands = []\n', "commands"),
    ('[nope]\ncommands = ["x"]\n', "nope"),
    ('[set_power_limit]\ncommands = ["x"]\ncolor = 1\n', "color"),
    ('[set_power_limit]\ncommands = ["x"]\ntimeout_s = 0\n', "timeout_s"),
    ('[set_power_limit]\ncommands = ["x"]\nerror_pattern = "("\n',
     "error_pattern"),
])
def test_bad_file_refused(tmp_path, text, needle):
    ov = write_overrides(tmp_path / "ov.toml", text)
    r = run_zeusd("serve", "--simulate", "--socket-path",
                  str(tmp_path / "s.sock"), "--gpu-command-overrides", str(ov))
    assert r.returncode == 1
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("zeusd: ") and needle in line, r.stderr
    assert not (tmp_path / "s.sock").exists()


def test_ignored_without_gpu_control(start, tmp_path):
    ov = write_overrides(tmp_path / "ov.toml", "this is not toml\n")
    d = start(args=["--gpu-command-overrides", str(ov), "--enable",
                    "gpu-read"])
    assert "event=overrides_ignored" in d.logs()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to nobody")
def test_non_root_daemon_serves_gpu_control_through_overrides():
    tmp = Path(tempfile.mkdtemp(prefix="zeusd-ov-", dir="/tmp"))
    os.chmod(tmp, 0o777)
    record = tmp / "argv.log"
    ov = write_overrides(tmp / "ov.toml", f"""
[set_power_limit]
commands = ["{HELPERS}/record-argv {record} {{gpu_id}} {{power_limit_w}}"]
""")
    d = Zeusd(tmp, args=["--enable", "gpu-control,gpu-read",
                         "--gpu-command-overrides", str(ov),
                         "--nvml-library", str(SIM)],
              simulate=False,
              wrapper=as_user(65534),
              env={"ZEUS_SIM_FAULTS":
                   "fail nvmlDeviceSetPersistenceMode * NO_PERMISSION"})
    try:
        d.wait_ready()
        assert "event=gpu_control_without_root" in d.logs()
        r = d.post("/gpu/set_power_limit?gpu_ids=0&block=true"
                   "&power_limit_mw=300000")
        assert r.status_code == 200, r.text
        assert record.read_text() == "2 [0] [300]\n"
        # without an override the driver refuses a non-root caller
        r = d.post("/gpu/set_persistence_mode?gpu_ids=0&block=true"
                   "&enabled=true")
        assert r.status_code == 403
    finally:
        assert d.stop() == 0
