"""Training loops with monitored sessions, hooks and a Supervisor: the same program for
TensorFlow and tf_accum.

``python -m tests.graph.tensorflow_monitored`` runs ``record`` with TensorFlow
2.21 and prints what it saw as one JSON line;
tests/graph/data/tensorflow_monitored.json is what it printed, kept for the
runs without TensorFlow. tests/graph/test_monitored_session.py runs ``record``
with tf_accum and compares.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


class Lines(logging.Handler):
    """Keeps the messages logged."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


def _regression(tf: Any) -> tuple[Any, Any, Any, Any, Any]:
    g = tf.Graph()
    with g.as_default():
        step = tf.train.get_or_create_global_step()
        x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        y = tf.constant([[1.0], [2.0]])
        w = tf.Variable([[0.1], [0.2]], name="w")
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
        tf.summary.scalar("loss", loss)
        train = tf.train.AdamOptimizer(0.05).minimize(loss, global_step=step)
    return g, step, w, loss, train


def training(tf: Any, folder: Path, lines: Lines) -> dict[str, Any]:
    """MonitoredTrainingSession with hooks, then a restart from its checkpoints."""
    g, step, w, loss, train = _regression(tf)
    calls: list[str] = []

    class Recorder(tf.train.SessionRunHook):  # type: ignore[misc]
        def __init__(self, name: str) -> None:
            self.name = name

        def begin(self) -> None:
            calls.append(f"{self.name}.begin")

        def after_create_session(self, session: Any, coord: Any) -> None:
            calls.append(f"{self.name}.create")

        def before_run(self, run_context: Any) -> Any:
            calls.append(f"{self.name}.before")
            return tf.train.SessionRunArgs({"loss": loss})

        def after_run(self, run_context: Any, run_values: Any) -> None:
            calls.append(f"{self.name}.after:{run_values.results['loss']:.5f}")

        def end(self, session: Any) -> None:
            calls.append(f"{self.name}.end")

    losses = []
    with g.as_default():
        hooks = [
            tf.train.StopAtStepHook(last_step=6),
            tf.train.NanTensorHook(loss),
            tf.train.LoggingTensorHook({"loss": loss}, every_n_iter=2),
            Recorder("a"),
        ]
        with tf.train.MonitoredTrainingSession(
            checkpoint_dir=str(folder),
            hooks=hooks,
            chief_only_hooks=[Recorder("c")],
            save_summaries_steps=2,
            save_checkpoint_steps=4,
        ) as sess:
            while not sess.should_stop():
                _, value = sess.run([train, loss])
                losses.append(round(float(value), 6))
    logged = [line.split(" (")[0] for line in lines.lines if " = " in line]
    first = {
        "losses": losses,
        "calls": calls,
        "logged": logged,
        "checkpoints": sorted(p.name for p in folder.glob("model.ckpt-*.index")),
    }
    g, step, w, loss, train = _regression(tf)
    with g.as_default():
        with tf.train.MonitoredTrainingSession(
            checkpoint_dir=str(folder), hooks=[tf.train.StopAtStepHook(num_steps=3)]
        ) as sess:
            first["resumed_at"] = int(sess.run(step))
            while not sess.should_stop():
                _, weights = sess.run([train, w])
        first["weights"] = [round(float(v), 6) for v in weights.ravel()]
        first["final_step"] = int(tf.train.load_variable(str(folder), "global_step"))
    return first


def supervisor(tf: Any, folder: Path) -> dict[str, Any]:
    """A Supervisor's chief: checkpoints by its thread, then a restart."""

    def build() -> tuple[Any, Any, Any, Any, Any]:
        g = tf.Graph()
        with g.as_default():
            step = tf.train.get_or_create_global_step()
            w = tf.Variable([1.0, -2.0], name="w")
            loss = tf.reduce_sum(w * w)
            train = tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss, global_step=step)
        return g, step, w, loss, train

    def latest_is(name: str) -> bool:
        state = folder / "checkpoint"
        return state.exists() and state.read_text().splitlines()[0].endswith(f'/{name}"')

    def wait_for(name: str) -> None:
        deadline = time.monotonic() + 30
        while not latest_is(name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no checkpoint {name}")
            time.sleep(0.01)

    g, step, w, loss, train = build()
    with g.as_default():
        sv = tf.train.Supervisor(graph=g, logdir=str(folder), save_model_secs=0.2)
    losses = []
    with g.as_default(), sv.managed_session() as sess:
        wait_for("model.ckpt-0")
        for _ in range(4):
            _, value = sess.run([train, loss])
            losses.append(round(float(value), 6))
        wait_for("model.ckpt-4")
    g, step, w, loss, train = build()
    with g.as_default():
        sv = tf.train.Supervisor(graph=g, logdir=str(folder), save_model_secs=0)
    with g.as_default(), sv.managed_session() as sess:
        restored = [int(sess.run(step)), [round(float(v), 6) for v in sess.run(w)]]
    return {"losses": losses, "restored": restored}


def record(tf: Any, logger_name: str) -> dict[str, Any]:
    """What the programs give with ``tf`` (a ``tensorflow.compat.v1`` module)."""
    lines = Lines()
    logger = logging.getLogger(logger_name)
    logger.addHandler(lines)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with tempfile.TemporaryDirectory() as folder:
            base = Path(folder)
            return {
                "training": training(tf, base / "training", lines),
                "supervisor": supervisor(tf, base / "supervisor"),
            }
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow.compat.v1 as tensorflow

    tensorflow.disable_eager_execution()
    print(json.dumps(record(tensorflow, "tensorflow")), flush=True)
    sys.exit(0)
