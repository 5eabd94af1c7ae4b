"""The main job ends the hosts (and everything else) of its own cluster on every exit path.

``python -m tf_accum --processes 2`` is stopped mid-run with SIGTERM or SIGINT
(Ctrl-C); afterwards no process it started, its accumulator host included, is
left. Every process is found by a marker in its environment and, if one is
left, killed by pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from tests.test_main_job_processes import (
    JOB_WAIT,
    NEEDS_RAY,
    command_line,
    finish,
    processes_marked,
    start_job,
)

HOST = b"ResourceHost"  # in the host actor's process title (ray::ResourceHost)
WORKER = b"tf_accum.examples.processes"


def wait_for_training(job, marker: str) -> set[int]:
    """Block until the job's host actor and both worker processes run; their pids."""
    deadline = time.monotonic() + JOB_WAIT
    while time.monotonic() < deadline and job.poll() is None:
        marked = processes_marked(marker)
        hosts = {pid for pid in marked if HOST in command_line(pid)}
        workers = {pid for pid in marked if WORKER in command_line(pid)}
        if hosts and len(workers) == 2:
            return hosts | workers
        time.sleep(0.2)
    out, err = job.communicate(timeout=JOB_WAIT) if job.poll() is not None else ("", "")
    pytest.fail(f"the job's host and workers did not start: {err[-3000:]}")


@NEEDS_RAY
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_job_stopped_by_a_signal_leaves_no_host_or_other_process(
    tmp_path: Path, signum: int
) -> None:
    args = ["--processes", "2", "--steps", "1000000", "--compute-ms", "5", "--no-plot", "--quiet"]
    job, marker = start_job(tmp_path, *args)
    try:
        running = wait_for_training(job, marker)
        os.kill(job.pid, signum)
    finally:
        out, err, left = finish(job, marker)
    assert job.returncode in (128 + signum, 1, -signum), err[-3000:]
    assert not left, f"processes the job started are still running: {left}"
    for pid in running:  # the host and the workers, found by pid, not only by marker
        with contextlib.suppress(FileNotFoundError):
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            assert state == "Z", f"process {pid} of the job is still running"
