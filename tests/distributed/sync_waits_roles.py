"""Replicas of a synchronous job that stop in the ways that hang TF1 jobs, one process
per worker task: ``python -m tests.distributed.sync_waits_roles ROLE JSON``.

The model is ``sync_replicas_roles.model``'s. Each role prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import tf_accum.compat.v1 as tf
from tests.distributed.sync_replicas_roles import model

GIVE_UP = 60.0  # seconds; reached only when something is broken


def leave_waiting(spec: Any, replicas: int) -> dict[str, Any]:
    """The chief: initialise, start the chief's queue runner (its take then waits on
    the ps task for gradients nobody sends), and leave without stopping anything."""
    server = tf.train.Server(spec, job_name="worker", task_index=0)
    m = model(spec, 0, replicas)
    sess = tf.Session(server.target, graph=m["graph"])
    sess.run([m["init"], m["local_init"]])
    m["hook"].after_create_session(sess, tf.train.Coordinator())
    give_up = time.monotonic() + GIVE_UP
    while server.runtime.counts("ps", 0)["waiting"] < 1:
        if time.monotonic() > give_up:
            raise TimeoutError("the chief's take never waited")
        time.sleep(0.05)
    return {"waiting": server.runtime.counts("ps", 0)["waiting"], "left_at": time.time()}


def one_step(spec: Any, task: int, replicas: int) -> dict[str, Any]:
    """A non-chief that trains one step (it receives the token of the next) and ends,
    as a worker that runs out of data or dies does."""
    server = tf.train.Server(spec, job_name="worker", task_index=task)
    m = model(spec, task, replicas)
    sess = tf.Session(server.target, graph=m["graph"])
    give_up = time.monotonic() + GIVE_UP
    while len(sess.run(m["ready"])):
        if time.monotonic() > give_up:
            raise TimeoutError("the chief never initialised the variables")
        time.sleep(0.05)
    sess.run(m["local_init"])
    m["hook"].after_create_session(sess, None)
    sess.run(m["train_op"], options=tf.RunOptions(timeout_in_ms=int(GIVE_UP * 1000)))
    return {"step": int(sess.run(m["global_step"]))}


ROLES: dict[str, Callable[..., dict[str, Any]]] = {
    "leave_waiting": leave_waiting,
    "one_step": one_step,
}

if __name__ == "__main__":
    outcome = ROLES[sys.argv[1]](**json.loads(sys.argv[2]))
    print(json.dumps(outcome), flush=True)
