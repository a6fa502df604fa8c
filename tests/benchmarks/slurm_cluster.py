"""A one-node SLURM cluster on this machine for the tests, from Debian's ``slurm-wlm`` and ``munge`` packages: its own
munge daemon (key and socket in a temporary folder), ``slurmctld`` and ``slurmd`` for this host with 2 CPUs, on free
ports, found by the client commands through ``$SLURM_CONF``. :func:`start` returns the environment the clients need, or
raises :class:`Unavailable` saying why (then the tests are skipped with that reason)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scontrol", "scancel")


class Unavailable(RuntimeError):
    """The cluster cannot be started here (a component is not installed, or a daemon did not come up)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(name: str) -> str:
    path = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.path.exists(p)), None)
    if path is None:
        raise Unavailable(f"{name} not found (apt-get install slurm-wlm munge)")
    return path


@contextmanager
def cluster(base: Path, cpus: int = 2) -> Iterator[dict[str, str]]:
    """Start munged, slurmctld and slurmd under ``base``; yields the environment for sbatch / squeue / scontrol."""
    if os.geteuid() != 0:
        raise Unavailable("the one-node SLURM cluster runs its daemons as root (SlurmUser=root); not root here")
    exe = {n: _which(n) for n in DAEMONS}
    host = socket.gethostname().split(".")[0]
    for d in ("state", "spool", "munge", "log"):
        (base / d).mkdir(parents=True, exist_ok=True)
    os.chmod(base / "munge", 0o700)
    key, sock = base / "munge" / "munge.key", base / "munge" / "munge.sock"
    subprocess.run([exe["mungekey"], "--create", "--keyfile", str(key), "--force"], check=True, capture_output=True)
    os.chmod(key, 0o600)
    procs: list[subprocess.Popen[bytes]] = []
    conf = base / "slurm.conf"
    conf.write_text(f"""ClusterName=suitetest
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={base / 'state'}
SlurmdSpoolDir={base / 'spool'}
SlurmctldPidFile={base / 'slurmctld.pid'}
SlurmdPidFile={base / 'slurmd.pid'}
SlurmctldLogFile={base / 'log' / 'slurmctld.log'}
SlurmdLogFile={base / 'log' / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=5
MinJobAge=300
SchedulerParameters=sched_interval=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName={host} CPUs={cpus} RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        procs.append(subprocess.Popen([exe["munged"], "-F", "--force", "--key-file", str(key), "--socket", str(sock),
                                       "--pid-file", str(base / "munge" / "munged.pid"), "--log-file",
                                       str(base / "log" / "munged.log"), "--seed-file", str(base / "munge" / "seed")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        _wait(lambda: sock.exists(), 20, "munged did not start", base / "log" / "munged.log")
        procs.append(subprocess.Popen([exe["slurmctld"], "-D", "-i", "-f", str(conf)], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen([exe["slurmd"], "-D", "-f", str(conf)], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))

        def idle() -> bool:
            out = subprocess.run([exe["scontrol"], "show", "node", host], env=env, capture_output=True, text=True)
            return out.returncode == 0 and ("State=IDLE" in out.stdout or "State=MIXED" in out.stdout)

        _wait(idle, 60, "the SLURM node did not become idle", base / "log" / "slurmd.log", procs)
        # idle is the controller's word; a job step also needs slurmd to take it: a trivial srun must run first

        def runs() -> bool:
            try:
                return subprocess.run([exe["srun"], "-N1", "-n1", "-t", "1", "true"], env=env, capture_output=True,
                                      timeout=30).returncode == 0
            except subprocess.TimeoutExpired:
                return False

        _wait(runs, 90, "a trivial srun did not run on the SLURM node", base / "log" / "slurmd.log", procs)
        yield {"SLURM_CONF": str(conf)}
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _wait(ok, timeout: float, what: str, log: Path, procs: list[subprocess.Popen[bytes]] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        if procs and any(p.poll() is not None for p in procs):
            break
        time.sleep(0.3)
    tail = log.read_text()[-600:] if log.exists() else ""
    raise Unavailable(f"{what} ({log}: {tail.strip().splitlines()[-1] if tail.strip() else 'no log'})")


def describe(env: dict[str, str], job_ids: list[str] = (), lines: int = 60) -> str:  # type: ignore[assignment]
    """What SLURM saw, for a failing test's message: ``scontrol show job`` of each id, ``squeue --states=all``, and the
    end of the controller's and the node's logs (with every line that names one of the jobs)."""
    parts = []
    for cmd in [["scontrol", "show", "job", j] for j in job_ids] + [["squeue", "-t", "all", "-r", "-o",
                                                                     "%i %T %r %S %e"]]:
        try:
            p = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=20)
            parts.append(f"== {' '.join(cmd)}\n{p.stdout}{p.stderr}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            parts.append(f"== {' '.join(cmd)}: {exc}")
    logs = Path(env["SLURM_CONF"]).parent / "log"
    keys = [j.split("_")[0] for j in job_ids]
    for name in ("slurmctld.log", "slurmd.log"):
        text = (logs / name).read_text(errors="replace").splitlines() if (logs / name).exists() else []
        named = [ln for ln in text if any(k and k in ln for k in keys)]
        parts.append(f"== {logs / name}: lines naming {keys}\n" + "\n".join(named[-lines:])
                     + f"\n== {logs / name}: last {lines} lines\n" + "\n".join(text[-lines:]))
    return "\n".join(parts)
