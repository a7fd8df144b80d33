"""A real single-node Slurm for the black-box tests of the SPANK plugin
(zeus_spank.so, docs/slurm.md): Debian's slurmctld and slurmd and munge,
started here in the foreground as root under a temporary directory, with
SlurmUser root, proctrack/linuxproc (or proctrack/cgroup, which puts
each step in a cgroup of its own: cgroup.conf with autodetect and
IgnoreSystemd, nothing constrained), task/none, no accounting, job ids
from a random start (a cgroup a killed run left is not a new job's), and
four fake GPUs as a GRES whose files are character devices (mknod c 1 3,
as /dev/null: Slurm refuses plain files) with AutoDetect=off, so a job
with --gpus=N gets SLURM_STEP_GPUS and CUDA_VISIBLE_DEVICES. The plugin
is copied beside the configuration, where the jobs' users can read it."""
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PROGRAMS = ("slurmctld", "slurmd", "srun", "sbatch", "scancel", "sinfo",
            "squeue", "munged", "mungekey")


def missing():
    """Why a Slurm node cannot be started here, or None."""
    if os.geteuid() != 0:
        return "needs root to start slurmd and munged"
    lost = [p for p in PROGRAMS if shutil.which(p) is None]
    if lost:
        return ("Slurm is not installed (missing " + ", ".join(lost) +
                "; scripts/deps.sh test installs slurmctld slurmd "
                "slurm-client munge)")
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmNode:
    def __init__(self, plugin, ngpus=4, proctrack="linuxproc"):
        self.base = Path(tempfile.mkdtemp(prefix="zeus-slurm-"))
        os.chmod(self.base, 0o755)
        self.host = socket.gethostname().split(".")[0]
        self.procs = []
        b = self.base
        for d in ("state", "spool", "dev", "log", "munge"):
            (b / d).mkdir()
        os.chmod(b / "munge", 0o755)
        self.scratch = b / "scratch"
        self.scratch.mkdir()
        os.chmod(self.scratch, 0o1777)
        for i in range(ngpus):
            os.mknod(b / "dev" / f"gpu{i}", 0o666 | 0o020000,
                     os.makedev(1, 3))
        self.plugin = b / "zeus_spank.so"
        shutil.copy(plugin, self.plugin)
        os.chmod(self.plugin, 0o755)
        subprocess.run(["mungekey", "--create", "--force",
                        f"--keyfile={b / 'munge.key'}"], check=True,
                       capture_output=True)
        os.chmod(b / "munge.key", 0o600)
        self.conf = b / "slurm.conf"
        self.conf.write_text(f"""ClusterName=zeustest
SlurmctldHost={self.host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={b}/munge/sock
CredType=cred/munge
StateSaveLocation={b}/state
SlurmdSpoolDir={b}/spool
SlurmctldPidFile={b}/slurmctld.pid
SlurmdPidFile={b}/slurmd.pid
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
FirstJobId={random.randrange(1000, 10_000_000)}
SlurmctldLogFile={b}/log/slurmctld.log
SlurmdLogFile={b}/log/slurmd.log
ProctrackType=proctrack/{proctrack}
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
GresTypes=gpu
PlugStackConfig={b}/plugstack.conf
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} Gres=gpu:{ngpus} State=UNKNOWN
PartitionName=main Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
""")
        (b / "cgroup.conf").write_text(
            "CgroupPlugin=autodetect\nIgnoreSystemd=yes\n"
            "ConstrainCores=no\nConstrainRAMSpace=no\nConstrainDevices=no\n")
        (b / "gres.conf").write_text(
            f"AutoDetect=off\nName=gpu File={b}/dev/gpu[0-{ngpus - 1}]\n")
        self.plugstack(None)
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("SLURM_", "ZEUSD_"))}
        self.env["SLURM_CONF"] = str(self.conf)
        try:
            self._spawn(["munged", "--foreground", "--force",
                         f"--socket={b}/munge/sock",
                         f"--key-file={b}/munge.key",
                         f"--pid-file={b}/munged.pid",
                         f"--log-file={b}/log/munged.log",
                         f"--seed-file={b}/munge.seed"])
            self._wait(lambda: (b / "munge" / "sock").exists(), "munged")
            self._spawn(["slurmctld", "-D", "-i", "-f", str(self.conf)])
            self._spawn(["slurmd", "-D", "-f", str(self.conf),
                         "-N", self.host])
            self._wait(self._idle, "the node to be idle")
        except BaseException:
            self.stop()
            raise

    def _spawn(self, argv):
        log = open(self.base / "log" / (argv[0] + ".out"), "wb")
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=log,
                                           env=self.env))

    def _wait(self, pred, what, timeout=60):
        deadline = time.monotonic() + timeout
        while not pred():
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited {p.returncode} "
                                       f"waiting for {what}:\n"
                                       + self.logs())
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}:\n"
                                   + self.logs())
            time.sleep(0.1)

    def _idle(self):
        r = subprocess.run(["sinfo", "-h", "-o", "%t"], env=self.env,
                           capture_output=True, text=True)
        return r.returncode == 0 and r.stdout.strip() == "idle"

    def logs(self):
        out = []
        for f in sorted((self.base / "log").iterdir()):
            out.append(f"--- {f.name}\n" + f.read_text(errors="replace")[-3000:])
        return "\n".join(out)

    def plugstack(self, socket_path, required=False, extra=()):
        """Writes plugstack.conf: the plugin with socket=PATH (None: no
        plugin at all) and the plugin's own `required`. Read by each new
        srun, sbatch and slurmstepd: no restart needed."""
        line = ""
        if socket_path is not None:
            args = [f"socket={socket_path}"] + (["required"] if required
                                                 else []) + list(extra)
            line = f"required {self.plugin} {' '.join(args)}\n"
        (self.base / "plugstack.conf").write_text(line)

    def as_user(self, user):
        import pwd
        pw = pwd.getpwnam(user)
        return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}",
                "--init-groups"]

    def run(self, user, argv, timeout=60):
        return subprocess.run(self.as_user(user) + argv, env=self.env,
                              capture_output=True, text=True,
                              timeout=timeout, cwd="/tmp")

    def popen(self, user, argv):
        return subprocess.Popen(self.as_user(user) + argv, env=self.env,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                cwd="/tmp")

    def jobs(self):
        r = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env,
                           capture_output=True, text=True)
        return r.stdout.split()

    def stop(self):
        # a failed test's jobs first: their slurmstepd would outlive slurmd
        if any(p.poll() is None for p in self.procs):
            subprocess.run(["scancel", "--partition=main"], env=self.env,
                           capture_output=True, timeout=30)
            deadline = time.monotonic() + 30
            while self.jobs() and time.monotonic() < deadline:
                time.sleep(0.2)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(self.base, ignore_errors=True)
