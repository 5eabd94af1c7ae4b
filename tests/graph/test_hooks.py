"""The hooks of tf.train, run in monitored sessions, as TensorFlow's.

The expected values were recorded by running the same program on
TensorFlow 2.21 (``tensorflow.compat.v1``).
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import tf_accum.compat.v1 as tf


def events_in(logdir: Path) -> list[list[Any]]:
    """The summaries ([step, tags]) and session logs ([step, status]) of ``logdir``'s event files."""
    from tensorboard.compat.proto import event_pb2

    found: list[list[Any]] = []
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        data, position = path.read_bytes(), 0
        while position < len(data):
            (length,) = struct.unpack_from("<Q", data, position)
            event = event_pb2.Event.FromString(data[position + 12 : position + 12 + length])
            position += 16 + length
            if event.HasField("summary"):
                found.append([event.step, [v.tag for v in event.summary.value]])
            elif event.HasField("graph_def"):
                found.append([event.step, ["__run_graph__"]])  # as TensorBoard's loader shows it
            elif event.HasField("session_log"):
                found.append([event.step, event.session_log.status])
    return found


def test_second_or_step_timer_as_tensorflow() -> None:
    timer = tf.train.SecondOrStepTimer(every_steps=3)
    seen = []
    for step in [0, 0, 1, 2, 3, 3, 5, 6, 7]:
        due = timer.should_trigger_for_step(step)
        update = None
        if due:
            elapsed_secs, elapsed_steps = timer.update_last_triggered_step(step)
            update = [elapsed_secs is not None, elapsed_steps]
        seen.append([step, due, update, timer.last_triggered_step()])
    assert seen == [
        [0, True, [False, None], 0],
        [0, False, None, 0],
        [1, False, None, 0],
        [2, False, None, 0],
        [3, True, [True, 3], 3],
        [3, False, None, 3],
        [5, False, None, 3],
        [6, True, [True, 3], 6],
        [7, False, None, 6],
    ]
    with pytest.raises(ValueError, match="Either every_secs or every_steps should be provided."):
        tf.train.SecondOrStepTimer()
    with pytest.raises(ValueError, match="Can not provide both every_secs and every_steps."):
        tf.train.SecondOrStepTimer(every_secs=1, every_steps=1)


class Listener(tf.train.CheckpointSaverListener):
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def begin(self) -> None:
        self.events.append("begin")

    def before_save(self, session: Any, global_step_value: Any) -> None:
        self.events.append(f"before{global_step_value}")

    def after_save(self, session: Any, global_step_value: Any) -> bool:
        self.events.append(f"after{global_step_value}")
        return bool(global_step_value >= 4)  # asks the loop to stop

    def end(self, session: Any, global_step_value: Any) -> None:
        self.events.append(f"end{global_step_value}")


def test_checkpoint_summary_and_step_counter_hooks_as_tensorflow(
    graph: Any, tmp_path: Path
) -> None:
    pytest.importorskip("tensorboard")
    step = tf.train.get_or_create_global_step()
    inc = tf.assign_add(step, 1)
    x = tf.Variable(1.0)
    summary = tf.summary.scalar("x", x)
    events: list[str] = []
    hooks = [
        tf.train.CheckpointSaverHook(
            str(tmp_path / "ck"), save_steps=2, listeners=[Listener(events)]
        ),
        tf.train.SummarySaverHook(
            save_steps=3, output_dir=str(tmp_path / "sm"), summary_op=summary
        ),
        tf.train.StepCounterHook(every_n_steps=2, output_dir=str(tmp_path / "sc")),
    ]
    runs = 0
    with tf.train.SingularMonitoredSession(hooks=hooks) as sess:
        while not sess.should_stop() and runs < 10:
            sess.run(inc)
            runs += 1
        with pytest.raises(RuntimeError, match="Run called even after should_stop requested."):
            sess.run(inc)
    assert runs == 4  # the listener stopped the loop after the save at step 4
    assert events == ["begin", "before0", "after0", "before2", "after2"] + [
        "before4",
        "after4",
        "end4",
    ]
    indexes = sorted(p.name for p in (tmp_path / "ck").glob("model.ckpt-*.index"))
    assert indexes == ["model.ckpt-0.index", "model.ckpt-2.index", "model.ckpt-4.index"]
    # status 1 is SessionLog.START
    assert events_in(tmp_path / "sm") == [[0, ["__run_graph__"]], [1, 1], [1, ["x"]], [4, ["x"]]]
    assert events_in(tmp_path / "sc") == [[0, ["__run_graph__"]], [3, ["global_step/sec"]]]


def test_step_counter_warns_five_times_when_the_step_does_not_move(graph: Any, caplog: Any) -> None:
    tf.train.get_or_create_global_step()
    c = tf.constant(1)
    with (
        caplog.at_level(logging.INFO, logger="tf_accum"),
        tf.train.MonitoredSession(hooks=[tf.train.StepCounterHook(every_n_steps=2)]) as sess,
    ):
        for _ in range(8):
            sess.run(c)
    warnings = [
        r.getMessage() for r in caplog.records if "has not been increased" in r.getMessage()
    ]
    assert len(warnings) == 5
    assert warnings[0] == (
        "It seems that global step (tf.train.get_global_step) has not been increased. "
        "Current value (could be stable): 0 vs previous value: 0. You could increase the "
        "global step by passing tf.train.get_global_step() to Optimizer.apply_gradients or "
        "Optimizer.minimize."
    )


def test_global_step_waiter_hook_waits_for_the_step(graph: Any) -> None:
    step = tf.train.get_or_create_global_step()
    inc = tf.assign_add(step, 1)
    with tf.train.MonitoredSession(hooks=[tf.train.GlobalStepWaiterHook(0)]) as sess:
        assert sess.run(inc) == 1
    c = tf.constant(5)
    sess = tf.train.SingularMonitoredSession(hooks=[tf.train.GlobalStepWaiterHook(3)])
    raw = sess.raw_session()

    def others_steps() -> None:
        for _ in range(3):
            time.sleep(0.05)
            raw.run(inc)

    helper = threading.Thread(target=others_steps, daemon=True)
    helper.start()
    assert sess.run(c) == 5  # once another has taken the step to 3
    assert raw.run(step) == 3
    helper.join(5)
    sess.close()
    with (
        pytest.raises(RuntimeError, match="Global step should be created"),
        tf.Graph().as_default(),
    ):
        tf.train.MonitoredSession(hooks=[tf.train.GlobalStepWaiterHook(1)])
