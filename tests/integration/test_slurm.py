"""The Slurm plugin (zeus_spank.so, docs/slurm.md) on a real single-node
Slurm started here (slurmnode.py): --zeus-power-limit and the clock
options applied by zeusd to a job's GPUs from the job's own task, which
holds the lease (label slurm:JOB.STEP), so the settings come back when the
job ends or is cancelled; the step's energy line on its stderr; zeusd's
refusals and absence, with and without the plugin's `required`; bad
option values refused at submission; GPU lists a user passes in Slurm's
variables not taken. zeusd runs --simulate with leases, a policy and the
audit log; the jobs are real local users' (useradd).

The node policy's slurm_jobs = "confine" on a second node whose steps
Slurm tracks by cgroup (proctrack/cgroup): a job's GPUs are changed only
from inside its step, and its processes change no other GPU.

Skipped, with the reason, where Slurm or munge is not installed or the
tests do not run as root.
"""
import json
import os
import pwd
import re
import subprocess
import time

import pytest

from conftest import BUILD, build_sanitizers
from slurmnode import SlurmNode, missing
from zeushelp import Session, audit_lines, leases, wait_for

PLUGIN = BUILD / "src" / "slurm" / "zeus_spank.so"
# A plugin built with sanitizers cannot be loaded by srun and slurmstepd,
# which are not (the sanitizer runtime must come first); its parsers are
# run under ASan by the unit test (test_spank_parse).
WHY = missing() or (
    f"{PLUGIN} not built (-Dslurm: needs libslurm-dev)"
    if not PLUGIN.exists() else
    f"the plugin is built with -Db_sanitize={build_sanitizers()}, which "
    "Slurm's programs cannot load" if build_sanitizers() else None)
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

USERS = ("zeusslurm-a", "zeusslurm-b")
DEFAULT_MW = 400_000            # the A100 profile's default limit

# The job: writes its Slurm environment to DIR/NAME.env, then waits for
# DIR/NAME.go (or runs on at once when there is no such wait).
JOB = r"""
import json, os, sys, time
d, name = sys.argv[1], sys.argv[2]
keys = ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_GPUS",
        "CUDA_VISIBLE_DEVICES")
tmp = os.path.join(d, name + ".env.tmp")
with open(tmp, "w") as f:
    json.dump({k: os.environ.get(k) for k in keys}, f)
os.rename(tmp, os.path.join(d, name + ".env"))
while len(sys.argv) > 3 and not os.path.exists(os.path.join(d, name + ".go")):
    time.sleep(0.02)
"""


@pytest.fixture(scope="module")
def node(users):
    t0 = time.monotonic()
    n = SlurmNode(PLUGIN)
    n.started_in = time.monotonic() - t0
    yield n
    n.stop()


@pytest.fixture
def zeusd(start_public, node, users):
    """A zeusd (--gpu-leases, a policy, the audit log) the plugin talks
    to, named in plugstack.conf (without `required`)."""
    policy = start_public.base / "policy.toml"
    policy.write_text('[[grant]]\nusers = [%s]\nscopes = ["gpu-read", '
                      '"gpu-control"]\n' % ", ".join(f'"{u}"' for u in users))
    os.chmod(policy, 0o644)
    audit = start_public.base / "audit.jsonl"
    d = start_public(["--gpu-leases", "--audit-log", str(audit),
                      "--policy-file", str(policy)])
    d.audit = audit
    node.plugstack(d.sock)
    yield d
    node.plugstack(None)


def limits(d):
    r = d.get("/gpu/get_power_limit")
    assert r.status_code == 200, r.text
    return {int(k): v["power_limit_mw"] for k, v in r.json().items()}


class Job:
    """An srun of JOB as `user`, waiting for its go-ahead."""

    def __init__(self, node, user, name, *opts, wait=True):
        self.node, self.name = node, name
        self.env_file = node.scratch / f"{name}.env"
        argv = ["srun", "--chdir=/tmp", *opts, "/usr/bin/python3", "-c",
                JOB, str(node.scratch), name] + (["wait"] if wait else [])
        self.p = node.popen(user, argv)

    def started(self):
        wait_for(lambda: self.env_file.exists() or self.p.poll() is not None,
                 f"job {self.name} did not start", timeout=30)
        assert self.env_file.exists(), self.finish()
        self.env = json.loads(self.env_file.read_text())
        self.gpus = [int(x) for x in self.env["SLURM_STEP_GPUS"].split(",")]
        self.label = (f"slurm:{self.env['SLURM_JOB_ID']}."
                      f"{self.env['SLURM_STEP_ID']}")
        return self

    def go(self):
        (self.node.scratch / f"{self.name}.go").touch()
        return self.finish()

    def finish(self, timeout=60):
        out, err = self.p.communicate(timeout=timeout)
        return self.p.returncode, err


def energy_line(err, label):
    m = re.search(r"^zeus: " + re.escape(label) +
                  r": GPU energy ([0-9.]+) J over .* on (GPU .*)$", err, re.M)
    assert m, err
    return float(m.group(1)), m.group(2)


def test_a_capped_job_runs_at_its_limit_on_its_gpus_only(node, zeusd, users):
    alice, _ = users
    job = Job(node, alice, "capped", "--gpus=2", "--zeus-power-limit=200")
    job.started()
    assert len(job.gpus) == 2
    now = limits(zeusd)
    assert {g: now[g] for g in job.gpus} == {g: 200_000 for g in job.gpus}
    assert all(now[g] == DEFAULT_MW for g in now if g not in job.gpus), now
    held = leases(zeusd)["leases"]
    assert sorted(r["gpu"] for r in held) == sorted(job.gpus)
    assert {r["label"] for r in held} == {job.label}
    assert {r["user"] for r in held} == {alice}
    rc, err = job.go()
    assert rc == 0, err
    # back when the job ended (before srun returned: the energy line
    # comes after the restore)
    assert set(limits(zeusd).values()) == {DEFAULT_MW}
    total, per_gpu = energy_line(err, job.label)
    ended = [x for x in audit_lines(zeusd.audit, "lease_end")
             if x.get("label") == job.label]
    assert sorted(x["gpu"] for x in ended) == sorted(job.gpus)
    assert all(x["identity"]["user"] == alice for x in ended)
    assert total == pytest.approx(sum(x["energy_j"] for x in ended), abs=0.2)
    for x in ended:
        assert f"GPU {x['gpu']}: {x['energy_j']:.1f} J" in per_gpu


def test_limits_come_back_after_scancel(node, zeusd, users):
    alice, _ = users
    job = Job(node, alice, "cancelled", "--gpus=2", "--zeus-power-limit=150",
              "--zeus-gpu-clocks=900:1200").started()
    assert {limits(zeusd)[g] for g in job.gpus} == {150_000}
    r = subprocess.run(["scancel", job.env["SLURM_JOB_ID"]], env=node.env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rc, err = job.finish()
    assert "CANCELLED" in err, err
    wait_for(lambda: set(limits(zeusd).values()) == {DEFAULT_MW},
             "the limits did not come back after scancel", timeout=30)
    # (its energy line may or may not reach srun: srun leaves on its own
    # after a cancel, docs/slurm.md; the audit log has the energy)
    wait_for(lambda: not leases(zeusd)["leases"], "the leases did not end",
             timeout=30)
    ended = [x for x in audit_lines(zeusd.audit, "lease_end")
             if x.get("label") == job.label]
    assert sorted(x["gpu"] for x in ended) == sorted(job.gpus)
    assert {x["settings_restored"] for x in ended} == {"power_limit,gpu_clocks"}


def test_two_jobs_at_once_on_different_gpus(node, zeusd, users):
    alice, bob = users
    a = Job(node, alice, "two-a", "--gpus=2", "--zeus-power-limit=200")
    a.started()
    b = Job(node, bob, "two-b", "--gpus=2", "--zeus-power-limit=250")
    b.started()
    assert not set(a.gpus) & set(b.gpus)
    now = limits(zeusd)
    assert {now[g] for g in a.gpus} == {200_000}
    assert {now[g] for g in b.gpus} == {250_000}
    by_gpu = {r["gpu"]: (r["user"], r["label"]) for r in
              leases(zeusd)["leases"]}
    assert by_gpu == {**{g: (alice, a.label) for g in a.gpus},
                      **{g: (bob, b.label) for g in b.gpus}}
    rc, err = a.go()
    assert rc == 0, err
    now = limits(zeusd)
    assert {now[g] for g in a.gpus} == {DEFAULT_MW}
    assert {now[g] for g in b.gpus} == {250_000}
    rc, err = b.go()
    assert rc == 0, err
    energy_line(err, b.label)
    assert set(limits(zeusd).values()) == {DEFAULT_MW}


def test_a_gpu_leased_by_another_user_warns_or_with_required_fails(
        node, zeusd, users):
    alice, bob = users
    # alice holds every GPU outside Slurm (a process of hers on the node)
    s = Session(zeusd, alice)
    assert s("POST", "/gpu/set_power_limit?gpu_ids=0,1,2,3&power_limit_mw="
             "300000&block=true")[0] == 200
    try:
        job = Job(node, bob, "leased", "--gpus=1", "--zeus-power-limit=250",
                  wait=False).started()
        rc, err = job.finish()
        assert rc == 0, err
        assert "zeus: warning: " + job.label in err
        assert f"leased by user {alice}" in err
        assert "the job runs without the settings not applied" in err
        assert set(limits(zeusd).values()) == {300_000}
        node.plugstack(zeusd.sock, required=True)
        job = Job(node, bob, "leased-req", "--gpus=1",
                  "--zeus-power-limit=250", wait=False)
        rc, err = job.finish()
        assert rc != 0
        assert "zeus: error: " in err and f"leased by user {alice}" in err
        assert "the task does not start" in err
        assert not job.env_file.exists()
        assert set(limits(zeusd).values()) == {300_000}
    finally:
        s.close()


def test_zeusd_stopped_warns_or_with_required_fails(node, zeusd, users):
    alice, _ = users
    assert zeusd.stop() == 0
    job = Job(node, alice, "nozeusd", "--gpus=1", "--zeus-power-limit=200",
              wait=False).started()
    rc, err = job.finish()
    assert rc == 0, err
    assert re.search(r"zeus: warning: slurm:\d+\.0: --zeus-power-limit on "
                     r"GPU \d+ through zeusd \(" + re.escape(zeusd.sock) +
                     r"\) failed: ", err), err
    node.plugstack(zeusd.sock, required=True)
    job = Job(node, alice, "nozeusd-req", "--gpus=1",
              "--zeus-power-limit=200", wait=False)
    rc, err = job.finish()
    assert rc != 0 and "zeus: error: " in err, err
    assert not job.env_file.exists()


def untouched(node, zeusd):
    """No GPU setting changed, none written, no lease taken."""
    assert set(limits(zeusd).values()) == {DEFAULT_MW}
    assert audit_lines(zeusd.audit, "set_power_limit") == []
    view = leases(zeusd)
    assert view["leases"] == [] and view["ended"] == []


def test_a_step_without_gpus_is_refused(node, zeusd, users):
    alice, _ = users
    says = (r"zeus: %s: slurm:\d+\.0: Slurm gave the step no GPUs \(--gpus "
            r"or --gres=gpu gives it some\); its --zeus-\* options are "
            r"refused")
    r = node.run(alice, ["srun", "--chdir=/tmp", "--zeus-power-limit=200",
                         "/bin/true"])
    assert r.returncode == 0, r.stderr
    assert re.search(says % "warning", r.stderr), r.stderr
    node.plugstack(zeusd.sock, required=True)
    r = node.run(alice, ["srun", "--chdir=/tmp", "--zeus-power-limit=200",
                         "/bin/true"])
    assert r.returncode != 0
    assert re.search((says % "error") + " and it does not start", r.stderr), \
        r.stderr
    untouched(node, zeusd)


@pytest.mark.parametrize("forged", [
    {"SLURM_JOB_GPUS": "0,1"},
    {"SLURM_STEP_GPUS": "0,1"},
    {"CUDA_VISIBLE_DEVICES": "0,1"},
    {"SLURM_JOB_GPUS": "0,1", "SLURM_STEP_GPUS": "0,1",
     "CUDA_VISIBLE_DEVICES": "0,1", "GPU_DEVICE_ORDINAL": "0,1"},
])
def test_gpus_named_by_the_user_are_not_capped(node, zeusd, users, forged):
    """A step without GPUs whose user passes Slurm's GPU variables
    (issue 42, 4b): they name GPUs other jobs may hold, and are refused
    as the step having none."""
    alice, _ = users
    node.plugstack(zeusd.sock, required=True)
    r = node.run(alice, ["env", *(f"{k}={v}" for k, v in forged.items()),
                         "srun", "--chdir=/tmp", "--zeus-power-limit=100",
                         "/bin/true"])
    assert r.returncode != 0, r.stderr
    assert "Slurm gave the step no GPUs" in r.stderr, r.stderr
    untouched(node, zeusd)


def test_a_batch_script_caps_its_own_gpus_not_the_ones_it_names(
        node, zeusd, users):
    """A batch script's GPUs are the job's (SLURM_JOB_GPUS, set by
    slurmstepd); a SLURM_STEP_GPUS passed by its user does not count."""
    alice, _ = users
    out = node.scratch / "forged.out"
    r = node.run(alice, ["env", "SLURM_STEP_GPUS=2,3", "sbatch", "--parsable",
                         "--chdir=/tmp", "--gpus=1", "--zeus-power-limit=120",
                         f"--output={out}", "--wrap",
                         f"/usr/bin/python3 -c '{JOB}' {node.scratch} "
                         "forged wait"])
    assert r.returncode == 0, r.stderr
    jobid = r.stdout.strip().split(";")[0]
    env_file = node.scratch / "forged.env"
    wait_for(env_file.exists, "the batch job did not start", timeout=30)
    env = json.loads(env_file.read_text())
    assert env["SLURM_STEP_GPUS"] == "2,3"      # it reached the script
    gpus = {int(x) for x in env["CUDA_VISIBLE_DEVICES"].split(",")}
    assert not gpus & {2, 3}
    now = limits(zeusd)
    assert {g for g in now if now[g] == 120_000} == gpus, now
    (node.scratch / "forged.go").touch()
    wait_for(lambda: jobid not in node.jobs(), "the batch job did not end",
             timeout=30)
    assert set(limits(zeusd).values()) == {DEFAULT_MW}


def test_a_job_without_options_is_untouched(node, zeusd, users):
    alice, _ = users
    job = Job(node, alice, "plain", "--gpus=2", wait=False).started()
    rc, err = job.finish()
    assert rc == 0 and "zeus" not in err, err
    assert leases(zeusd)["ended"] == []


@pytest.mark.parametrize("opt,says", [
    ("--zeus-power-limit=abc", "not a power limit in watts"),
    ("--zeus-power-limit=-5", "not a power limit in watts"),
    ("--zeus-power-limit=0", "not a power limit in watts"),
    ("--zeus-gpu-clocks=900", "not a clock range MIN:MAX"),
    ("--zeus-mem-clocks=1:x", "not a clock range MIN:MAX"),
])
@pytest.mark.parametrize("cmd", ["srun", "sbatch"])
def test_a_bad_value_is_refused_at_submission(node, zeusd, users, opt, says,
                                              cmd):
    alice, _ = users
    before = node.jobs()
    argv = [cmd, "--chdir=/tmp", "--gpus=1", opt]
    argv += ["/bin/true"] if cmd == "srun" else ["--wrap", "/bin/true"]
    r = node.run(alice, argv)
    assert r.returncode != 0, r.stdout
    assert says in r.stderr and opt in r.stderr, r.stderr
    assert node.jobs() == before


def test_sbatch_job_gets_its_limit_and_its_energy_line(node, zeusd, users):
    alice, _ = users
    out = node.scratch / "batch.out"
    r = node.run(alice, ["sbatch", "--parsable", "--chdir=/tmp", "--gpus=1",
                         "--zeus-power-limit=175", f"--output={out}",
                         "--wrap", f"/usr/bin/python3 -c '{JOB}' "
                         f"{node.scratch} batch wait"])
    assert r.returncode == 0, r.stderr
    jobid = r.stdout.strip().split(";")[0]
    env_file = node.scratch / "batch.env"
    wait_for(env_file.exists, "the batch job did not start", timeout=30)
    gpus = [int(x) for x in
            json.loads(env_file.read_text())["CUDA_VISIBLE_DEVICES"]
            .split(",")]
    assert {limits(zeusd)[g] for g in gpus} == {175_000}
    (held,) = leases(zeusd)["leases"]
    assert held["label"] == f"slurm:{jobid}.batch"
    (node.scratch / "batch.go").touch()
    wait_for(lambda: jobid not in node.jobs(), "the batch job did not end",
             timeout=30)
    wait_for(lambda: "GPU energy" in out.read_text(), "no energy line",
             timeout=30)
    energy_line(out.read_text(), f"slurm:{jobid}.batch")
    assert set(limits(zeusd).values()) == {DEFAULT_MW}


def test_two_tasks_share_the_lease_and_report_once(node, zeusd, users):
    alice, _ = users
    r = node.run(alice, ["srun", "--chdir=/tmp", "--ntasks=2", "--gpus=2",
                         "--zeus-power-limit=220", "/usr/bin/python3", "-c",
                         "import time; time.sleep(0.5)"])
    assert r.returncode == 0, r.stderr
    assert len(re.findall(r"^zeus: slurm:\d+\.0: GPU energy [0-9.]+ J",
                          r.stderr, re.M)) == 1, r.stderr
    ended = [x for x in audit_lines(zeusd.audit, "lease_end")
             if x["operation"] == "lease_end"]
    assert len(ended) == 2 and {x["label"] for x in ended} == {
        ended[0]["label"]}, ended
    assert set(limits(zeusd).values()) == {DEFAULT_MW}


def test_salloc_options_reach_its_steps(node, zeusd, users):
    alice, _ = users
    r = node.run(alice, ["salloc", "--chdir=/tmp", "--gpus=1",
                         "--zeus-power-limit=210", "srun", "/bin/sh", "-c",
                         "echo $SLURM_JOB_ID.$SLURM_STEP_ID; sleep 0.3"])
    assert r.returncode == 0, r.stderr
    label = "slurm:" + r.stdout.split()[0]
    energy_line(r.stderr, label)
    (rec,) = [x for x in leases(zeusd)["ended"] if x["label"] == label]
    assert rec["user"] == alice and rec["settings"] == ["power_limit"]
    (write,) = [x for x in audit_lines(zeusd.audit, "set_power_limit")
                if x["identity"]["user"] == alice and not x.get("restore")]
    assert write["requested"] == {"power_limit_mw": 210_000}, write
    assert set(limits(zeusd).values()) == {DEFAULT_MW}


# ---- slurm_jobs = "confine" (docs/slurm.md, "Confining jobs to their GPUs")

# A job's task that writes a power limit on its own GPU and on one it was
# not given, from inside its step, records both answers in DIR/NAME.out,
# then waits for DIR/NAME.go.
JOB_WRITES = r"""
import json, os, socket, sys, time
d, name, sock = sys.argv[1], sys.argv[2], sys.argv[3]
def post(target):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(f"POST {target} HTTP/1.1\r\nHost: z\r\nContent-Length: 0"
              "\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return {"status": int(head.split()[1]), "body": body.decode()}
own = [int(x) for x in os.environ["SLURM_STEP_GPUS"].split(",")]
other = min(g for g in range(4) if g not in own)
w = "/gpu/set_power_limit?power_limit_mw=190000&block=true&gpu_ids=%d"
out = {"job": os.environ["SLURM_JOB_ID"], "own": own[0], "other": other,
       "own_write": post(w % own[0]), "other_write": post(w % other)}
tmp = os.path.join(d, name + ".out.tmp")
with open(tmp, "w") as f:
    json.dump(out, f)
os.rename(tmp, os.path.join(d, name + ".out"))
while not os.path.exists(os.path.join(d, name + ".go")):
    time.sleep(0.02)
"""


@pytest.fixture(scope="module")
def cgnode(users):
    """A second node, whose steps Slurm puts in cgroups of their own."""
    try:
        n = SlurmNode(PLUGIN, proctrack="cgroup")
    except RuntimeError as e:
        pytest.skip(f"Slurm cannot track jobs by cgroup here: {e}"[:2000])
    yield n
    n.stop()


@pytest.fixture
def confined(start_public, users):
    """confined(node, leases=True): a zeusd whose policy grants both users
    gpu-read and gpu-control on every GPU, with slurm_jobs = "confine",
    named in the node's plugstack.conf."""
    started = []

    def _start(node, leases=True):
        policy = start_public.base / "policy.toml"
        policy.write_text('slurm_jobs = "confine"\n[[grant]]\nusers = [%s]\n'
                          'scopes = ["gpu-read", "gpu-control"]\n' %
                          ", ".join(f'"{u}"' for u in users))
        os.chmod(policy, 0o644)
        audit = start_public.base / "audit.jsonl"
        d = start_public((["--gpu-leases"] if leases else []) +
                         ["--audit-log", str(audit), "--policy-file",
                          str(policy)])
        d.audit = audit
        node.plugstack(d.sock)
        started.append(node)
        return d

    yield _start
    for node in started:
        node.plugstack(None)


def set_limit(session, gpu, mw=250_000):
    return session("POST", f"/gpu/set_power_limit?gpu_ids={gpu}"
                   f"&power_limit_mw={mw}&block=true")


def test_confine_a_jobs_gpu_is_refused_to_others_until_it_ends(
        cgnode, confined, users):
    """User A's job holds GPU g (as Slurm gave it; no --zeus-* option, so
    no lease either). User B's direct write to g, and A's own from
    outside the job, are refused with 403 while the step runs; B's write
    to a GPU no job holds is served; once the step ended, B's write to g
    is served."""
    alice, bob = users
    d = confined(cgnode)
    job = Job(cgnode, alice, "held", "--gpus=1").started()
    (g,) = job.gpus
    free = min(x for x in range(4) if x != g)
    b, a = Session(d, bob), Session(d, alice)
    try:
        status, body = set_limit(b, g)
        assert status == 403, body
        says = body["errors"][str(g)]
        assert (f"GPU {g} is held by Slurm job {job.env['SLURM_JOB_ID']} "
                f"step 0 of uid {pwd.getpwnam(alice).pw_uid} ({alice})"
                in says), body
        assert 'slurm_jobs = "confine"' in says
        status, body = set_limit(a, g)
        assert status == 403, body
        assert "held by Slurm job" in body["errors"][str(g)], body
        assert set_limit(b, free)[0] == 200
        assert limits(d)[g] == DEFAULT_MW
        # a refused write took no lease
        assert [r["gpu"] for r in leases(d)["leases"]] == [free]
        refused = [x for x in audit_lines(d.audit, "set_power_limit")
                   if x.get("gpu") == g]
        assert {x["identity"]["user"] for x in refused} == {alice, bob}
        assert all("held by Slurm job" in x["error"] for x in refused), \
            refused
        rc, err = job.go()
        assert rc == 0, err
        # the step's end came from slurmstepd before srun returned
        assert set_limit(b, g)[0] == 200
        assert limits(d)[g] == 250_000
    finally:
        b.close()
        a.close()
    assert " event=slurm_step_end " in d.logs()


def test_confine_a_jobs_processes_change_only_its_gpus(cgnode, confined,
                                                       users):
    """A job's own processes: the plugin's --zeus-power-limit and the
    job's direct write on its GPU are served, its write on a GPU Slurm
    did not give it is refused (zeusd without --gpu-leases: the process
    is known all the same)."""
    alice, _ = users
    d = confined(cgnode, leases=False)
    name = "writes"
    p = cgnode.popen(alice, ["srun", "--chdir=/tmp", "--gpus=1",
                             "--zeus-power-limit=200", "/usr/bin/python3",
                             "-c", JOB_WRITES, str(cgnode.scratch), name,
                             d.sock])
    out = cgnode.scratch / f"{name}.out"
    wait_for(lambda: out.exists() or p.poll() is not None,
             "the job did not write", timeout=30)
    assert out.exists(), p.communicate()
    r = json.loads(out.read_text())
    assert r["own_write"]["status"] == 200, r
    assert r["other_write"]["status"] == 403, r
    assert (f"runs in Slurm job {r['job']} step 0, which holds GPU "
            f"{r['own']}, not GPU {r['other']}" in r["other_write"]["body"]), r
    now = limits(d)
    assert now[r["own"]] == 190_000 and now[r["other"]] == DEFAULT_MW, now
    (cgnode.scratch / f"{name}.go").touch()
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    plugin = [x for x in audit_lines(d.audit, "set_power_limit")
              if x["requested"] == {"power_limit_mw": 200_000}]
    assert [x["gpu"] for x in plugin] == [r["own"]], plugin


def test_confine_steps_are_told_by_root_only(cgnode, node, confined, users):
    """Only root may tell zeusd a step's GPUs, and only for a job Slurm
    tracks by cgroup: a user's POST /slurm/step_start is refused (403),
    root's from outside any job names no job's cgroup (400), and a step
    on a node without proctrack/cgroup says so on the job's stderr and
    still runs."""
    alice, _ = users
    d = confined(cgnode)
    a = Session(d, alice)
    try:
        status, body = a("POST", "/slurm/step_start?job=1&step=0&uid=0"
                         "&gpu_ids=0")
        assert status == 403 and "only root" in body["error"], body
        assert a("POST", "/slurm/step_end?job=1&step=0")[0] == 403
    finally:
        a.close()
    r = d.post("/slurm/step_start?job=4242&step=0&uid=0&gpu_ids=0,1")
    assert r.status_code == 400 and "in no cgroup of job 4242" in \
        r.json()["error"], r.text
    assert d.post("/slurm/step_end?job=4242&step=0").status_code == 200
    node.plugstack(d.sock)
    try:
        job = Job(node, alice, "untracked", "--gpus=1", wait=False).started()
        rc, err = job.finish()
    finally:
        node.plugstack(None)
    assert rc == 0, err
    assert re.search(r"zeus: slurm:\d+\.0: zeusd \(.*\) did not take the "
                     r"step's GPUs: HTTP 400 .*in no cgroup of job", err), err
