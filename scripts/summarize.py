#!/usr/bin/python3
"""Adds up test results of one `make check` run and prints the closing line.

cmocka binaries are counted by their test cases (from the "[  PASSED  ]" /
"[  FAILED  ]" lines meson captured); a unit binary that crashed or printed no
summary counts as one failure. pytest results come from its JUnit XML.
"""
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

out = Path(sys.argv[1])
passed = failed = skipped = 0

for log in sorted(out.glob("unit-*.json")):
    for line in log.read_text().splitlines():
        if not line.strip():
            continue
        t = json.loads(line)
        text = t.get("stdout", "") + (t.get("stderr") or "")
        p = sum(int(n) for n in re.findall(r"\[  PASSED  \] (\d+) test", text))
        f = sum(int(n) for n in re.findall(r"\[  FAILED  \] (\d+) test", text))
        if t.get("result") != "OK" and f == 0:
            f = 1  # crashed, leaked under valgrind, or timed out
        if p == 0 and f == 0:
            p = 1 if t.get("result") == "OK" else 0
        passed += p
        failed += f

for xml in sorted(out.glob("pytest-*.xml")):
    root = ET.parse(xml).getroot()
    for suite in root.iter("testsuite"):
        tests = int(suite.get("tests", 0))
        f = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        s = int(suite.get("skipped", 0))
        passed += tests - f - s
        failed += f
        skipped += s

line = f"{passed} passed, {failed} failed"
if skipped:
    line += f", {skipped} skipped"
print(line)
sys.exit(1 if failed else 0)
