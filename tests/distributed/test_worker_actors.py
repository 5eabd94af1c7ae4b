"""``python -m tf_accum --processes N --address ADDR``: workers as Ray actors over the nodes.

On the session cluster with a second raylet (one CPU each), started here and
ended by pid: the job's two worker actors land on the two nodes, the job
trains and loses no gradient, and it leaves no worker actor behind; a worker
actor killed mid-run fails the job, which still ends everything.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.distributed.conftest import ROOT, Cluster
from tests.distributed.test_errors import extra_node
from tests.helpers import wait_until

JOB_WAIT = 180.0  # seconds; generous, reached only when something is broken
ACTOR_TITLE = b"ray::GradientWorker"  # Ray's process title for the worker actors


def _worker_actor_pids() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(ACTOR_TITLE):
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def _start(cluster: Cluster, *args: str) -> subprocess.Popen[str]:
    env = cluster.env()
    env.pop("TF_ACCUM_RAY_ADDRESS")  # the job attaches by --address
    command = [sys.executable, "-m", "tf_accum", "--address", cluster.address, *args]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(job: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return job.communicate(timeout=JOB_WAIT)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()


def _summary(out: str) -> dict[str, str]:
    table = out[out.index("\nmodel  ") + 1 :] if "\nmodel  " in out else out
    return dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in table.splitlines())


def test_worker_actors_spread_over_the_nodes_and_lose_no_gradient(ray_cluster) -> None:
    with extra_node(ray_cluster, num_cpus=1):
        job = _start(ray_cluster, "--processes", "2", "--steps", "20", "--no-plot", "--quiet")
        out, err = _finish(job)
        assert job.returncode == 0, out + err[-3000:]
        fields = _summary(out)
        assert fields["workers"] == "2 Ray actors"
        assert fields["worker nodes"] == "2"  # one per node: the head and the extra raylet
        assert fields["steps"] == "20"
        applied = int(fields["gradients applied"])
        accepted = int(fields["taken by the chief"].split()[0])
        stale = int(fields["dropped as stale"].split()[0])
        assert accepted >= 20
        assert applied == accepted + stale + int(fields["after the last take"])
        # the job killed its actors on the way out
        wait_until(lambda: not _worker_actor_pids(), timeout=30.0)


def test_a_killed_worker_actor_fails_the_job_and_it_still_ends_everything(ray_cluster) -> None:
    job = _start(
        ray_cluster, "--processes", "1", "--steps", "100000", "--compute-ms", "5", "--no-plot"
    )
    try:
        wait_until(lambda: bool(_worker_actor_pids()) or job.poll() is not None, timeout=60.0)
        if job.poll() is not None:
            raise AssertionError(f"the job ended before its worker could be killed: {_finish(job)}")
        time.sleep(1.0)  # let it train a while: the kill must land mid-run
        for pid in _worker_actor_pids():
            os.kill(pid, signal.SIGKILL)
        out, err = _finish(job)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert job.returncode != 0
    assert "worker actor 0 died" in err, err[-3000:]
    wait_until(lambda: not _worker_actor_pids(), timeout=30.0)
