"""Black-box tests of the bounded device queues (docs/design.md, "Device
queues"; docs/security.md, "Device queues") against the real zeusd on the
NVML simulator.

The simulator's control file makes GPU calls slow (`delay <fn> <gpu> <ms>`),
so a backlog builds; its call log says which writes reached the "hardware"
and when. Where a test needs a queue to stay full, a Gate (a power-limit
override that holds each write until the test lets go) replaces timing
altogether. Every other timing expectation is derived from the configured
delay D or from latencies measured in the test itself, and order checks use
the call log's timestamps, so the file holds on a loaded machine and under
ASan.

Requests go through RawConn, a minimal keep-alive HTTP/1.1 client: a flood
of 20,000 requests takes about a second with it, against tens with httpx.
"""
import json
import os
import random
import re
import statistics
import threading
import time
from pathlib import Path

import pytest

from conftest import ZEUSD, linux_only, run_zeusd
from simutil import SimLog, write_control
from zeushelp import metric, network_pid, wait_until

NGPU = 4
HELPERS = Path(__file__).resolve().parent / "helpers"
SET_LIMIT = "nvmlDeviceSetPowerManagementLimit"
GET_ENERGY = "nvmlDeviceGetTotalEnergyConsumption"
GET_CONSTRAINTS = "nvmlDeviceGetPowerManagementLimitConstraints"
WRITE_FNS = (SET_LIMIT, "nvmlDeviceSetPersistenceMode",
             "nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks",
             "nvmlDeviceSetMemoryLockedClocks",
             "nvmlDeviceResetMemoryLockedClocks")


class RawConn:
    """One keep-alive HTTP/1.1 connection to the daemon."""

    def __init__(self, d):
        self.s = d.raw_socket(60)
        self.buf = b""

    def request(self, method, target):
        """-> (status, {lower-case header: value}, body bytes)"""
        self.s.sendall(f"{method} {target} HTTP/1.1\r\nHost: zeusd\r\n"
                       f"Content-Length: 0\r\n\r\n".encode())
        while b"\r\n\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("daemon closed the connection")
            self.buf += chunk
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(rest) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("daemon closed the connection")
            rest += chunk
        self.buf = rest[n:]
        return int(lines[0].split(" ")[1]), headers, rest[:n]

    def close(self):
        self.s.close()


class Q:
    """A daemon on the simulator, its call log and control file."""

    def __init__(self, d, log, ctl):
        self.d, self.log, self.ctl = d, log, ctl
        self.conn = RawConn(d)

    def req(self, method, target):
        return self.conn.request(method, target)

    def write(self, endpoint, ids, block, conn=None, **params):
        q = f"gpu_ids={ids}&block={'true' if block else 'false'}"
        for k, v in params.items():
            q += f"&{k}={v}"
        return (conn or self.conn).request("POST", f"/gpu/{endpoint}?{q}")

    def get_json(self, path):
        status, _, body = self.req("GET", path)
        assert status == 200, (path, status, body)
        return json.loads(body)

    def rss_kib(self):
        with open(f"/proc/{self.d.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def metric(self, name, **labels):
        status, _, body = self.req("GET", "/metrics")
        assert status == 200
        return metric(body.decode(), name, labels, None)


def asan_build():
    with open(ZEUSD, "rb") as f:
        return b"__asan_init" in f.read()


@pytest.fixture
def qstart(start, tmp_path):
    """qstart(queue_max=None, rules=(...), env={...}) -> Q (over UDS)."""
    n = [0]

    def _start(queue_max=None, rules=(), env=None, **kw):
        n[0] += 1
        log = tmp_path / f"sim-{n[0]}.log"
        ctl = tmp_path / f"sim-{n[0]}.ctl"
        write_control(ctl, *rules)
        e = {"ZEUS_SIM_LOG": str(log), "ZEUS_SIM_CONTROL": str(ctl),
             "ZEUSD_LOG": "info"}
        if queue_max is not None:
            e["ZEUSD_DEVICE_QUEUE_MAX"] = str(queue_max)
        if asan_build():
            # freed commands sit in ASan's quarantine (256 MiB by
            # default): keep it small so RSS still means something
            e["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + \
                ":quarantine_size_mb=1:thread_local_quarantine_size_kb=64"
        e.update(env or {})
        q = Q(start("uds", env=e, **kw), SimLog(log), ctl)
        return q
    return _start


def read_latency(q, path, n=20):
    """Median latency of `path` on an idle daemon (seconds)."""
    times = []
    for _ in range(n):
        t0 = time.monotonic()
        status, _, _ = q.req("GET", path)
        times.append(time.monotonic() - t0)
        assert status == 200
    return statistics.median(times)


def wait_calls(log, fn, gpu, count, timeout):
    got = log.wait_for(fn, gpu, count=count, timeout=timeout)
    assert len(got) >= count, (fn, gpu, len(got), count)
    return got


def run_threads(fns):
    """Starts one thread per callable at once (barrier); returns results in
    order, each (value, status, headers, body, t_sent, t_answered)."""
    out = [None] * len(fns)
    barrier = threading.Barrier(len(fns))

    def body(i):
        barrier.wait()
        out[i] = fns[i]()

    threads = [threading.Thread(target=body, args=(i,)) for i in
               range(len(fns))]
    for t in threads:
        t.start()
    return threads, out


def assert_busy(status, headers, body, *needles):
    assert status == 503, (status, body)
    assert headers.get("retry-after") == "1", headers
    assert headers.get("content-type") == "application/json"
    err = json.loads(body)
    assert set(err) == {"error"}, err
    for n in needles:
        assert n in err["error"], err
    return err["error"]


class Gate:
    """A set_power_limit override that records each write as it starts
    (record-argv, one file per GPU) and then holds it until open(): a queue
    behind it stays exactly as full as the test made it, however slow the
    machine. Open it in a `finally`, or the daemon cannot stop."""

    def __init__(self, tmp_path):
        self.rec = tmp_path / "argv"
        self.file = tmp_path / "gate"
        self.toml = tmp_path / "gate.toml"
        self.toml.write_text(f"""
[set_power_limit]
commands = [
  "{HELPERS}/record-argv {self.rec}.{{gpu_id}} {{power_limit_mw}}",
  "sh -c 'while [ ! -e {self.file} ]; do sleep 0.02; done'",
]
timeout_s = 300
""")
        os.chmod(self.toml, 0o644)
        self.opened = None

    def args(self):
        return ["--gpu-command-overrides", str(self.toml)]

    def started(self, gpu):
        """Values of the writes that started on `gpu`, in order."""
        try:
            text = Path(f"{self.rec}.{gpu}").read_text()
        except FileNotFoundError:
            return []
        return [int(line.split()[1].strip("[]")) for line in
                text.splitlines()]

    def open(self):
        if self.opened is None:
            self.opened = time.monotonic()
            self.file.touch()




class Later:
    """One request on its own connection and thread; .result once done:
    (status, headers, body, t_sent, t_answered)."""

    def __init__(self, d, method, target):
        self.result = None
        self.conn = RawConn(d)

        def go():
            t = time.monotonic()
            r = self.conn.request(method, target)
            self.result = r + (t, time.monotonic())
        self.thread = threading.Thread(target=go)
        self.thread.start()

    def join(self, timeout=60):
        self.thread.join(timeout)
        self.conn.close()
        return self.result


# --- (1) a flood of non-blocking writes --------------------------------------

FLOOD = 20_000


def test_flood_of_power_limit_writes(qstart):
    """20,000 block=false writes to a GPU whose write takes D: every answer
    is immediate, memory stays flat, only the last value matters, and a
    handful of writes reach the driver."""
    D = 1.0
    q = qstart(rules=[f"delay {SET_LIMIT} 0 {int(D * 1000)}"])
    base = read_latency(q, "/time")
    rss0 = q.rss_kib()
    rss_max = rss0
    lat = []
    t0 = time.monotonic()
    for i in range(FLOOD):
        v = 100_000 + (i * 7919) % 300_001
        a = time.monotonic()
        status, _, body = q.write("set_power_limit", 0, False,
                                  power_limit_mw=v)
        lat.append(time.monotonic() - a)
        assert status == 200, body
        if i % 1000 == 0:
            rss_max = max(rss_max, q.rss_kib())
    flood_s = time.monotonic() - t0
    flood_end = time.monotonic_ns()
    last = v
    rss_max = max(rss_max, q.rss_kib())
    print(f"\nflood: {FLOOD} writes in {flood_s:.2f} s, latency median "
          f"{statistics.median(lat) * 1e3:.3f} ms max {max(lat) * 1e3:.1f} "
          f"ms (GET /time median {base * 1e3:.3f} ms); VmRSS {rss0} KiB "
          f"before, {rss_max} KiB at most")
    # Nothing waited for the device: a typical answer costs about what a
    # /time does, and even the slowest 1% are far below one write (a single
    # stall of a loaded machine is not held against the daemon).
    assert statistics.median(lat) < 20 * base + 0.002
    assert sorted(lat)[len(lat) * 99 // 100] < D / 4
    # The backlog does not grow with the flood (it was 43 MiB before).
    assert rss_max - rss0 < 4 * 1024, (rss0, rss_max)

    # Drain: get_power_limit reads the setting after the queued write, so
    # polling it sees the last value within the running write and the
    # one queued behind it.
    t1 = time.monotonic()
    got = q.get_json("/gpu/get_power_limit?gpu_ids=0")
    drain_s = time.monotonic() - t1
    assert got == {"0": {"power_limit_mw": last}}
    assert drain_s < 2 * D + 1.0, drain_s
    calls = q.log.calls(SET_LIMIT, 0)
    print(f"flood: {len(calls)} of {FLOOD} writes reached the simulator; "
          f"drained in {drain_s:.2f} s")
    assert calls[-1].args == [str(last)]
    # At most one write per D while the flood lasted, one after it.
    assert len(calls) <= flood_s / D + 3, (len(calls), flood_s)
    assert len(calls) < FLOOD // 100
    assert len([c for c in calls if c.start_ns > flood_end]) <= 2
    # The rest were superseded: logged and counted, one by one.
    superseded = FLOOD - len(calls)
    assert q.metric("zeusd_device_commands_superseded_total",
                    device="gpu", index=0) == superseded
    assert q.d.logs().count("event=nonblocking_write_superseded gpu=0 "
                            "op=set_power_limit") == superseded
    # Other GPUs never noticed.
    assert q.get_json("/gpu/get_power_limit?gpu_ids=1") == \
        {"1": {"power_limit_mw": 400_000}}


def test_flood_of_mixed_writes(qstart):
    """Every write operation, interleaved at random: the backlog stays at a
    few items and each setting ends at the last value sent for it."""
    D = 0.5
    n = 7_000
    q = qstart(rules=[f"delay {fn} 0 {int(D * 1000)}" for fn in WRITE_FNS])
    rng = random.Random(1234)
    # the last request that decided each setting
    last = {"limit": None, "persist": None, "gpu": None, "mem": None}
    rss0 = q.rss_kib()
    t0 = time.monotonic()
    for _ in range(n):
        op = rng.choice(["set_power_limit", "set_persistence_mode",
                         "set_gpu_locked_clocks", "reset_gpu_locked_clocks",
                         "set_mem_locked_clocks", "reset_mem_locked_clocks",
                         "reset_locked_clocks"])
        params = {}
        if op == "set_power_limit":
            params["power_limit_mw"] = rng.randrange(100_000, 400_001)
            last["limit"] = params["power_limit_mw"]
        elif op == "set_persistence_mode":
            params["enabled"] = rng.choice(["true", "false"])
            last["persist"] = params["enabled"] == "true"
        elif op.startswith("set_"):
            lo = rng.randrange(200, 800)
            hi = rng.randrange(900, 1411)
            params = {"min_clock_mhz": lo, "max_clock_mhz": hi}
            dom = "gpu" if op == "set_gpu_locked_clocks" else "mem"
            last[dom] = ("set", [str(lo), str(hi)])
        else:
            for dom in ("gpu", "mem"):
                if op in (f"reset_{dom}_locked_clocks",
                          "reset_locked_clocks"):
                    last[dom] = ("reset", [])
        status, _, body = q.write(op, 0, False, **params)
        assert status == 200, (op, body)
    flood_s = time.monotonic() - t0
    flood_end = time.monotonic_ns()
    rss1 = q.rss_kib()
    print(f"\nmixed flood: {n} writes in {flood_s:.2f} s; VmRSS {rss0} -> "
          f"{rss1} KiB")
    assert rss1 - rss0 < 4 * 1024

    # Drain: both reads depend on writes of their setting.
    assert q.get_json("/gpu/get_power_limit?gpu_ids=0") == \
        {"0": {"power_limit_mw": last["limit"]}}
    assert q.get_json("/gpu/get_persistence_mode?gpu_ids=0") == \
        {"0": {"enabled": last["persist"]}}
    # The clocks have no read: wait until the simulator is quiet.
    deadline = time.monotonic() + 20 * D + 10
    while True:
        writes = [c for c in q.log.calls(gpu=0) if c.fn in WRITE_FNS]
        quiet = time.monotonic_ns() - writes[-1].end_ns > 3 * D * 1e9
        if quiet or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert quiet
    after = [c for c in writes if c.start_ns > flood_end]
    print(f"mixed flood: {len(writes)} of {n} writes reached the simulator, "
          f"{len(after)} after the flood")
    assert len(writes) < n // 10
    # A few queued items at most: one per setting plus a reset of both
    # clock domains ahead of the single-domain clock writes (5 items, 6
    # calls), and the second call of a running reset_locked_clocks.
    assert len(after) <= 8, after
    for dom, (set_fn, reset_fn) in {
            "gpu": ("nvmlDeviceSetGpuLockedClocks",
                    "nvmlDeviceResetGpuLockedClocks"),
            "mem": ("nvmlDeviceSetMemoryLockedClocks",
                    "nvmlDeviceResetMemoryLockedClocks")}.items():
        final = [c for c in writes if c.fn in (set_fn, reset_fn)][-1]
        kind, args = last[dom]
        assert final.fn == (set_fn if kind == "set" else reset_fn), dom
        assert final.args == args, dom


# --- (2) a queue full of blocking writes -------------------------------------

def test_full_queue_answers_503_and_runs_nothing(qstart, tmp_path):
    """GPU 0's write queue full of blocking writes (1 running + MAX queued,
    held by a gate): every further write is answered 503 with Retry-After at
    once, and nothing of it ever runs; reads still have room."""
    MAX = 4
    gate = Gate(tmp_path)
    q = qstart(queue_max=MAX, args=gate.args())
    target = "/gpu/set_power_limit?gpu_ids=0&block=true&power_limit_mw={}"
    reqs = []
    try:
        # A burst of concurrent blocking writes, more than fit ...
        n = MAX + 4
        conns = [RawConn(q.d) for _ in range(n)]
        barrier = threading.Barrier(n)

        def writer(i):
            barrier.wait()
            t = time.monotonic()
            r = conns[i].request("POST", target.format(200_000 + i))
            burst[i] = (200_000 + i,) + r + (t, time.monotonic())
        burst = [None] * n
        threads = [threading.Thread(target=writer, args=(i,))
                   for i in range(n)]
        for t in threads:
            t.start()
        assert wait_until(lambda: gate.started(0) and sum(
            r is not None for r in burst) >= n - MAX - 1)
        # ... then single ones until one is refused: with the gate shut
        # nothing leaves the queue, so from here on it is full.
        for k in range(MAX + 1):
            r = Later(q.d, "POST", target.format(300_000 + k))
            reqs.append((300_000 + k, r))
            if wait_until(lambda: r.result is not None, 0.5):
                assert r.result[0] == 503, r.result
                break
        assert reqs[-1][1].result is not None, "the queue never filled"
        # the extra ones, blocking and not
        extra = Later(q.d, "POST", target.format(400_000))
        extra_nb = q.write("set_power_limit", 0, False,
                           power_limit_mw=400_001)
        assert wait_until(lambda: extra.result is not None, 5)
        # Reads have their own room (this one runs once the gate opens).
        read = Later(q.d, "GET", "/gpu/get_power_limit_constraints"
                     "?gpu_ids=0")
        # Every request but the MAX + 1 held ones is answered while the
        # gate is shut: refused at once, not after a write.
        later = [r for _, r in reqs] + [extra]
        assert wait_until(lambda: sum(r is None for r in burst) + sum(
            r.result is None for r in later) == MAX + 1), \
            (burst, [r.result for r in later])
    finally:
        gate.open()
    for t in threads:
        t.join(60)
    for c in conns:
        c.close()
    results = burst + [(v,) + r.join() for v, r in reqs]
    results.append((400_000,) + extra.join())
    results.append((400_001,) + extra_nb + (0, 0))

    ok = [r for r in results if r[1] == 200]
    busy = [r for r in results if r[1] != 200]
    # exactly what fits: the running write and MAX queued
    assert len(ok) == MAX + 1, [r[:2] for r in results]
    assert extra.result[0] == 503 and extra_nb[0] == 503
    for value, status, headers, body, sent, answered in busy:
        assert_busy(status, headers, body, "GPU 0 command queue is full",
                    f"({MAX} queued)", "retry later")
        assert answered < gate.opened
    # Exactly the accepted writes ran; nothing of a refused one did.
    assert sorted(gate.started(0)) == sorted(r[0] for r in ok)
    assert read.join()[0] == 200


def test_full_read_queue_refuses_whole_multi_gpu_read(qstart):
    """Reads are bounded too; a read of GPUs 0 and 1 refused because GPU 0's
    queue is full reads nothing on GPU 1.

    Reads of one kind merge (docs/design.md, "Reads merge"), so the queue is
    filled with reads of different kinds: with room for one read, GPU 0
    runs the first read to arrive (kind K) for D and queues the next of
    another kind, or of K (kind Q); requests of Q join it, and every other
    request is refused, among them every request of the third kind."""
    MAX, D = 1, 1.0
    GET_LIMIT = "nvmlDeviceGetPowerManagementLimit"
    GET_PERSISTENCE = "nvmlDeviceGetPersistenceMode"
    kinds = {"get_power_limit_constraints": GET_CONSTRAINTS,
             "get_power_limit": GET_LIMIT,
             "get_persistence_mode": GET_PERSISTENCE}
    q = qstart(queue_max=MAX,
               rules=[f"delay {fn} 0 {int(D * 1000)}"
                      for fn in kinds.values()])
    n = 7
    ops = [list(kinds)[i % 3] for i in range(n)]
    conns = [RawConn(q.d) for _ in range(n)]
    mark = q.log.mark()     # zeusd reads the constraints once at startup

    def reader(i):
        def go():
            t = time.monotonic()
            r = conns[i].request("GET", f"/gpu/{ops[i]}?gpu_ids=0,1")
            return (i,) + r + (t, time.monotonic())
        return go

    threads, out = run_threads([reader(i) for i in range(n)])
    for t in threads:
        t.join(n * D + 30)
    for c in conns:
        c.close()
    ok = [r for r in out if r[1] == 200]
    busy = [r for r in out if r[1] != 200]
    ok_kinds = {ops[r[0]] for r in ok}
    # K and Q: at most two kinds answered, so at least one refused whole
    assert 1 <= len(ok_kinds) <= 2, [(ops[r[0]], r[1]) for r in out]
    assert len(busy) >= 2
    for _, status, headers, body, sent, answered in busy:
        msg = assert_busy(status, headers, body)
        # GPU 1 reads fast, but on a busy machine its queue can fill for
        # a moment too, so some refusals may name it
        assert re.fullmatch(rf"GPU [01] command queue is full \({MAX} "
                            r"queued\); retry later", msg), msg
        assert answered - sent < D      # refused, not run
    # all or nothing: a kind nobody got an answer for was read on neither
    # GPU; an answered kind was read on GPU 0 once, or twice when K was
    # also Q (the rest joined)
    for op, fn in kinds.items():
        on0 = len(q.log.calls(fn, 0, mark))
        on1 = len(q.log.calls(fn, 1, mark))
        if op in ok_kinds:
            assert 1 <= on0 <= 2 and on1 >= 1, (op, on0, on1)
        else:
            assert on0 == 0 and on1 == 0, (op, on0, on1)


# --- (3) reads during a write backlog ----------------------------------------

def test_reads_not_starved_by_write_backlog(qstart):
    D = 1.0
    nwrites = 6
    q = qstart(rules=[f"delay {SET_LIMIT} 0 {int(D * 1000)}"])
    base = read_latency(q, "/gpu/get_cumulative_energy?gpu_ids=0")
    conns = [RawConn(q.d) for _ in range(nwrites)]

    def writer(i):
        return lambda: q.write("set_power_limit", 0, True, conn=conns[i],
                               power_limit_mw=300_000 + i)

    threads, out = run_threads([writer(i) for i in range(nwrites)])
    # Once the first write has finished, the rest are running or queued:
    # a backlog of nwrites - 1 writes, (nwrites - 1) * D of work.
    wait_calls(q.log, SET_LIMIT, 0, 1, timeout=D + 10)

    def timed_read(path, fn):
        t_issue = time.monotonic_ns()
        status, _, body = q.req("GET", path)
        took = (time.monotonic_ns() - t_issue) / 1e9
        assert status == 200, body
        # From the call log: it waited for at most the write running when
        # it was queued. t_issue is taken before the request is sent, and
        # the write running then may end and the next begin while the
        # request is on its way (a loaded machine shows that window): so
        # at most one write began between t_issue and the read's driver
        # call, and only in that first moment; a read queued behind the
        # backlog would see the writes after it begin too.
        read = [c for c in q.log.calls(fn, 0) if c.start_ns >= t_issue][0]
        began = [c for c in q.log.calls(SET_LIMIT, 0)
                 if t_issue < c.start_ns < read.start_ns]
        assert len(began) <= 1, (path, began)
        assert all(c.start_ns - t_issue < 0.5 * D * 1e9 for c in began), \
            (path, t_issue, began)
        assert took < D + max(0.5 * D, 20 * base), (path, took)
        return took

    energy_s = timed_read("/gpu/get_cumulative_energy?gpu_ids=0", GET_ENERGY)
    constraints_s = timed_read("/gpu/get_power_limit_constraints?gpu_ids=0",
                               GET_CONSTRAINTS)
    # A scrape samples the GPU without waiting for the backlog either.
    t = time.monotonic()
    assert q.metric("zeusd_gpu_power_limit_max_watts", index=0) == 400.0
    metrics_s = time.monotonic() - t
    assert metrics_s < D + max(0.5 * D, 20 * base)
    backlog = len(q.log.calls(SET_LIMIT, 0))
    assert backlog < nwrites, "the backlog drained before the reads"
    print(f"\nreads during a {nwrites - backlog}-write backlog of {D} s "
          f"writes: energy {energy_s:.3f} s, constraints "
          f"{constraints_s:.3f} s, /metrics {metrics_s:.3f} s (idle read "
          f"{base * 1e3:.2f} ms)")

    # Read-after-write still holds for the setting a read returns: the
    # non-blocking write goes behind the backlog, and so does the read.
    assert q.write("set_power_limit", 0, False,
                   power_limit_mw=123_000)[0] == 200
    assert q.get_json("/gpu/get_power_limit?gpu_ids=0") == \
        {"0": {"power_limit_mw": 123_000}}
    assert q.write("set_persistence_mode", 0, False, enabled="true")[0] == 200
    assert q.get_json("/gpu/get_persistence_mode?gpu_ids=0") == \
        {"0": {"enabled": True}}
    for t in threads:
        t.join(30)
    for c in conns:
        c.close()
    assert [r[0] for r in out] == [200] * nwrites
    calls = q.log.calls(SET_LIMIT, 0)
    assert len(calls) == nwrites + 1 and calls[-1].args == ["123000"]


# --- (4) a multi-GPU write with one full queue -------------------------------

def test_multi_gpu_write_refused_whole(qstart, tmp_path):
    """GPU 0's queue is full: a write to GPUs 0 and 1 is refused whole, and
    GPU 1 (whose queue is empty) gets nothing of it."""
    MAX = 2
    gate = Gate(tmp_path)
    q = qstart(queue_max=MAX, args=gate.args())
    try:
        # A blocking write holds GPU 0 ...
        filler = Later(q.d, "POST", "/gpu/set_power_limit?gpu_ids=0"
                       "&block=true&power_limit_mw=250000")
        assert wait_until(lambda: gate.started(0) == [250_000])
        # ... and writes of other settings fill its queue (each answered
        # once queued).
        assert q.write("set_persistence_mode", 0, False,
                       enabled="true")[0] == 200
        assert q.write("set_gpu_locked_clocks", 0, False, min_clock_mhz=300,
                       max_clock_mhz=1200)[0] == 200
        assert_busy(*q.write("set_mem_locked_clocks", 0, False,
                             min_clock_mhz=405, max_clock_mhz=1215),
                    f"GPU 0 command queue is full ({MAX} queued); "
                    "retry later")

        for block in (True, False):
            r = q.write("set_power_limit", "0,1", block,
                        power_limit_mw=199_000)
            assert_busy(*r, "GPU 0 command queue is full")
        r = q.write("set_power_limit", "1,0", True, power_limit_mw=198_000)
        assert_busy(*r, "GPU 0 command queue is full")
        # A write that replaces a queued one needs no room.
        assert q.write("set_persistence_mode", "0", False,
                       enabled="false")[0] == 200
        # GPU 1's queue was empty all along: this is the all-or-nothing.
        assert gate.started(1) == []
    finally:
        gate.open()
    assert filler.join()[0] == 200
    # Drained: GPU 1 never got a write, GPU 0 only the filler.
    assert q.get_json("/gpu/get_persistence_mode?gpu_ids=0,1") == \
        {"0": {"enabled": False}, "1": {"enabled": False}}
    assert gate.started(0) == [250_000]
    assert gate.started(1) == []
    # the newer persistence write took the older one's place in the queue
    # (the queue drains after the filler's answer: wait for both writes)
    wait_until(lambda: len(q.log.writes()) >= 2, 10)
    assert q.log.writes() == [
        ("nvmlDeviceSetPersistenceMode", 0, ["0"]),
        ("nvmlDeviceSetGpuLockedClocks", 0, ["300", "1200"])]
    assert "event=nonblocking_write_superseded gpu=0 " \
        "op=set_persistence_mode" in q.d.logs()


# --- (5) ZEUSD_DEVICE_QUEUE_MAX ----------------------------------------------

@pytest.mark.parametrize("value", ["0", "65537", "abc", "-1", "1e3", " 8",
                                   "99999999999999999999"])
def test_bad_queue_max_refused(tmp_path, value):
    sock = tmp_path / "s.sock"
    r = run_zeusd("serve", "--simulate", "--socket-path", str(sock),
                  env={"ZEUSD_DEVICE_QUEUE_MAX": value})
    assert r.returncode in (1, 2), r
    assert r.stderr.startswith("zeusd: ")
    assert "ZEUSD_DEVICE_QUEUE_MAX" in r.stderr
    assert "1 to 65536" in r.stderr
    assert not sock.exists()


def test_queue_max_of_one(qstart):
    """The smallest bound still serves every request of a node: the shared
    readers get the bound times the devices they serve."""
    q = qstart(queue_max=1)
    power = q.get_json("/gpu/get_power")["power_mw"]
    assert sorted(power) == [str(i) for i in range(NGPU)]
    assert len(q.get_json("/gpu/get_cumulative_energy")) == NGPU
    assert q.get_json("/cpu/get_cumulative_energy?cpu=true&dram=true")
    assert q.get_json("/cpu/get_power")["power_mw"]
    status, _, _ = q.req("GET", "/metrics")
    assert status == 200
    assert q.write("set_power_limit", "0,1,2,3", True,
                   power_limit_mw=300_000)[0] == 200


def test_cpu_package_queue_bounded(qstart):
    """/cpu/get_power holds a package's worker for one sampling period; a
    burst beyond the bound is refused at once."""
    q = qstart(queue_max=1, args=["--cpu-power-poll-hz", "2"])   # 0.5 s
    pkg = q.get_json("/discover")["cpus"][0]["id"]
    n = 6
    conns = [RawConn(q.d) for _ in range(n)]

    def reader(i):
        def go():
            t = time.monotonic()
            r = conns[i].request("GET", f"/cpu/get_power?cpu_ids={pkg}")
            return r + (t, time.monotonic())
        return go

    threads, out = run_threads([reader(i) for i in range(n)])
    for t in threads:
        t.join(30)
    for c in conns:
        c.close()
    ok = [r for r in out if r[0] == 200]
    busy = [r for r in out if r[0] != 200]
    assert busy and 1 <= len(ok) <= 2, [r[0] for r in out]
    for status, headers, body, sent, answered in busy:
        assert_busy(status, headers, body,
                    f"CPU {pkg} command queue is full (1 queued)")
        # at once, not after a sampling period
        assert answered - sent < min(r[4] - r[3] for r in ok)


def test_concurrent_power_reads_merge(qstart):
    """Reads of one GPU's power that arrive while one is queued and not yet
    started join it (docs/design.md, "Reads merge"): N clients at once cost
    fewer than N driver calls, the joined reads are counted, and every
    answer is still a value the driver read after its request was sent."""
    d_ms = 400
    power_fn = "nvmlDeviceGetFieldValues"	# test_gpu.py: get_power's call
    q = qstart(rules=(f"delay {power_fn} 0 {d_ms}",))
    n = 16

    def counts():
        """GPU 0's (commands, merged) from one scrape, which counts its
        own snapshot of the GPU among the commands."""
        status, _, body = q.req("GET", "/metrics")
        assert status == 200
        got = []
        for name in ("zeusd_device_commands_total",
                     "zeusd_device_commands_merged_total"):
            m = re.search(rf'^{name}\{{device="gpu",index="0"\}} (\d+)$',
                          body.decode(), re.M)
            assert m, name
            got.append(int(m.group(1)))
        return got

    commands0, merged0 = counts()
    assert merged0 == 0
    conns = [RawConn(q.d) for _ in range(n)]
    mark = q.log.mark()

    def reader(i):
        def go():
            t = time.monotonic_ns()
            r = conns[i].request("GET", "/gpu/get_power?gpu_ids=0")
            return r + (t, time.monotonic_ns())
        return go

    threads, out = run_threads([reader(i) for i in range(n)])
    for t in threads:
        t.join(60)
    for c in conns:
        c.close()
    assert [r[0] for r in out] == [200] * n, [r[2] for r in out]
    for r in out:
        assert list(json.loads(r[2])["power_mw"]) == ["0"]
    calls = [c for c in q.log.calls(power_fn, gpu=0, since=mark)
             if c.rc == "SUCCESS"]
    # (read before the scrape below, whose snapshot reads the power too)
    commands, merged = counts()
    commands -= commands0 + 1		# the scrape's own snapshot
    merged -= merged0
    assert commands == len(calls)
    assert merged + len(calls) == n
    assert merged >= 1 and len(calls) < n
    # every answer comes from a driver call that began after the request
    # was sent and ended before it was answered
    for _, _, body, sent, answered in out:
        assert any(sent <= c.start_ns and c.end_ns <= answered
                   for c in calls), (sent, answered, calls)


def get_at_once(q, n, target):
    """GET `target` on n connections at once -> the n bodies, each 200."""
    conns = [RawConn(q.d) for _ in range(n)]
    threads, out = run_threads(
        [lambda c=c: c.request("GET", target) for c in conns])
    for t in threads:
        t.join(60)
    for c in conns:
        c.close()
    assert [r[0] for r in out] == [200] * n, [r[2] for r in out]
    return [r[2] for r in out]


def counter(q, name):
    """An unlabelled counter of /metrics."""
    status, _, body = q.req("GET", "/metrics")
    assert status == 200
    m = re.search(rf"^{name} (\d+)$", body.decode(), re.M)
    assert m, name
    return int(m.group(1))


def answers_shared(q):
    return counter(q, "zeusd_answers_shared_total")


def test_merged_reads_share_one_answer(qstart):
    """Requests answered from the same merged read with the same body get
    one response (docs/design.md, "Answers shared"): the counter rises by
    exactly the answers whose body equals the one finished before them.
    Equal bodies are consecutive in finish order (one read's requests
    finish together, timestamps never go back), so that is N minus the
    number of distinct bodies, whatever the machine's speed."""
    q = qstart(rules=("delay nvmlDeviceGetFieldValues 0 300",))
    n = 16
    shared0 = answers_shared(q)
    bodies = get_at_once(q, n, "/gpu/get_power?gpu_ids=0")
    for b in bodies:
        assert list(json.loads(b)["power_mw"]) == ["0"]
    assert answers_shared(q) - shared0 == n - len(set(bodies))
    assert len(set(bodies)) < n		# 300 ms: they merged


def test_answer_too_long_to_key_is_not_shared(qstart):
    """A power read of more GPUs than a share key holds (31) is answered
    whole and never shared, even when the same merged read answers many
    requests with one body."""
    ngpu = 40
    q = qstart(rules=("delay nvmlDeviceGetFieldValues 0 300",),
               env={"ZEUS_SIM_GPUS": str(ngpu)})
    n = 8
    shared0 = answers_shared(q)
    bodies = get_at_once(q, n, "/gpu/get_power")
    for b in bodies:
        assert list(json.loads(b)["power_mw"]) == \
            [str(i) for i in range(ngpu)]
    assert len(set(bodies)) < n		# merged: bodies alike
    assert answers_shared(q) == shared0


def test_shared_answers_never_cross_queries(qstart):
    """Requests for different GPUs, or for different CPU figures, merged
    into the same reads, each get the body of their own query: the key
    of a shared answer holds every input of the body."""
    q = qstart(rules=("delay nvmlDeviceGetFieldValues * 200",))
    pkg = q.get_json("/discover")["cpus"][0]["id"]
    gpu_queries = {"0": ["0"], "1": ["1"], "0,1": ["0", "1"]}
    cpu_queries = {"cpu=true&dram=false": (True, False),
                   "cpu=false&dram=true": (False, True),
                   "cpu=true&dram=true": (True, True)}
    targets = [f"/gpu/get_power?gpu_ids={k}" for k in gpu_queries] + \
        [f"/cpu/get_cumulative_energy?cpu_ids={pkg}&{k}"
         for k in cpu_queries]
    n = 4 * len(targets)
    conns = [RawConn(q.d) for _ in range(n)]

    def reader(i):
        def go():
            got = []
            for _ in range(5):
                got.append(conns[i].request("GET", targets[i % len(targets)]))
            return got
        return go

    threads, out = run_threads([reader(i) for i in range(n)])
    for t in threads:
        t.join(120)
    for c in conns:
        c.close()
    for i, answers in enumerate(out):
        target = targets[i % len(targets)]
        for status, _, body in answers:
            assert status == 200, (target, body)
            doc = json.loads(body)
            if target.startswith("/gpu/"):
                want = gpu_queries[target.split("=", 1)[1]]
                assert list(doc["power_mw"]) == want, (target, doc)
            else:
                cpu, dram = cpu_queries[target.split("&", 1)[1]]
                v = doc[str(pkg)]
                assert (v["cpu_energy_uj"] is not None) == cpu, (target, v)
                assert (v["dram_energy_uj"] is not None) == dram, (target, v)


def test_concurrent_cpu_power_reads_merge(qstart):
    """/cpu/get_power holds the package's worker for a sampling period;
    requests that come meanwhile join the one queued behind it and share
    its measurement (taken after they all arrived) instead of waiting for
    one period each."""
    q = qstart(args=["--cpu-power-poll-hz", "2"])   # 0.5 s
    pkg = q.get_json("/discover")["cpus"][0]["id"]
    n = 6

    def counts():
        status, _, body = q.req("GET", "/metrics")
        assert status == 200
        got = []
        for name in ("zeusd_device_commands_total",
                     "zeusd_device_commands_merged_total"):
            m = re.search(rf'^{name}\{{device="cpu",index="{pkg}"\}} (\d+)$',
                          body.decode(), re.M)
            assert m, name
            got.append(int(m.group(1)))
        return got

    commands0, merged0 = counts()
    conns = [RawConn(q.d) for _ in range(n)]

    def reader(i):
        def go():
            return conns[i].request("GET", f"/cpu/get_power?cpu_ids={pkg}")
        return go

    threads, out = run_threads([reader(i) for i in range(n)])
    for t in threads:
        t.join(30)
    for c in conns:
        c.close()
    assert [r[0] for r in out] == [200] * n, [r[2] for r in out]
    for r in out:
        assert json.loads(r[2])["power_mw"][str(pkg)]["cpu_mw"] > 0
    commands, merged = counts()
    # the energy read of each scrape is a command of the package too
    commands -= commands0 + 1
    merged -= merged0
    assert commands + merged == n
    assert merged >= 1


# ---- Waiting on the loop (src/http/request.c; docs/design.md) ---------------

WAITED = "zeusd_requests_waited_unsuspended_total"
ORPHANED = "zeusd_requests_orphaned_total"


def network_cpu_s(q):
    """utime + stime of the network process, in seconds."""
    with open(f"/proc/{network_pid(q.d)}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hammer_until(q, conns, name, above, target="/gpu/get_power"):
    """`conns` keep-alive clients GET `target` back to back until the
    counter `name` exceeds `above` (a watcher reads /metrics on its own
    connection every 0.2 s) or 60 s pass; -> the answers other than 200
    (none expected)."""
    deadline = time.monotonic() + 60
    stop = threading.Event()
    bad = []

    def watcher():
        c = Q(q.d, q.log, q.ctl)
        while not stop.is_set() and time.monotonic() < deadline:
            if counter(c, name) > above:
                break
            time.sleep(0.2)
        c.conn.close()
        stop.set()

    def client():
        c = RawConn(q.d)
        while not stop.is_set():
            status, _, body = c.request("GET", target)
            if status != 200:
                bad.append((status, body))
        c.close()
    w = threading.Thread(target=watcher)
    w.start()
    threads, _ = run_threads([client] * conns)
    for t in threads + [w]:
        t.join(90)
    return bad


@linux_only("split-loop")
def test_one_client_never_waits_unsuspended(qstart):
    """A lone client's device request is suspended at once, as before
    (the loop sleeps in epoll until the device answers): only when many
    requests wait does the loop keep them unsuspended. With 8 clients at
    once the counter then rises."""
    q = qstart()
    w0 = counter(q, WAITED)
    for _ in range(200):
        assert q.get_json("/gpu/get_power")["power_mw"]
    assert counter(q, WAITED) == w0
    assert hammer_until(q, 8, WAITED, w0) == []
    assert counter(q, WAITED) > w0


@linux_only("split-loop")
def test_clients_gone_while_waiting_unsuspended(qstart):
    """The attack on the unsuspended wait: clients send a read and hang up
    while it waits, so libmicrohttpd closes their connection with the
    read's commands still out. The request must outlive the connection
    until its last command completes (then the loop frees it): under ASan
    a use after free or a leak fails the daemon's exit. Runs until zeusd
    has counted such a request (the moment is the scheduler's), then
    checks that every other client was answered and the daemon still is."""
    q = qstart()
    o0 = counter(q, ORPHANED)
    done = threading.Event()
    sent = [0]

    def leaver():
        rng = random.Random()
        while not done.is_set():
            s = q.d.raw_socket(10)
            s.sendall(b"GET /gpu/get_power HTTP/1.1\r\nHost: z\r\n\r\n")
            pause = rng.random() * 0.0004
            if pause > 0.00005:
                time.sleep(pause)
            s.close()
            sent[0] += 1
    leavers = [threading.Thread(target=leaver) for _ in range(3)]
    for t in leavers:
        t.start()
    try:
        bad = hammer_until(q, 6, ORPHANED, o0)
    finally:
        done.set()
        for t in leavers:
            t.join(30)
    assert bad == []
    assert counter(q, ORPHANED) > o0, (sent[0], q.d.logs()[-2000:])
    assert q.get_json("/gpu/get_power")["power_mw"]


@linux_only("split-loop")
def test_slow_device_does_not_spin_the_loop(qstart):
    """Eight clients read a GPU whose power read takes D = 1 s: their
    requests wait unsuspended for a few turns at most, then are suspended,
    so the network process sleeps through the read instead of spinning
    (a spinning loop would use about one CPU second per second). Its CPU
    time over the read must stay under a fifth of the time the read
    took."""
    q = qstart(rules=("delay nvmlDeviceGetFieldValues 0 1000",))
    cpu0, t0 = network_cpu_s(q), time.monotonic()
    bodies = get_at_once(q, 8, "/gpu/get_power?gpu_ids=0")
    cpu, wall = network_cpu_s(q) - cpu0, time.monotonic() - t0
    assert wall >= 1.0
    for b in bodies:
        assert list(json.loads(b)["power_mw"]) == ["0"]
    assert cpu < wall / 5, (cpu, wall)
