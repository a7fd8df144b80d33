"""Black-box tests of the CPU half of zeusd: /discover's cpus, the /cpu/*
routes over fake powercap trees (--rapl-dir) and simulated packages
(--simulate): query rules, wraparound through the daemon, get_power
accuracy against counters advanced at a known rate, counter errors, the
keepalive that catches wraps nobody asked about, and the cpu-read group.

Timing: these tests must hold on a fully loaded 2-core machine. Nothing is
compared against a nominal rate or a fixed sleep: power is checked against
what the fake counters really held while the request ran, and the
keepalive test moves a counter only after the daemon has read it.

Fake trees are written by rapltree.RaplTree; counters are rewritten in
place because the daemon keeps them open (docs/rapl.md).
"""
import re
import statistics
import time

import pytest

from conftest import run_zeusd
from rapltree import Advancer, RaplTree, ReadWatch

ENERGY = "/cpu/get_cumulative_energy"
POWER = "/cpu/get_power"
BOTH = {"cpu": "true", "dram": "true"}


def serve_tree(start, mode, tree, args=()):
    return start(mode, simulate=False,
                 args=["--rapl-dir", str(tree.root), "--enable", "cpu-read",
                       *args])


@pytest.fixture
def tree03(tmp_path):
    """Packages 0 (with DRAM) and 3 (without), plus entries to skip."""
    t = RaplTree(tmp_path / "rapl", {
        0: {"dram": True, "cpu": 1234, "dram_uj": 567},
        3: {"cpu": 890123},
    })
    (t.root / "intel-rapl-mmio:0").mkdir()
    (t.root / "intel-rapl:x").mkdir()
    yield t
    t.close()


@pytest.fixture
def d03(start, mode, tree03):
    return serve_tree(start, mode, tree03)


def expect_400(r, *needles):
    assert r.status_code == 400, r.text
    msg = r.json()["error"]
    for n in needles:
        assert n in msg, msg
    return msg


# --- discover and query rules ----------------------------------------------

def test_discover_lists_packages_by_rapl_number(d03):
    r = d03.get("/discover")
    assert r.status_code == 200
    body = r.json()
    assert body["cpus"] == [{"id": 0, "dram_available": True},
                            {"id": 3, "dram_available": False}]
    assert body["gpus"] == []
    assert body["enabled_api_groups"] == ["cpu-read"]


def test_energy_values_and_nulls(d03):
    r = d03.get(ENERGY, params=BOTH)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert r.json() == {
        "0": {"cpu_energy_uj": 1234, "dram_energy_uj": 567},
        "3": {"cpu_energy_uj": 890123, "dram_energy_uj": None}}
    r = d03.get(ENERGY, params={"cpu": "false", "dram": "true"})
    assert r.json() == {
        "0": {"cpu_energy_uj": None, "dram_energy_uj": 567},
        "3": {"cpu_energy_uj": None, "dram_energy_uj": None}}
    r = d03.get(ENERGY, params={"cpu": "true", "dram": "false"})
    assert r.json() == {
        "0": {"cpu_energy_uj": 1234, "dram_energy_uj": None},
        "3": {"cpu_energy_uj": 890123, "dram_energy_uj": None}}
    r = d03.get(ENERGY, params={"cpu": "false", "dram": "false"})
    assert r.json() == {
        "0": {"cpu_energy_uj": None, "dram_energy_uj": None},
        "3": {"cpu_energy_uj": None, "dram_energy_uj": None}}


@pytest.mark.parametrize("params,needles", [
    ({}, ["cpu"]),
    ({"dram": "true"}, ["cpu"]),
    ({"cpu": "true"}, ["dram"]),
    ({"cpu": "yes", "dram": "true"}, ["cpu"]),
    ({"cpu": "true", "dram": "1"}, ["dram"]),
    ({"cpu": "True", "dram": "true"}, ["cpu"]),
    ({"cpu": "", "dram": "true"}, ["cpu"]),
    ({"cpu": "true", "dram": "true", "gpu": "true"}, ["gpu"]),
])
def test_energy_bad_query_400(d03, params, needles):
    expect_400(d03.get(ENERGY, params=params), *needles)


def test_power_refuses_energy_parameters(d03):
    expect_400(d03.get(POWER, params=BOTH), "cpu")


@pytest.mark.parametrize("path", [ENERGY, POWER])
def test_cpu_ids_filter_order_and_duplicates(d03, path):
    extra = BOTH if path == ENERGY else {}
    r = d03.get(path, params={"cpu_ids": "3", **extra})
    assert r.status_code == 200, r.text
    m = r.json() if path == ENERGY else r.json()["power_mw"]
    assert list(m) == ["3"]
    r = d03.get(path, params={"cpu_ids": "3, 0,3,0 ", **extra})
    assert r.status_code == 200, r.text
    m = r.json() if path == ENERGY else r.json()["power_mw"]
    assert list(m) == ["0", "3"]          # ascending, duplicates collapsed


@pytest.mark.parametrize("path", [ENERGY, POWER])
@pytest.mark.parametrize("ids", ["1", "0,4", "2"])
def test_unknown_cpu_id_400_names_it_and_available(d03, path, ids):
    extra = BOTH if path == ENERGY else {}
    unknown = [i for i in ids.split(",") if i not in ("0", "3")][0]
    msg = expect_400(d03.get(path, params={"cpu_ids": ids, **extra}))
    assert re.search(rf"\b{unknown}\b", msg), msg
    assert re.search(r"\b0\b.*\b3\b", msg), msg     # the available ids


@pytest.mark.parametrize("ids", ["", "0,", "a", "-1", "0x1", "1.0"])
def test_bad_cpu_ids_400(d03, ids):
    expect_400(d03.get(ENERGY, params={"cpu_ids": ids, **BOTH}))


# --- wraparound through the daemon -------------------------------------------

class Model:
    """docs/rapl.md: reported = raw + wraps * (max + 1), a reading strictly
    below the previous one is exactly one wrap, the first reading as is."""

    def __init__(self, maximum, raw):
        self.max, self.last, self.offset = maximum, raw, 0

    def feed(self, raw):
        if raw < self.last:
            self.offset += self.max + 1
        self.last = raw
        return raw + self.offset


CPU_MAX, DRAM_MAX = 999_999, 499_999
# (cpu raw, dram raw) per step: one wrap, an equal reading (no wrap), the
# top of the range, wrap to exactly zero, many wraps over successive
# requests, and the two counters wrapping at different steps.
WRAP_STEPS = [
    (900_000, 100),
    (50_000, 200),          # CPU wraps, DRAM does not
    (50_000, 200),          # equal: no wrap
    (999_999, 100),         # CPU at max; DRAM wraps
    (0, 100),               # CPU wraps to exactly zero
    (0, 499_999),           # DRAM at max
    (500_000, 0),           # DRAM wraps to exactly zero
    (100_000, 0),           # CPU wraps
    (50_000, 400_000),      # CPU wraps again
    (10_000, 300_000),      # both wrap
    (5_000, 200_000),       # both wrap
    (999_999, 499_999),
    (1, 1),                 # both wrap
]


@pytest.fixture
def wraptree(tmp_path):
    c0, d0 = WRAP_STEPS[0]
    t = RaplTree(tmp_path / "rapl", {
        0: {"dram": True, "max": CPU_MAX, "dram_max": DRAM_MAX, "cpu": c0,
            "dram_uj": d0},
        1: {"max": CPU_MAX, "cpu": 10}})
    yield t
    t.close()


def test_wraparound_sequence(start, mode, wraptree):
    d = serve_tree(start, mode, wraptree)
    cpu = Model(CPU_MAX, WRAP_STEPS[0][0])
    dram = Model(DRAM_MAX, WRAP_STEPS[0][1])
    prev = (-1, -1)
    for step, (c, m) in enumerate(WRAP_STEPS):
        wraptree.set(0, cpu=c, dram=m)
        r = d.get(ENERGY, params={"cpu_ids": "0", **BOTH})
        assert r.status_code == 200, r.text
        got = r.json()["0"]
        want = (cpu.feed(c), dram.feed(m))
        assert (got["cpu_energy_uj"], got["dram_energy_uj"]) == want, step
        assert want[0] >= prev[0] and want[1] >= prev[1]
        prev = want
    # 7 CPU wraps and 5 DRAM wraps in all
    assert prev == (1 + 7 * (CPU_MAX + 1), 1 + 5 * (DRAM_MAX + 1))
    # the package that never moved is untouched
    assert d.get(ENERGY, params=BOTH).json()["1"] == {
        "cpu_energy_uj": 10, "dram_energy_uj": None}


def test_wrap_tracked_while_other_counter_is_asked(start, wraptree):
    """Asking only for DRAM still reads (and wrap-tracks) the CPU counter,
    and the other way round."""
    d = serve_tree(start, "uds", wraptree)
    steps = [(100, 50), (900_000, 450_000), (200, 100), (800_000, 400_000),
             (300, 50)]
    want_cpu, want_dram = None, None
    for i, (c, m) in enumerate(steps):
        wraptree.set(0, cpu=c, dram=m)
        ask_cpu = i % 2 == 0
        r = d.get(ENERGY, params={"cpu_ids": "0", "cpu": str(ask_cpu).lower(),
                                  "dram": str(not ask_cpu).lower()})
        assert r.status_code == 200, r.text
    # From the tree's start (900000, 100): CPU 900000 -> 100 -> 900000 ->
    # 200 -> 800000 -> 300 and DRAM 100 -> 50 -> 450000 -> 100 -> 400000 ->
    # 50 are three wraps each, although each counter was only asked for at
    # every other step.
    body = d.get(ENERGY, params={"cpu_ids": "0", **BOTH}).json()["0"]
    assert body == {"cpu_energy_uj": 300 + 3 * (CPU_MAX + 1),
                    "dram_energy_uj": 50 + 3 * (DRAM_MAX + 1)}


# --- power accuracy ---------------------------------------------------------

@pytest.mark.parametrize("mode,hz,gap_s", [("uds", None, 0.1),
                                             ("tcp", None, 0.1),
                                             ("uds", 5, 0.2)])
def test_power_matches_known_rate(start, tmp_path, mode, hz, gap_s):
    """Counters advanced at 50 W / 10 W / 80 W; package 1's 10 J range
    wraps every 125 ms, inside or near every sampling window.

    The expected power comes from the counter writes actually made while
    each request was in flight (Advancer.power_bounds), not from the
    nominal rate: on a loaded 2-core machine the writer thread or the
    request can stall for tens of ms, which moves the true answer, and the
    bounds widen by exactly that. Unloaded they are a few % wide."""
    tree = RaplTree(tmp_path / "rapl", {
        0: {"dram": True, "cpu": 5_000_000, "dram_uj": 7},
        1: {"cpu": 123, "max": 9_999_999}})
    args = ["--cpu-power-poll-hz", str(hz)] if hz else []
    d = serve_tree(start, mode, tree, args)
    period_ns = round(gap_s * 1e9)
    rates = {(0, "cpu"): 50, (0, "dram"): 10, (1, "cpu"): 80}
    widths, errs = [], []
    with Advancer(tree, rates) as adv:
        time.sleep(0.02)
        for _ in range(5):
            t0 = time.monotonic_ns()
            r = d.get(POWER)
            t1 = time.monotonic_ns()
            took = (t1 - t0) / 1e9
            assert r.status_code == 200, r.text
            body = r.json()
            assert set(body) == {"timestamp_ms", "power_mw"}
            assert abs(body["timestamp_ms"] / 1000 - time.time()) < 2
            pm = body["power_mw"]
            assert list(pm) == ["0", "1"]
            assert set(pm["0"]) == {"cpu_mw", "dram_mw"}
            assert pm["1"]["dram_mw"] is None
            for (n, zone), watts in rates.items():
                mw = pm[str(n)][f"{zone}_mw"]
                assert isinstance(mw, int)
                lo, hi = adv.power_bounds((n, zone), t0, t1, period_ns)
                # the daemon rounds to a whole mW
                assert lo * 1000 - 1 <= mw <= hi * 1000 + 1, \
                    (n, zone, mw, lo, hi, took, body)
                widths.append((hi - lo) / watts)
                errs.append(abs(mw / 1000 - watts) / watts)
            # at least one sampling period (packages sample in parallel)
            assert took >= gap_s * 0.95, took
    tree.close()
    print("relative to the nominal rate: error median %.4f worst %.4f, "
          "bounds width median %.4f worst %.4f" %
          (statistics.median(errs), max(errs), statistics.median(widths),
           max(widths)))


def test_power_of_idle_counter_is_zero(d03):
    r = d03.get(POWER, params={"cpu_ids": "0"})
    assert r.status_code == 200, r.text
    assert r.json()["power_mw"] == {"0": {"cpu_mw": 0, "dram_mw": 0}}


# --- counter errors ---------------------------------------------------------

@pytest.mark.parametrize("victim,how", [
    ("energy_uj", "missing"), ("max_energy_range_uj", "missing"),
    ("name", "missing"), ("dram", "missing"),
    ("energy_uj", "directory"),
    ("energy_uj", "eio"),       # root opens /proc/self/mem; pread fails
])
def test_broken_file_at_startup_is_clear_error(tmp_path, victim, how):
    tree = RaplTree(tmp_path / "rapl", {0: {"dram": True}, 1: {}})
    gone = tree.root / "intel-rapl:1" / victim
    if victim == "dram":
        gone = tree.path(0, "dram")
    gone.unlink()
    if how == "directory":
        gone.mkdir()
    elif how == "eio":
        gone.symlink_to("/proc/self/mem")
    r = run_zeusd("serve", "--rapl-dir", str(tree.root), "--enable",
                  "cpu-read", "--socket-path", str(tmp_path / "s"))
    assert r.returncode == 1, r.stderr
    assert str(gone) in r.stderr, r.stderr
    assert not (tmp_path / "s").exists()


def test_garbage_counter_at_startup_is_clear_error(tmp_path):
    tree = RaplTree(tmp_path / "rapl", {0: {}})
    tree.write_raw(0, "cpu", b"garbage\n")
    r = run_zeusd("serve", "--rapl-dir", str(tree.root), "--enable",
                  "cpu-read", "--socket-path", str(tmp_path / "s"))
    tree.close()
    assert r.returncode == 1, r.stderr
    assert str(tree.path(0)) in r.stderr, r.stderr


@pytest.mark.parametrize("zone", ["cpu", "dram"])
def test_garbage_counter_at_runtime_is_500_naming_file(start, mode, tree03,
                                                       zone):
    d = serve_tree(start, mode, tree03)
    tree03.write_raw(0, zone, b"x" * 20 + b"\n")
    for path, params in ((ENERGY, BOTH), (POWER, {})):
        r = d.get(path, params=params)
        assert r.status_code == 500, r.text
        errs = r.json()["errors"]
        assert list(errs) == ["0"], errs
        assert str(tree03.path(0, zone)) in errs["0"], errs
    # the other package still answers, in a separate request
    r = d.get(ENERGY, params={"cpu_ids": "3", **BOTH})
    assert r.status_code == 200, r.text
    assert r.json() == {"3": {"cpu_energy_uj": 890123,
                              "dram_energy_uj": None}}
    assert d.get(POWER, params={"cpu_ids": "3"}).status_code == 200
    # and package 0 recovers once its counter is sane again; the bad
    # reading did not move the wrap state
    tree03.set(0, cpu=1234, dram=567)
    r = d.get(ENERGY, params={"cpu_ids": "0", **BOTH})
    assert r.json() == {"0": {"cpu_energy_uj": 1234, "dram_energy_uj": 567}}


def test_counter_above_range_at_runtime_is_500(start, wraptree):
    d = serve_tree(start, "uds", wraptree)
    wraptree.write_raw(0, "cpu", b"%020d\n" % (CPU_MAX + 1))
    r = d.get(ENERGY, params={"cpu_ids": "0", **BOTH})
    assert r.status_code == 500, r.text
    assert str(wraptree.path(0)) in r.json()["errors"]["0"]


def test_energy_beyond_int64_is_never_negative(start, tmp_path):
    """A fake counter above 2^63 (its range allows it) must not come out as
    a negative JSON integer: either the exact value or a 500 naming the
    package. Package 1 is unaffected."""
    big = 2 ** 63 + 5
    tree = RaplTree(tmp_path / "rapl", {0: {"max": 2 ** 64 - 2, "cpu": big},
                                        1: {"cpu": 7}})
    d = serve_tree(start, "uds", tree)
    r = d.get(ENERGY, params=BOTH)
    if r.status_code == 200:
        assert r.json()["0"]["cpu_energy_uj"] == big, r.text
    else:
        assert r.status_code == 500, r.text
        assert list(r.json()["errors"]) == ["0"], r.text
    r = d.get(ENERGY, params={"cpu_ids": "1", **BOTH})
    assert r.json() == {"1": {"cpu_energy_uj": 7, "dram_energy_uj": None}}
    tree.close()


# --- keepalive --------------------------------------------------------------

def keepalive_ms(d):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = re.search(r"event=rapl_keepalive_started interval_ms=(\d+)",
                      d.logs())
        if m:
            return int(m.group(1))
        time.sleep(0.02)
    raise AssertionError(d.logs())


def test_keepalive_interval_is_30s_on_real_ranges(d03):
    assert keepalive_ms(d03) == 30000


def test_keepalive_catches_wraps_between_requests(start, tmp_path):
    """With a range of 10^8 µJ a 2 kW counter would wrap every 50 ms, so
    the automatic keepalive interval is about 25 ms. The counter goes
    through two wraps while nobody asks; one request at the end must count
    both (a plain reader would see 10M -> 30M: no wrap at all).

    Each value is written only once the daemon (its keepalive: no request
    is in flight) has read the previous one, so a loaded machine that runs
    the keepalive late slows the test down instead of failing it."""
    maximum = 99_999_999
    tree = RaplTree(tmp_path / "rapl", {
        0: {"dram": True, "max": maximum, "dram_max": 10 ** 12,
            "cpu": 10_000_000, "dram_uj": 5}})
    d = serve_tree(start, "uds", tree)
    interval = keepalive_ms(d)
    assert interval == maximum // (2000 * 1000) // 2 == 24
    assert d.get(ENERGY, params=BOTH).json()["0"]["cpu_energy_uj"] == \
        10_000_000
    watch = ReadWatch(tree.path(0))
    try:
        for raw in (90_000_000, 20_000_000, 90_000_000, 30_000_000):
            assert watch.read_after_write(lambda: tree.set(0, cpu=raw)), \
                f"the keepalive never read {raw}"
    finally:
        watch.close()
    r = d.get(ENERGY, params=BOTH)
    assert r.json()["0"] == {"cpu_energy_uj": 30_000_000 + 2 * (maximum + 1),
                             "dram_energy_uj": 5}
    tree.close()


# --- simulated packages -----------------------------------------------------

def test_simulated_packages(daemon):
    disc = daemon.get("/discover").json()
    assert disc["cpus"] == [{"id": 0, "dram_available": True},
                            {"id": 1, "dram_available": False}]
    assert re.search(r"event=rapl_keepalive_started interval_ms=\d+",
                     daemon.logs())
    a = daemon.get(ENERGY, params=BOTH).json()
    assert a["1"]["dram_energy_uj"] is None
    p = daemon.get(POWER)
    assert p.status_code == 200, p.text
    pm = p.json()["power_mw"]
    assert list(pm) == ["0", "1"]
    for n in ("0", "1"):
        assert 40_000 <= pm[n]["cpu_mw"] <= 120_000, pm
    assert 5_000 <= pm["0"]["dram_mw"] <= 20_000, pm
    assert pm["1"]["dram_mw"] is None
    b = daemon.get(ENERGY, params=BOTH).json()
    for n in ("0", "1"):
        # >= 100 ms passed at >= 40 W: at least 4 J more
        assert b[n]["cpu_energy_uj"] >= a[n]["cpu_energy_uj"] + 4_000_000
    assert b["0"]["dram_energy_uj"] > a["0"]["dram_energy_uj"]


def test_rapl_dir_wins_over_simulate(start, tree03):
    """--simulate with --rapl-dir serves the tree, not simulated packages."""
    d = start("uds", args=["--rapl-dir", str(tree03.root)])
    assert [c["id"] for c in d.get("/discover").json()["cpus"]] == [0, 3]
    assert d.get(ENERGY, params={"cpu_ids": "3", **BOTH}).json() == {
        "3": {"cpu_energy_uj": 890123, "dram_energy_uj": None}}


def test_missing_root_means_no_cpus(start, tmp_path):
    d = start("uds", simulate=False, args=[
        "--rapl-dir", str(tmp_path / "nowhere"), "--enable", "cpu-read"])
    assert d.get("/discover").json()["cpus"] == []
    r = d.get(ENERGY, params=BOTH)
    assert r.status_code == 200 and r.json() == {}, r.text
    r = d.get(POWER)
    assert r.status_code == 200 and r.json()["power_mw"] == {}, r.text
    expect_400(d.get(ENERGY, params={"cpu_ids": "0", **BOTH}), "0")


# --- the cpu-read group -----------------------------------------------------

@pytest.mark.parametrize("path", [f"{ENERGY}?cpu=true&dram=true", POWER,
                                  "/cpu/stream_power"])
def test_cpu_read_disabled_404(start, mode, path):
    d = start(mode, args=["--enable", "gpu-read"])
    r = d.get(path)
    assert r.status_code == 404, r.text
    assert r.json()["error"] == \
        "API group 'cpu-read' is not enabled on this server."
    assert "cpu-read" not in d.get("/discover").json()["enabled_api_groups"]


def test_energy_read_does_not_wait_behind_get_power(start, tree03):
    """get_power sleeps one sampling period (1 s here) on the package's
    worker; cumulative energy has its own reader and answers at once.

    The energy request is sent once the power request's first read of the
    counter has happened (seen with inotify), so it is certainly behind a
    sleeping worker, however late a loaded machine ran either side; it
    must come back well before that sleep ends."""
    import threading
    d = serve_tree(start, "uds", tree03, ["--cpu-power-poll-hz", "1"])
    watch = ReadWatch(tree03.path(0))
    slow = {}

    def power():
        t = time.monotonic()
        slow["r"] = d.make_client().get("/cpu/get_power?cpu_ids=0")
        slow["s"] = time.monotonic() - t

    try:
        watch.drain()
        th = threading.Thread(target=power)
        th.start()
        assert watch.wait_reads(1, 30), "get_power never read the counter"
        first_read = time.monotonic()
        r = d.get("/cpu/get_cumulative_energy?cpu=true&dram=true")
        fast = time.monotonic() - first_read
        th.join(30)
    finally:
        watch.close()
    assert r.status_code == 200 and slow["r"].status_code == 200
    assert slow["s"] >= 0.9
    # Queued behind the worker it would take the rest of the 1 s sleep.
    assert fast < 0.7, fast
