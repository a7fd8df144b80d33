"""packaging/prometheus: the example scrape configs, recording and alerting
rules, checked and unit-tested with Debian's promtool (package prometheus),
and every zeusd series they name checked against docs/metrics.md."""
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

PROM = ROOT / "packaging" / "prometheus"
RULES = ["zeusd-recording.rules.yml", "zeusd-alerting.rules.yml"]
CONFIGS = ["prometheus-static.yml", "prometheus-file-sd.yml"]

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMTOOL is None,
                                reason="promtool missing (package prometheus)")


def promtool(*args, cwd=PROM):
    r = subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


def test_rules_check():
    out = promtool("check", "rules", *RULES)
    assert "SUCCESS: 15 rules found" in out
    assert "SUCCESS: 3 rules found" in out


def test_rules_unit_tests():
    assert "SUCCESS" in promtool("test", "rules", "zeusd-rules.test.yml")


def test_rules_unit_tests_catch_a_wrong_rule(tmp_path):
    """The unit tests bite: the same tests against an alert threshold that
    is off fail."""
    for f in PROM.glob("*.yml"):
        shutil.copy(f, tmp_path)
    alerts = tmp_path / "zeusd-alerting.rules.yml"
    text = alerts.read_text()
    assert "0.98 * zeusd_gpu_power_limit_watts" in text
    alerts.write_text(text.replace("0.98 * zeusd_gpu_power_limit_watts",
                                   "1.0 * zeusd_gpu_power_limit_watts"))
    r = subprocess.run([PROMTOOL, "test", "rules", "zeusd-rules.test.yml"],
                       cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0
    assert "ZeusdGPUPowerAtLimit" in r.stdout + r.stderr


@pytest.mark.parametrize("config", CONFIGS)
def test_scrape_configs_check(tmp_path, config):
    """promtool check config also loads the rule files and the file-SD
    target files; the token file it wants to exist is a temp file here."""
    shutil.copytree(PROM, tmp_path / "p")
    token = tmp_path / "zeusd-token"
    token.write_text("token\n")
    cfg = tmp_path / "p" / config
    cfg.write_text(cfg.read_text().replace("/etc/prometheus/zeusd-token",
                                           str(token)))
    out = promtool("check", "config", config, cwd=tmp_path / "p")
    assert "SUCCESS" in out and "FAILED" not in out

def test_rules_name_documented_series():
    """Every zeusd_* series the rules read is a series of docs/metrics.md
    (recorded names, level:metric:ops, are not)."""
    documented = set(re.findall(r"^\| `(zeusd_[a-z_]+)`",
                                (ROOT / "docs" / "metrics.md").read_text(),
                                re.M))
    assert "zeusd_gpu_power_watts" in documented
    used = set()
    for name in RULES:
        for line in (PROM / name).read_text().splitlines():
            if line.lstrip().startswith("#"):
                continue
            used |= set(re.findall(r"(?<![:\w])(zeusd_[a-z_]+)(?![:\w])",
                                   line))
    assert used, "no series found in the rules"
    assert used <= documented, used - documented
