"""The synchronous-replicas job as a TF1 cluster (``--tf1-cluster``): one process per task.

The program TF1's between-graph replication made, written with
``tf_accum.compat.v1`` only:

- a ``ClusterSpec`` of one ps task and workers 0..W (task 0 is the chief,
  this process; tasks 1..W compute gradients), every process with its own
  ``tf.train.Server`` and the same graph, built under
  ``replica_device_setter``: the weights, the global step and the gradient
  accumulator on the ps task;
- each worker waits for a token (TF1's SyncReplicasOptimizer used a token
  queue; here an accumulator per worker, on the ps task), reads the weights
  and the step, computes a gradient in numpy and applies it;
- the chief takes ``replicas_to_aggregate`` gradients, updates the weights and
  the step and hands every worker its next token, all in one ``Session.run``
  (one request to the ps task).

The ps process only joins its server; the state lives in its task's host
actor on Ray, which ends with the ps process. This process starts (or joins, with ``--address``) the Ray
cluster and every other process, and ends each one by pid on every path.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np

from tf_accum import errors
from tf_accum.examples.models import MODELS, Model, simulate_compute
from tf_accum.examples.records import RunResult, StepRecord

if TYPE_CHECKING:
    from tf_accum.examples.config import JobConfig
    from tf_accum.examples.progress import Progress

SHARED_NAME = "gradients"
TOKEN_STEP = 2**40
EXIT_WAIT = 30.0  # seconds for a worker to see the last step and exit


def cluster_spec(workers: int) -> dict[str, list[str]]:
    """One ps task and ``workers`` + 1 worker tasks (task 0: the chief), named for this run."""
    tag = uuid.uuid4().hex[:8]
    return {
        "ps": [f"ps0-{tag}:2222"],
        "worker": [f"worker{i}-{tag}:2222" for i in range(workers + 1)],
    }


class Graph:
    """The program's graph; every task builds the same one."""

    def __init__(self, tf: Any, model: Model, spec: Any, workers: int, required: int) -> None:
        initial = model.initial_params()
        self.graph = tf.Graph()
        with self.graph.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
            self.weights = tf.Variable(initial, name="weights")
            self.step = tf.train.get_or_create_global_step()
            with tf.device("/job:ps/task:0"):  # the sparse constructor is not a ps op type
                accumulator = model.make_accumulator(shared_name=SHARED_NAME)
                tokens = [
                    tf.ConditionalAccumulator(tf.float32, shape=[], shared_name=f"token{i}")
                    for i in range(workers)
                ]
            self.local_step = tf.placeholder(tf.int64, shape=[], name="local_step")
            if model.name == "dense":
                gradient = tf.placeholder(tf.float32, shape=[initial.size + 1], name="gradient")
                self.apply = accumulator.apply_grad(gradient, local_step=self.local_step)
                self.gradient: tuple[Any, ...] = (gradient,)
            else:
                indices = tf.placeholder(tf.int64, shape=[None], name="indices")
                values = tf.placeholder(tf.float32, shape=[None, initial.shape[1]], name="values")
                self.apply = accumulator.apply_grad(indices, values, local_step=self.local_step)
                self.gradient = (indices, values)
            # every gradient a worker sends, counted in the same run (one request
            # to the ps task): sent = taken + dropped as stale + waiting
            self.sent = tf.Variable(np.int64(0), name="gradients_sent")
            self.count_sent = self.sent.assign_add(1)
            self.waiting = accumulator.num_accumulated()
            self.take = accumulator.take_grad(required)
            self.new_weights = tf.placeholder(tf.float32, shape=initial.shape, name="new_weights")
            one = np.float32(1)
            # far ahead: a token accumulator's step moves with each take, never stale
            self.give_tokens = tf.group(*[t.apply_grad(one, local_step=TOKEN_STEP) for t in tokens])
            with tf.control_dependencies(
                [self.weights.assign(self.new_weights), self.step.assign_add(1)]
            ):
                # the next step's tokens only once the weights and the step are set
                self.update = tf.group(*[t.apply_grad(one, local_step=TOKEN_STEP) for t in tokens])
            self.token_takes = [t.take_grad(1) for t in tokens]
            self.init = tf.global_variables_initializer()

    def feed(self, gradient: Any, step: int) -> dict[Any, Any]:
        if len(self.gradient) == 1:
            return {self.gradient[0]: gradient, self.local_step: step}
        return {
            self.gradient[0]: gradient.indices,
            self.gradient[1]: gradient.values,
            self.local_step: step,
        }


def _model(settings: dict[str, Any]) -> Model:
    kind = "sparse" if settings["sparse"] else "dense"
    return MODELS[kind](settings["seed"], settings["workers"])


def run_task(settings: dict[str, Any]) -> dict[str, Any]:
    """A ps or worker process's task (``python -m tf_accum.examples.tf1_cluster JSON``)."""
    import tf_accum.compat.v1 as tf

    spec = settings["spec"]
    server = tf.train.Server(spec, job_name=settings["job"], task_index=settings["task"])
    if settings["job"] == "ps":
        server.join()  # returns once every worker has ended
        return {}
    model = _model(settings)
    index = settings["task"] - 1  # worker task 1 is the model's worker 0
    g = Graph(tf, model, spec, settings["workers"], settings["required"])
    applied: dict[int, int] = {}  # local step -> gradients applied with it
    with tf.Session(server.target, graph=g.graph) as sess:
        while True:
            sess.run(g.token_takes[index])  # the chief's go for the next step
            params, step = sess.run([g.weights, g.step])
            step = int(step)
            if step >= settings["steps"]:
                return {"applied": applied}
            gradient = model.gradient(params, index, step)
            simulate_compute(settings["seed"], index, step, settings["compute_ms"])
            sess.run([g.apply, g.count_sent], g.feed(gradient, step))
            applied[step] = applied.get(step, 0) + 1


def run_tf1_cluster(config: JobConfig, progress: Progress) -> RunResult:
    """:func:`tf_accum.examples.sync_replicas.run` for ``config.tf1_cluster``.

    Raises:
        RuntimeError: a task's process failed (its error output is quoted).
        The chief's ``Session.run`` errors.
    """
    from tf_accum.examples import processes

    with processes.cluster(config.address) as address:
        return _chief(config, progress, address)


def _chief(config: JobConfig, progress: Progress, address: str) -> RunResult:
    import tf_accum.compat.v1 as tf

    spec = cluster_spec(config.workers)
    settings = {
        "spec": spec,
        "seed": config.seed,
        "workers": config.workers,
        "sparse": config.sparse,
        "compute_ms": config.compute_ms,
        "steps": config.steps,
        "required": config.replicas_to_aggregate,
    }
    model = _model(settings)
    server = tf.train.Server(spec, job_name="worker", task_index=0)
    g = Graph(tf, model, spec, config.workers, config.replicas_to_aggregate)
    environment = dict(os.environ, TF_ACCUM_RAY_ADDRESS=address)
    tasks = [("ps", 0)] + [("worker", i + 1) for i in range(config.workers)]
    started_tasks: list[subprocess.Popen[str]] = []
    records: list[StepRecord] = []
    initial_loss = model.loss(model.initial_params())
    started = time.perf_counter()
    sess = tf.Session(server.target, graph=g.graph)
    try:
        for job, index in tasks:
            started_tasks.append(_start(dict(settings, job=job, task=index), environment))
        sess.run(g.init)
        sess.run(g.give_tokens)
        options = tf.RunOptions(timeout_in_ms=int(1000 * config.take_timeout))
        accepted = stale = 0
        for _ in range(config.steps):
            before = time.perf_counter()
            try:
                taken = sess.run(g.take, options=options)
            except errors.DeadlineExceededError:
                _raise_failed(started_tasks)
                raise
            waited = time.perf_counter() - before
            total, count = model.unpack(taken)
            params = sess.run(g.weights)
            model.update(params, total, count)
            sess.run(g.update, {g.new_weights: params})  # weights, step and tokens: one request
            accepted += count
            # read together (one request): what was sent and neither taken nor
            # waiting for the next take was dropped as stale
            sent, waiting = sess.run([g.sent, g.waiting])
            dropped = int(sent) - accepted - int(waiting)
            records.append(
                StepRecord(len(records) + 1, model.loss(params), count, dropped - stale, waited)
            )
            stale = dropped
            progress.update(records[-1])
        # what the workers sent after the last read: the summary's "after the last take"
        applied = sum(sum(_outcome(p)["applied"].values()) for p in started_tasks[1:])
    finally:
        progress.close()
        for process in started_tasks:
            _end(process)  # the ps task's state ends with its process
        sess.close()
    return RunResult(
        workers=config.workers,
        replicas_to_aggregate=config.replicas_to_aggregate,
        model_description=model.description + " (TF1 cluster: 1 ps task, one process per task)",
        initial_loss=initial_loss,
        records=records,
        applied=applied,
        seconds=time.perf_counter() - started,
        worker_kind=config.worker_kind,
    )


def _start(settings: dict[str, Any], environment: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tf_accum.examples.tf1_cluster", json.dumps(settings)],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _outcome(process: subprocess.Popen[str]) -> dict[str, Any]:
    try:
        out, err = process.communicate(timeout=EXIT_WAIT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"worker process {process.pid} did not finish") from None
    if process.returncode != 0:
        raise RuntimeError(f"worker process {process.pid} failed:\n{err[-2000:]}")
    found: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return found


def _raise_failed(started: list[subprocess.Popen[str]]) -> None:
    for process in started:
        if process.poll() not in (None, 0):
            _, err = process.communicate()
            raise RuntimeError(f"task process {process.pid} failed:\n{err[-2000:]}")


def _end(process: subprocess.Popen[str]) -> None:
    """SIGKILL by pid if still running (the ps task always is), and reap it."""
    if process.poll() is None:
        process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
        process.communicate(timeout=EXIT_WAIT)


if __name__ == "__main__":
    print(json.dumps(run_task(json.loads(sys.argv[1]))), flush=True)
