"""The registry on a shared PostgreSQL database: a local server is started for the test (skipped
where PostgreSQL's server binaries are absent)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from suite.registry import Registry
from tests.suite.test_registry import WRITER


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pg_url():
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not installed")
    pytest.importorskip("psycopg")
    base = tempfile.mkdtemp(prefix="suite-pg-")
    data, sock = os.path.join(base, "data"), base
    prefix: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        runuser = shutil.which("runuser")
        if runuser is None:
            pytest.skip("running as root without runuser")
        shutil.chown(base, "nobody")
        os.chmod(base, 0o755)
        prefix = [runuser, "-u", "nobody", "--"]
    port = _free_port()
    subprocess.run(prefix + [initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"], check=True,
                   capture_output=True, timeout=120)
    subprocess.run(prefix + [pg_ctl, "-D", data, "-l", os.path.join(base, "log"), "-w", "-t", "60", "-o",
                             f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                   check=True, capture_output=True, timeout=120)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(prefix + [pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def test_postgres_registry_concurrent_writers(pg_url):
    reg = Registry(pg_url)
    n = 60
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, pg_url, f"pg{k}", str(n)]) for k in range(2)]
    assert all(p.wait(timeout=180) == 0 for p in procs)
    for k in range(2):
        runs = reg.runs(dataset=f"pg{k}")
        assert len(runs) == n and {r["status"] for r in runs} == {"finished"}
    assert len([m for m in reg.metrics() if True]) >= 2 * n * 2
    assert reg.claim_job("h1", "cmd") and not reg.claim_job("h1", "cmd")  # a live claim is exclusive
    reg.finish_job("h1", "finished")
    assert reg.job_status("h1") == "finished" and not reg.claim_job("h1", "cmd")
