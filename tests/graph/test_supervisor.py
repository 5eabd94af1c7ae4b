"""tf.train.Supervisor, as TensorFlow's: the expected values were recorded by
running the same programs on TensorFlow 2.21."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.helpers import wait_until
from tf_accum import errors

ROOT = Path(__file__).resolve().parent.parent.parent


def supervisor(graph: Any = None, **arguments: Any) -> Any:
    """A Supervisor built in graph mode (the tests leave eager execution on for the process)."""
    graph = graph if graph is not None else tf.Graph()
    with graph.as_default():
        return tf.train.Supervisor(graph=graph, **arguments)


def _model() -> tuple[Any, Any, Any, Any, Any]:
    g = tf.Graph()
    with g.as_default():
        step = tf.train.get_or_create_global_step()
        w = tf.Variable([1.0, -2.0], name="w")
        loss = tf.reduce_sum(w * w)
        tf.summary.scalar("loss", loss)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    return g, step, w, loss, train


def test_default_ops_checkpoints_and_restart_as_tensorflow(tmp_path: Path) -> None:
    g, step, w, loss, train = _model()
    sv = supervisor(g, logdir=str(tmp_path), save_model_secs=0.5)
    assert g.finalized
    assert [sv.is_chief, sv.save_model_secs, sv.global_step.name, sv.init_op.name] == [
        True,
        0.5,
        "global_step:0",
        "init",
    ]
    assert sv.ready_op.name == "report_uninitialized_variables/boolean_mask/GatherV2:0"
    assert sv.ready_for_local_init_op is None
    assert sv.summary_op is not None and isinstance(sv.saver, tf.train.Saver)
    assert sv.save_path == str(tmp_path / "model.ckpt")
    assert sv.logdir == str(tmp_path) and sv.recovery_wait_secs == 30
    losses = []
    latest = tmp_path / "checkpoint"
    with g.as_default(), sv.managed_session() as sess:
        # the checkpoint thread saves at once, then every 0.5 s
        wait_until(lambda: latest.exists() and "model.ckpt-0" in latest.read_text(), 10)
        for _ in range(3):
            _, value = sess.run([train, loss])
            losses.append(float(value))
        wait_until(lambda: "model.ckpt-3" in latest.read_text(), 10)
        assert not sv.should_stop()
    assert sv.should_stop()
    assert losses == pytest.approx([5.0, 3.200000286102295, 2.047999858856201], rel=1e-6)
    indexes = sorted(p.name for p in tmp_path.glob("model.ckpt-*.index"))
    assert indexes == ["model.ckpt-0.index", "model.ckpt-3.index"]
    assert list(tmp_path.glob("events.out.tfevents.*"))

    g, step, w, loss, train = _model()
    sv = supervisor(g, logdir=str(tmp_path), save_model_secs=0)
    with g.as_default(), sv.managed_session() as sess:
        assert sess.run(step) == 3
        np.testing.assert_allclose(sess.run(w), [0.5119999647140503, -1.0239999294281006])
        sv.request_stop()
        assert sv.should_stop()


def test_out_of_range_ends_a_managed_session_and_other_errors_are_raised() -> None:
    g = tf.Graph()
    with g.as_default():
        queue = tf.FIFOQueue(3, tf.int32, shapes=[])
        fill = queue.enqueue_many([[1, 2]])
        close = queue.close()
        take = queue.dequeue()
    sv = supervisor(g, logdir=None)
    taken = []
    with g.as_default(), sv.managed_session() as sess:
        sess.run(fill)
        sess.run(close)
        while not sv.should_stop():
            taken.append(int(sess.run(take)))
    assert taken == [1, 2]

    g = tf.Graph()
    sv = supervisor(g)
    with pytest.raises(KeyError, match="boom"), g.as_default(), sv.managed_session():
        raise KeyError("boom")
    worker = supervisor(is_chief=False)
    with pytest.raises(RuntimeError, match="Only chief supervisor can start standard services"):
        worker.start_standard_services(None)


def test_a_worker_supervisor_waits_and_logs_then_gives_up(caplog: Any) -> None:
    g, step, w, loss, train = _model()
    sv = supervisor(g, is_chief=False, recovery_wait_secs=0.1)
    started = time.monotonic()
    with (
        caplog.at_level(logging.INFO, logger="tf_accum"),
        pytest.raises(errors.DeadlineExceededError),
    ):
        sv.prepare_or_wait_for_session(max_wait_secs=0.5)
    assert time.monotonic() - started < 5
    waits = [r.getMessage() for r in caplog.records if "Waiting for model" in r.getMessage()]
    assert waits and "Variables not initialized: global_step, w" in waits[0]


def test_loop_runs_until_stop_and_a_thread_error_is_raised_by_stop() -> None:
    sv = supervisor(stop_grace_secs=5)
    calls: list[int] = []
    sv.loop(0.01, calls.append, args=[1])
    deadline = time.monotonic() + 5
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    sv.stop()
    count = len(calls)
    time.sleep(0.05)
    assert count >= 3 and len(calls) == count

    sv = supervisor(stop_grace_secs=5)

    def fail() -> None:
        raise ValueError("from the thread")

    sv.loop(0.01, fail)
    assert sv.coord.wait_for_stop(5)
    with pytest.raises(ValueError, match="from the thread"):
        sv.stop()


def test_loop_with_no_interval_is_a_looper_thread_calling_back_to_back() -> None:
    # TensorFlow 2.21: Supervisor.loop(None, ...) starts a LooperThread
    sv = supervisor(stop_grace_secs=5)
    calls: list[int] = []
    looper = sv.loop(None, calls.append, args=(3,))
    assert isinstance(looper, tf.train.LooperThread)
    wait_until(lambda: len(calls) > 10)
    sv.stop()
    assert not looper.is_alive() and calls[0] == 3


EXITS = """
import time
import tf_accum.compat.v1 as tf
tf.disable_eager_execution()
g = tf.Graph()
with g.as_default():
    step = tf.train.get_or_create_global_step()
    queue = tf.FIFOQueue(1, tf.int32, shapes=[])
    tf.train.add_queue_runner(tf.train.QueueRunner(queue, [queue.enqueue(1)]))
    take = queue.dequeue()
sv = tf.train.Supervisor(graph=g, logdir={logdir!r}, save_model_secs=0.05, save_summaries_secs=0.05)
sess = sv.prepare_or_wait_for_session()
sess.run(take)
time.sleep(0.3)
print("leaving", flush=True)
"""


def test_exit_does_not_wait_for_the_service_and_queue_threads(tmp_path: Path) -> None:
    code = EXITS.format(logdir=str(tmp_path))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "leaving" in done.stdout
    assert time.monotonic() - started < 120
    assert list(tmp_path.glob("model.ckpt-*.index"))
