"""Tasks of a TF1 cluster, one process each: ``python -m tests.distributed.tf1_roles ROLE JSON``.

Each process joins the Ray cluster through TF_ACCUM_RAY_ADDRESS, builds the
same graph (``model``) under ``replica_device_setter``, starts its own
``tf.train.Server`` and runs sessions on its target, as a TF1 program does;
it prints one JSON line with its outcome and exits (a ps task, or a worker
that holds its task, never exits).
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

import tf_accum.compat.v1 as tf
from tf_accum import errors

FAR_AHEAD = 2**40  # a local step no take's bump ever makes stale
AFTER_DISCONNECT = 5.0  # seconds a thread still runs after Ray disconnected at exit


@dataclass
class Model:
    graph: Any
    step: Any
    total: Any
    accumulator: Any
    grad: Any
    apply: Any
    num_required: Any
    take: Any
    update: Any
    count: Any
    init: Any


def model(cluster: Any) -> Model:
    """The program's graph: state on the ps tasks, the rest on the worker."""
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(cluster=cluster)):
        step = tf.train.get_or_create_global_step()
        total = tf.Variable(np.zeros(2, np.int64), name="total")
        accumulator = tf.ConditionalAccumulator(
            tf.int64, shape=[2], shared_name="grads", reduction_type="SUM"
        )
        grad = tf.placeholder(tf.int64, [2], name="grad")
        apply = accumulator.apply_grad(grad, local_step=FAR_AHEAD)
        num_required = tf.placeholder(tf.int32, [], name="num_required")
        take = accumulator.take_grad(num_required)
        update = total.assign_add(take)
        count = accumulator.num_accumulated()
        init = tf.global_variables_initializer()
    return Model(g, step, total, accumulator, grad, apply, num_required, take, update, count, init)


def session(cluster: Any, job: str, task: int) -> tuple[Model, Any]:
    server = tf.train.Server(cluster, job_name=job, task_index=task)
    m = model(cluster)
    return m, tf.Session(server.target, graph=m.graph)


def ps(spec: Any, task: int) -> dict[str, Any]:
    """A ps task: its Server, then join() (it is killed at the end); a refused Server's
    error is the outcome."""
    try:
        server = tf.train.Server(spec, job_name="ps", task_index=task)
    except errors.OpError as error:
        return {"error": type(error).__name__, "message": error.message}
    server.join()
    return {}


def train(spec: Any, task: int, steps: int, notice: float = 0.0) -> dict[str, Any]:
    """A chief's whole run: initialise, then ``steps`` steps of an apply at the global
    step, a take and the step's increment; what it found at the start and the end.

    A stale accumulator (one whose step outlived an earlier run) drops the applies:
    the take then times out, and the error is the outcome. ``notice``: seconds
    between the log lines of a wait for a ps task (0: the default).
    """
    if notice:
        from tf_accum.graph import cluster_job

        cluster_job.WAIT_NOTICE = notice
    m, sess = session(spec, "worker", task)
    with m.graph.as_default():
        local_step = tf.placeholder(tf.int64, [], name="local_step")
        apply = m.accumulator.apply_grad(m.grad, local_step=local_step)
        bump = m.step.assign_add(1)
    bound = tf.RunOptions(timeout_in_ms=20_000)
    sess.run(m.init, options=tf.RunOptions(timeout_in_ms=120_000))  # waits for the ps task
    start = {"step": int(sess.run(m.step)), "count": int(sess.run(m.count))}
    try:
        for _ in range(steps):
            step = int(sess.run(m.step))
            sess.run(apply, {m.grad: [step, 1], local_step: step})
            sess.run(m.update, {m.num_required: 1}, options=bound)
            sess.run(bump)
    except errors.OpError as error:
        return {"start": start, "error": type(error).__name__, "message": error.message}
    total, step = sess.run([m.total, m.step])
    return {"start": start, "total": total.tolist(), "step": int(step)}


def hold(spec: Any, task: int) -> dict[str, Any]:
    """A worker that reaches its ps task, says so, and stays (it is killed at the end)."""
    m, sess = session(spec, "worker", task)
    sess.run(m.count)
    threading.Event().wait()
    return {}


def worker(spec: Any, task: int, first: int, count: int) -> dict[str, Any]:
    """Apply gradients [v, 1] for v in first .. first+count-1, one run each."""
    m, sess = session(spec, "worker", task)
    for v in range(first, first + count):
        sess.run(m.apply, {m.grad: [v, 1]})
    return {"applied": count}


def read(spec: Any, task: int) -> dict[str, Any]:
    """Read the variable and the global step the chief set."""
    m, sess = session(spec, "worker", task)
    total, step = sess.run([m.total, m.step])
    return {"total": total.tolist(), "step": int(step)}


def take(spec: Any, task: int, num_required: int, timeout_ms: int = 0) -> dict[str, Any]:
    """One take (bounded by ``timeout_ms`` when given); its value or its error."""
    m, sess = session(spec, "worker", task)
    options = tf.RunOptions(timeout_in_ms=timeout_ms) if timeout_ms else None
    try:
        value = sess.run(m.take, {m.num_required: num_required}, options=options)
    except errors.OpError as error:
        return {"error": type(error).__name__, "message": error.message}
    return {"value": value.tolist(), "count": int(sess.run(m.count))}


def end_while_taking(spec: Any, task: int) -> dict[str, Any]:
    """Leave a take waiting in a daemon thread and return, as a SyncReplicasOptimizer
    chief's program ends while its queue runner waits for gradients. The exit gives
    the thread a few seconds after Ray disconnected (an ``atexit`` hook registered
    before Ray's, so run after it), as a slow exit would; any attach to Ray in that
    time is written to stderr as a line starting "late attach" and refused."""
    import atexit

    threads: list[threading.Thread] = []
    atexit.register(lambda: [thread.join(AFTER_DISCONNECT) for thread in threads])
    import ray

    server = tf.train.Server(spec, job_name="worker", task_index=task)
    m = model(spec)
    sess = tf.Session(server.target, graph=m.graph)

    def refuse_attach(*_args: Any, **_kwargs: Any) -> None:
        sys.stderr.write(f"late attach from thread {threading.current_thread().name}\n")
        sys.stderr.flush()
        raise RuntimeError("a Ray call after the exit began")

    threads.append(
        threading.Thread(
            target=sess.run, args=(m.take, {m.num_required: 5}), name="taker", daemon=True
        )
    )
    threads[0].start()
    while server.runtime.counts("ps", 0)["waiting"] < 1:
        threading.Event().wait(0.05)
    setattr(ray, "init", refuse_attach)  # noqa: B010 - a stand-in of another signature
    return {"waiting": True}


ROLES = {f.__name__: f for f in (ps, worker, read, take, train, hold, end_while_taking)}

if __name__ == "__main__":
    outcome = ROLES[sys.argv[1]](**json.loads(sys.argv[2]))
    print(json.dumps(outcome), flush=True)
