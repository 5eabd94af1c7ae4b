"""Tasks of a TF1 cluster training with MonitoredTrainingSession or Supervisor, one process each:
``python -m tests.distributed.monitored_roles ROLE JSON``.

Each process builds the same small model under ``replica_device_setter``
(the global step and the weights on the ps task), trains on its own
server's target until the shared global step reaches ``last_step``, and
prints one JSON line: the steps it ran, the global step it saw last, and
the messages its session manager logged while waiting for the chief.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import numpy as np

import tf_accum.compat.v1 as tf
from tf_accum.graph import monitored_session

RECOVERY_WAIT_SECS = 0.5


class Waits(logging.Handler):
    """Keeps the messages about waiting for the model."""

    def __init__(self, marker: str | None) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []
        self.marker = marker

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "Waiting for model" in message:
            self.messages.append(message)
            if self.marker:
                with open(self.marker, "a") as marker:  # tells the test this task waits
                    marker.write(message + "\n")


def model(spec: Any) -> tuple[Any, Any, Any, Any]:
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(cluster=spec)):
        step = tf.train.get_or_create_global_step()
        w = tf.Variable(np.array([1.0, -2.0], np.float32), name="w")
        loss = tf.reduce_sum(w * w)
        train = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
    return g, step, w, train


def _start(spec: Any, task: int, marker: str | None) -> tuple[Any, Waits]:
    tf.disable_eager_execution()
    waits = Waits(marker)
    logger = logging.getLogger("tf_accum")
    logger.addHandler(waits)
    logger.setLevel(logging.INFO)
    return tf.train.Server(spec, job_name="worker", task_index=task), waits


def mts(
    spec: Any,
    task: int,
    last_step: int,
    checkpoint_dir: str | None = None,
    marker: str | None = None,
) -> dict[str, Any]:
    """Train with MonitoredTrainingSession (task 0 is the chief) until ``last_step``."""
    monitored_session.WORKER_RECOVERY_WAIT_SECS = RECOVERY_WAIT_SECS
    server, waits = _start(spec, task, marker)
    g, step, w, train = model(spec)
    ran, seen = 0, -1
    with (
        g.as_default(),
        tf.train.MonitoredTrainingSession(
            master=server.target,
            is_chief=task == 0,
            checkpoint_dir=checkpoint_dir,
            hooks=[tf.train.StopAtStepHook(last_step=last_step)],
            save_checkpoint_steps=5,
            max_wait_secs=120,
        ) as sess,
    ):
        while not sess.should_stop():
            _, seen = sess.run([train, step])
            ran += 1
    return {"ran": ran, "step": int(seen), "waits": waits.messages}


def supervised(spec: Any, task: int, last_step: int, marker: str | None = None) -> dict[str, Any]:
    """Train with a Supervisor (task 0 is the chief) until ``last_step``."""
    server, waits = _start(spec, task, marker)
    g, step, w, train = model(spec)
    with g.as_default():
        sv = tf.train.Supervisor(
            graph=g, is_chief=task == 0, recovery_wait_secs=RECOVERY_WAIT_SECS, global_step=step
        )
    ran, seen = 0, 0
    with g.as_default(), sv.managed_session(server.target) as sess:
        while not sv.should_stop() and seen < last_step:
            _, seen = sess.run([train, step])
            ran += 1
    return {"ran": ran, "step": int(seen), "waits": waits.messages}


ROLES = {f.__name__: f for f in (mts, supervised)}

if __name__ == "__main__":
    outcome = ROLES[sys.argv[1]](**json.loads(sys.argv[2]))
    print(json.dumps(outcome), flush=True)
