"""A TF1 synchronous-replicas trainer, one process per worker task:
``python -m tests.distributed.sync_replicas_roles worker JSON``.

Written as the public parameter-server programs are: the graph under
``replica_device_setter``, a ``SyncReplicasOptimizer`` and its hook, a
non-chief that waits for the chief's initialisation, and a loop that trains
until the global step reaches the last step. Every replica trains on the same
batch, so whichever replicas' gradients make a step, the update is the
gradient at that step's weights (``reference``). Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

import tf_accum.compat.v1 as tf
from tf_accum import errors

LEARNING_RATE = 0.1
X = np.array([[1.0, 0.5, -1.0], [0.0, 2.0, 1.0], [-1.0, 1.0, 0.5], [0.5, 0.0, 1.5]], np.float32)
Y = np.array([1.0, -0.5, 2.0, 0.25], np.float32)
IDS = np.array([0, 2, 3, 5], np.int64)
START_W = np.array([[0.25], [-0.5], [0.75]], np.float32)
START_EMB = np.arange(12, dtype=np.float32).reshape(6, 2) / 8


def model(spec: Any, task: int, replicas: int) -> dict[str, Any]:
    graph = tf.Graph()
    device = tf.train.replica_device_setter(cluster=spec, worker_device=f"/job:worker/task:{task}")
    with graph.as_default(), tf.device(device):
        global_step = tf.train.get_or_create_global_step()
        w = tf.Variable(START_W, name="w")
        emb = tf.Variable(START_EMB, name="emb")
        looked_up = tf.reduce_sum(tf.nn.embedding_lookup(emb, IDS), axis=1)
        loss = tf.reduce_mean(tf.square(tf.reshape(tf.matmul(X, w), [-1]) + looked_up - Y))
        opt = tf.train.SyncReplicasOptimizer(
            tf.train.GradientDescentOptimizer(LEARNING_RATE), replicas_to_aggregate=replicas
        )
        train_op = opt.minimize(loss, global_step=global_step)
        hook = opt.make_session_run_hook(is_chief=task == 0, num_tokens=0)
        hook.begin()
        init = tf.global_variables_initializer()
        local_init = tf.local_variables_initializer()
    return {
        "graph": graph,
        "global_step": global_step,
        "w": w,
        "emb": emb,
        "loss": loss,
        "train_op": train_op,
        "hook": hook,
        "init": init,
        "local_init": local_init,
        "ready": opt.ready_for_local_init_op,
    }


def train(m: dict[str, Any], sess: Any, steps: int, run_ms: int, budget: float = 120.0) -> int:
    """Run the training op until the global step reaches ``steps``; returns the runs made.

    A run that ends at its deadline is made again (the other replicas may not
    have started yet; its gradient went in, and another one at the same step
    is as good), for at most ``budget`` seconds in all.
    """
    options = tf.RunOptions(timeout_in_ms=run_ms)
    give_up = time.monotonic() + budget
    runs = 0
    while sess.run(m["global_step"]) < steps:
        if time.monotonic() > give_up:
            raise TimeoutError(f"the job did not reach step {steps} in {budget} s")
        try:
            sess.run(m["train_op"], options=options)
            runs += 1
        except errors.DeadlineExceededError:
            pass
    return runs


def worker(spec: Any, task: int, replicas: int, steps: int, run_ms: int) -> dict[str, Any]:
    """A non-chief replica: wait for the chief's initialisation, then train."""
    server = tf.train.Server(spec, job_name="worker", task_index=task)
    m = model(spec, task, replicas)
    sess = tf.Session(server.target, graph=m["graph"])
    give_up = time.monotonic() + 60
    while len(sess.run(m["ready"])):
        if time.monotonic() > give_up:
            raise TimeoutError("the chief never initialised the variables")
        time.sleep(0.05)
    sess.run(m["local_init"])
    m["hook"].after_create_session(sess, None)
    runs = train(m, sess, steps, run_ms)
    w, emb = sess.run([m["w"], m["emb"]])
    sess.close()
    return {"runs": runs, "w": w.tolist(), "emb": emb.tolist()}


def reference(steps: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The weights after ``steps`` gradient steps on the batch, in numpy."""
    w, emb = START_W[:, 0].astype(np.float64), START_EMB.astype(np.float64)
    for _ in range(steps):
        residual = 2 * (X @ w + emb[IDS].sum(axis=1) - Y) / len(Y)
        w = w - LEARNING_RATE * (X.T @ residual)
        emb = emb.copy()
        emb[IDS] -= LEARNING_RATE * residual[:, None]
    return w[:, None], emb


ROLES = {"worker": worker}

if __name__ == "__main__":
    outcome = ROLES[sys.argv[1]](**json.loads(sys.argv[2]))
    print(json.dumps(outcome), flush=True)
