"""``server.join()`` of a ps task started by hand returns when the job is over.

Real processes on the test session's Ray cluster: a ps process that calls
``join()``, and worker processes that use it and then wait for their stdin
to close. The job is over once every worker task of the ClusterSpec has used
the ps task and all of their processes have ended; a worker that restarts
before then keeps it going. SIGTERM ends a ps or a worker process at once,
quietly.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.distributed.conftest import PROCESS_WAIT, Cluster
from tests.distributed.test_ways_in import RAY_WARNING

# A Ray log line of any level ("... INFO worker.py:1841 -- Connecting to ..."): a
# normal run prints none, also with the program's own logging at INFO.
RAY_LOG_LINE = re.compile(r"\b(DEBUG|INFO|WARNING|ERROR|CRITICAL)\b [\w.]+\.py:\d+ --")

END_BOUND = 20.0  # seconds for join() to return once the last worker has ended
STOP_BOUND = 10.0  # seconds for a process to end after SIGTERM
# Seconds a ps process must keep running to count as still joined: several of
# its checks, and more than the host takes to learn that a worker process ended.
STILL_RUNNING = 5.0

PS = """
import json, logging, sys
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
import tf_accum.compat.v1 as tf
server = tf.train.Server(json.loads(sys.argv[1]), job_name="ps", task_index=0)
print("serving", flush=True)
server.join()
print("joined", flush=True)
"""

# Uses the ps task (a variable there), says so, then waits for its stdin to close.
WORKER = """
import json, sys
import tf_accum.compat.v1 as tf
tf.disable_eager_execution()
spec, task = json.loads(sys.argv[1]), int(sys.argv[2])
server = tf.train.Server(spec, job_name="worker", task_index=task)
with tf.device("/job:ps/task:0"):
    v = tf.Variable(1.0, name="v")
with tf.Session(server.target) as sess:
    sess.run(v.initializer)
    print("connected", flush=True)
    sys.stdin.read()
print("done", flush=True)
"""


class Job:
    """The processes of one job, ended by pid at the end."""

    def __init__(self, cluster: Cluster, workers: int) -> None:
        name = uuid.uuid4().hex[:8]
        self.spec = {
            "ps": [f"ps-{name}:2222"],
            "worker": [f"worker{i}-{name}:2222" for i in range(workers)],
        }
        self.env = cluster.env(TF_ACCUM_JOB=f"join-{name}")
        self.started: list[subprocess.Popen[str]] = []

    def start(self, code: str, *args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(self.spec), *args],
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.started.append(process)
        return process

    def ps(self) -> subprocess.Popen[str]:
        process = self.start(PS)
        wait_for_line(process, "serving")
        return process

    def worker(self, task: int) -> subprocess.Popen[str]:
        process = self.start(WORKER, str(task))
        wait_for_line(process, "connected")
        return process

    def end_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=PROCESS_WAIT)


def wait_for_line(process: subprocess.Popen[str], wanted: str) -> None:
    """Read ``process``'s stdout until the line ``wanted`` (Ray may print others first)."""
    assert process.stdout is not None
    while (line := process.stdout.readline()) and line.strip() != wanted:
        pass
    if line.strip() != wanted:
        _, err = process.communicate(timeout=PROCESS_WAIT)
        raise AssertionError(f"no line {wanted!r}; status {process.returncode}:\n{err[-3000:]}")


def finish(worker: subprocess.Popen[str]) -> None:
    """Let a worker end (its stdin closes) and wait until it has: quietly."""
    out, err = worker.communicate("", timeout=PROCESS_WAIT)
    assert worker.returncode == 0 and out.strip().endswith("done"), err[-3000:]
    assert not RAY_LOG_LINE.search(err), err[-3000:]


def still_running(process: subprocess.Popen[str]) -> bool:
    try:
        process.wait(STILL_RUNNING)
    except subprocess.TimeoutExpired:
        return True
    return False


def joined(ps: subprocess.Popen[str]) -> tuple[float, str]:
    """Seconds until the ps process exited, and its stderr; it must have printed "joined"."""
    start = time.monotonic()
    out, err = ps.communicate(timeout=END_BOUND)
    seconds = time.monotonic() - start
    assert ps.returncode == 0 and out.strip().endswith("joined"), err[-3000:]
    return seconds, err


@pytest.fixture
def job(ray_cluster: Cluster) -> Iterator[Callable[[int], Job]]:
    made: list[Job] = []

    def make(workers: int) -> Job:
        made.append(Job(ray_cluster, workers))
        return made[-1]

    yield make
    for each in made:
        each.end_all()


def test_join_returns_once_every_worker_has_used_the_ps_task_and_ended(
    job: Callable[[int], Job],
) -> None:
    j = job(2)
    ps = j.ps()
    first = j.worker(0)
    finish(first)
    # worker 1 has not used the ps task yet: the job is not over
    assert still_running(ps)
    second = j.worker(1)
    finish(second)
    seconds, err = joined(ps)
    assert seconds < END_BOUND
    lines = [line for line in err.splitlines() if "join() returns" in line]
    assert lines == [
        "INFO tf_accum: tf.train.Server of task /job:ps/task:0: join() returns: the job is "
        "over for this task: every task of the job that is not a ps task (/job:worker/task:0, "
        "/job:worker/task:1) has used it, and all of their processes have ended"
    ], err[-3000:]
    assert not RAY_LOG_LINE.search(err), err[-3000:]


def test_a_worker_that_restarts_before_the_others_end_keeps_the_job_going(
    job: Callable[[int], Job],
) -> None:
    j = job(2)
    ps = j.ps()
    zero, one = j.worker(0), j.worker(1)
    finish(one)  # worker 1 ends...
    assert still_running(ps)
    again = j.worker(1)  # ...and comes back while worker 0 runs
    finish(zero)
    assert still_running(ps)  # the new worker 1 lives
    finish(again)
    seconds, _ = joined(ps)
    assert seconds < END_BOUND


def test_a_killed_worker_counts_as_ended(job: Callable[[int], Job]) -> None:
    j = job(1)
    ps = j.ps()
    worker = j.worker(0)
    worker.kill()
    worker.communicate(timeout=PROCESS_WAIT)
    seconds, _ = joined(ps)
    assert seconds < END_BOUND


@pytest.mark.parametrize("role", ["ps", "worker"])
def test_sigterm_ends_a_joined_job_process_at_once_and_quietly(
    job: Callable[[int], Job], role: str
) -> None:
    j = job(1)
    ps = j.ps()
    worker = j.worker(0)
    process = ps if role == "ps" else worker
    time.sleep(0.5)  # in join(), or in the worker's session
    process.send_signal(signal.SIGTERM)
    start = time.monotonic()
    _, err = process.communicate(timeout=STOP_BOUND)
    assert time.monotonic() - start < STOP_BOUND
    assert process.returncode == -signal.SIGTERM, err[-3000:]
    assert "SIGTERM" not in err and "Traceback" not in err, err[-3000:]
    assert not RAY_WARNING.search(err), err[-3000:]
    if role == "worker":  # the only worker ended: the ps task's job is over
        joined(ps)
