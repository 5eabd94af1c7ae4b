"""The hooks TF1 training loops pass to a monitored session (``tf.train.StopAtStepHook`` ...).

Each is a ``SessionRunHook``: it adds fetches to the loop's runs and acts on
their results. The global step a hook fetches is a read made once per graph
(``global_step + 0``, collection ``global_step_read_op_cache``), run in the
same step as the train op, so it may be the value before or after the step's
increment: hooks that act on a step read it again when it matters.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.graph import mode
from tf_accum.graph.global_step import get_global_step
from tf_accum.graph.session_run_hook import SessionRunArgs, SessionRunHook

_log = logging.getLogger("tf_accum")

GLOBAL_STEP_READ_KEY = "global_step_read_op_cache"


def global_step_read(graph: Any = None) -> Any:
    """A tensor reading the graph's global step (made once, kept in a collection), or None."""
    graph = graph or mode.get_default_graph()
    cached = graph.get_collection(GLOBAL_STEP_READ_KEY)
    if cached:
        return cached[0]
    step = get_global_step(graph)
    if step is None:
        return None
    with graph.as_default(), graph.name_scope(None), graph.name_scope(step.op.name + "/"):
        read = step + 0
    graph.add_to_collection(GLOBAL_STEP_READ_KEY, read)
    return read


def _require_global_step(hook: str) -> Any:
    read = global_step_read()
    if read is None:
        raise RuntimeError(f"Global step should be created to use {hook}.")
    return read


def _as_graph_element(obj: Any) -> Any:
    graph = mode.get_default_graph()
    if not isinstance(obj, str):
        if getattr(obj, "graph", None) is not graph:
            raise ValueError(
                f"Passed {obj} should have graph attribute that is equal to current graph {graph}."
            )
        return obj
    if ":" in obj:
        return graph.as_graph_element(obj)
    element = graph.as_graph_element(obj + ":0")
    try:
        graph.as_graph_element(obj + ":1")
    except (KeyError, ValueError):
        return element
    raise ValueError(
        f"Name {obj} is ambiguous, as this `Operation` has multiple outputs (at least 2)."
    )


def _session_log(status: str, checkpoint_path: str = "") -> Any:
    """TensorBoard's ``SessionLog`` message, or None when tensorboard is not installed."""
    try:
        from tensorboard.compat.proto import event_pb2
    except ImportError:
        return None
    message = event_pb2.SessionLog(status=getattr(event_pb2.SessionLog, status))
    if checkpoint_path:
        message.checkpoint_path = checkpoint_path
    return message


def _writer_for(output_dir: Any) -> Any:
    from tf_accum.graph.summary_writer import FileWriterCache

    return FileWriterCache.get(output_dir)


class SecondOrStepTimer:
    """Says when something done every N seconds or every N steps is due.

    Raises:
        ValueError: neither or both of ``every_secs`` and ``every_steps``.
    """

    def __init__(self, every_secs: float | None = None, every_steps: int | None = None) -> None:
        self.reset()
        self._every_secs = every_secs
        self._every_steps = every_steps
        if every_secs is None and every_steps is None:
            raise ValueError("Either every_secs or every_steps should be provided.")
        if every_secs is not None and every_steps is not None:
            raise ValueError("Can not provide both every_secs and every_steps.")

    def reset(self) -> None:
        self._last_step: int | None = None
        self._last_time: float | None = None

    def should_trigger_for_step(self, step: int) -> bool:
        """Whether ``step`` is due: the first step, or enough steps or seconds since the last."""
        if self._last_step is None or self._last_time is None:
            return True
        if self._last_step == step:
            return False
        if self._every_secs is not None and time.time() >= self._last_time + self._every_secs:
            return True
        return self._every_steps is not None and step >= self._last_step + self._every_steps

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        """Record ``step`` as done now; the seconds and steps since the last, or Nones."""
        now = time.time()
        elapsed: tuple[float | None, int | None] = (None, None)
        if self._last_time is not None and self._last_step is not None:
            elapsed = (now - self._last_time, step - self._last_step)
        self._last_time = now
        self._last_step = step
        return elapsed

    def last_triggered_step(self) -> int | None:
        return self._last_step


class NeverTriggerTimer(SecondOrStepTimer):
    """A timer that is never due."""

    def __init__(self) -> None:
        self.reset()

    def should_trigger_for_step(self, step: int) -> bool:
        return False

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        return (None, None)

    def last_triggered_step(self) -> int | None:
        return None


class StopAtStepHook(SessionRunHook):
    """Asks the loop to stop once the global step reaches ``last_step`` (or
    ``num_steps`` past its value when the session was made).

    Raises:
        ValueError: neither or both of ``num_steps`` and ``last_step``.
    """

    def __init__(self, num_steps: int | None = None, last_step: int | None = None) -> None:
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        self._num_steps = num_steps
        self._last_step = last_step

    def begin(self) -> None:
        self._global_step_tensor = _require_global_step("StopAtStepHook")

    def after_create_session(self, session: Any, coord: Any) -> None:
        if self._last_step is None:
            assert self._num_steps is not None
            self._last_step = int(session.run(self._global_step_tensor)) + self._num_steps

    def before_run(self, run_context: Any) -> SessionRunArgs:
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        assert self._last_step is not None
        if run_values.results + 1 >= self._last_step:
            # the read may predate this run's increment: read again
            step = run_context.session.run(self._global_step_tensor)
            if step >= self._last_step:
                run_context.request_stop()


class NanLossDuringTrainingError(RuntimeError):
    """The loss a ``NanTensorHook`` watches became NaN."""

    def __str__(self) -> str:
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Watches a loss: NaN raises ``NanLossDuringTrainingError`` (or, without
    ``fail_on_nan_loss``, logs a warning and stops the loop)."""

    def __init__(self, loss_tensor: Any, fail_on_nan_loss: bool = True) -> None:
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss

    def before_run(self, run_context: Any) -> SessionRunArgs:
        return SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if np.isnan(run_values.results):
            message = "Model diverged with loss = NaN."
            if self._fail_on_nan_loss:
                _log.error(message)
                raise NanLossDuringTrainingError
            _log.warning(message)
            run_context.request_stop()


class LoggingTensorHook(SessionRunHook):
    """Logs (INFO) tensors' values every ``every_n_iter`` runs or ``every_n_secs``
    seconds, and/or at the end.

    Args:
        tensors: a dict of tags to tensors (or tensor names), logged in sorted
            tag order, or a list of tensors or names, logged in its order.
        every_n_iter, every_n_secs: exactly one, unless only ``at_end``.
        at_end: log once more when the session ends.
        formatter: makes the logged line from the dict of tag to value.

    Raises:
        ValueError: not exactly one of ``every_n_iter`` and ``every_n_secs``
            (without ``at_end``); ``every_n_iter`` below 1.
    """

    def __init__(
        self,
        tensors: Any,
        every_n_iter: int | None = None,
        every_n_secs: float | None = None,
        at_end: bool = False,
        formatter: Callable[[dict[Any, Any]], str] | None = None,
    ) -> None:
        only_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError(
                "either at_end and/or exactly one of every_n_iter and every_n_secs "
                "must be provided."
            )
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        if not isinstance(tensors, dict):
            self._tag_order = list(tensors)
            tensors = {item: item for item in tensors}
        else:
            self._tag_order = sorted(tensors.keys())
        self._tensors = tensors
        self._formatter = formatter
        self._timer: SecondOrStepTimer = (
            NeverTriggerTimer()
            if only_at_end
            else SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter)
        )
        self._log_at_end = at_end

    def begin(self) -> None:
        self._timer.reset()
        self._iter_count = 0
        self._current_tensors = {
            tag: _as_graph_element(tensor) for tag, tensor in self._tensors.items()
        }

    def before_run(self, run_context: Any) -> SessionRunArgs | None:
        self._should_trigger = self._timer.should_trigger_for_step(self._iter_count)
        return SessionRunArgs(self._current_tensors) if self._should_trigger else None

    def _log_tensors(self, values: dict[Any, Any]) -> None:
        elapsed, _ = self._timer.update_last_triggered_step(self._iter_count)
        with np.printoptions(suppress=True):
            if self._formatter:
                _log.info(self._formatter(values))
                return
            # str(), not format(): a float32 shows as numpy prints it (0.53), as in TensorFlow
            line = ", ".join(f"{tag} = {values[tag]!s}" for tag in self._tag_order)
        if elapsed is not None:
            _log.info("%s (%.3f sec)", line, elapsed)
        else:
            _log.info("%s", line)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if self._should_trigger:
            self._log_tensors(run_values.results)
        self._iter_count += 1

    def end(self, session: Any) -> None:
        if self._log_at_end:
            self._log_tensors(session.run(self._current_tensors))


class StepCounterHook(SessionRunHook):
    """Logs (and writes as summary ``global_step/sec``) the steps per second.

    Raises:
        ValueError: not exactly one of ``every_n_steps`` and ``every_n_secs``.
    """

    def __init__(
        self,
        every_n_steps: int | None = 100,
        every_n_secs: float | None = None,
        output_dir: Any = None,
        summary_writer: Any = None,
    ) -> None:
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._last_global_step: Any = None
        self._unchanged_warnings = 0

    def begin(self) -> None:
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = _writer_for(self._output_dir)
        self._global_step_tensor = _require_global_step("StepCounterHook")
        self._summary_tag = get_global_step().op.name + "/sec"

    def before_run(self, run_context: Any) -> SessionRunArgs:
        return SessionRunArgs(self._global_step_tensor)

    def _log_and_record(self, elapsed_steps: int, elapsed_time: float, step: int) -> None:
        steps_per_sec = elapsed_steps / elapsed_time
        if self._summary_writer is not None:
            try:
                from tf_accum.graph.proto_messages import message_class

                summary = message_class("Summary")()
                summary.value.add(tag=self._summary_tag, simple_value=steps_per_sec)
                self._summary_writer.add_summary(summary, step)
            except errors.UnimplementedError:
                pass  # no protobuf: the FileWriter has warned that it writes nothing
        _log.info("%s: %g", self._summary_tag, steps_per_sec)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        stale = run_values.results
        if self._timer.should_trigger_for_step(stale + 1):
            step = run_context.session.run(self._global_step_tensor)
            if self._timer.should_trigger_for_step(step):
                elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(step)
                if elapsed_time is not None and elapsed_steps is not None:
                    self._log_and_record(elapsed_steps, elapsed_time, step)
        if stale == self._last_global_step and self._unchanged_warnings < 5:
            self._unchanged_warnings += 1
            _log.warning(
                "It seems that global step (tf.train.get_global_step) has not been increased. "
                "Current value (could be stable): %s vs previous value: %s. You could increase "
                "the global step by passing tf.train.get_global_step() to "
                "Optimizer.apply_gradients or Optimizer.minimize.",
                stale,
                self._last_global_step,
            )
        self._last_global_step = stale

    def end(self, session: Any) -> None:
        # the writer keeps events until it flushes: write them before the program may exit
        if self._summary_writer is not None:
            self._summary_writer.flush()


class CheckpointSaverListener:
    """Told before and after each save of a ``CheckpointSaverHook``; ``after_save``
    returning True stops the loop."""

    def begin(self) -> None:
        pass

    def before_save(self, session: Any, global_step_value: Any) -> None:
        pass

    def after_save(self, session: Any, global_step_value: Any) -> bool | None:
        return None

    def end(self, session: Any, global_step_value: Any) -> None:
        pass


class CheckpointSaverHook(SessionRunHook):
    """Saves a checkpoint every ``save_secs`` seconds or ``save_steps`` steps,
    when the session starts, and at the end.

    Raises:
        ValueError: both ``saver`` and ``scaffold``; not exactly one of
            ``save_secs`` and ``save_steps``.
    """

    def __init__(
        self,
        checkpoint_dir: str,
        save_secs: float | None = None,
        save_steps: int | None = None,
        saver: Any = None,
        checkpoint_basename: str = "model.ckpt",
        scaffold: Any = None,
        listeners: Any = None,
        save_graph_def: bool = True,
    ) -> None:
        _log.info("Create CheckpointSaverHook.")
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._saver = saver
        self._checkpoint_dir = checkpoint_dir
        self._save_path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._listeners = list(listeners or [])
        self._save_graph_def = save_graph_def

    def begin(self) -> None:
        # TensorFlow's event writer makes the directory; without tensorboard none is made
        os.makedirs(self._checkpoint_dir, exist_ok=True)
        self._summary_writer = _writer_for(self._checkpoint_dir)
        self._global_step_tensor = _require_global_step("CheckpointSaverHook")
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session: Any, coord: Any) -> None:
        step = session.run(self._global_step_tensor)
        if self._save_graph_def:
            self._summary_writer.add_graph(mode.get_default_graph())
        # the state at the start is a checkpoint too
        self._save(session, step)
        self._timer.update_last_triggered_step(step)

    def before_run(self, run_context: Any) -> SessionRunArgs:
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if self._timer.should_trigger_for_step(run_values.results + 1):
            step = run_context.session.run(self._global_step_tensor)
            if self._timer.should_trigger_for_step(step):
                self._timer.update_last_triggered_step(step)
                if self._save(run_context.session, step):
                    run_context.request_stop()

    def end(self, session: Any) -> None:
        last_step = session.run(self._global_step_tensor)
        if last_step != self._timer.last_triggered_step():
            self._save(session, last_step)
        for listener in self._listeners:
            listener.end(session, last_step)
        self._summary_writer.flush()

    def _save(self, session: Any, step: Any) -> bool:
        _log.info("Calling checkpoint listeners before saving checkpoint %d...", step)
        for listener in self._listeners:
            listener.before_save(session, step)
        _log.info("Saving checkpoints for %d into %s.", step, self._save_path)
        self._get_saver().save(
            session, self._save_path, global_step=step, write_meta_graph=self._save_graph_def
        )
        log = _session_log("CHECKPOINT", self._save_path)
        if log is not None:
            self._summary_writer.add_session_log(log, step)
        _log.info("Calling checkpoint listeners after saving checkpoint %d...", step)
        stop = False
        for listener in self._listeners:
            if listener.after_save(session, step):
                _log.info(
                    "A CheckpointSaverListener requested that training be stopped. listener: %s",
                    listener,
                )
                stop = True
        return stop

    def _get_saver(self) -> Any:
        if self._saver is not None:
            return self._saver
        if self._scaffold is not None:
            return self._scaffold.saver
        savers = mode.get_default_graph().get_collection("savers")
        if not savers:
            raise RuntimeError(
                "No items in collection savers. Please add a saver to the collection or "
                "provide a saver or scaffold."
            )
        if len(savers) > 1:
            raise RuntimeError(
                "More than one item in collection savers. Please indicate which one to use "
                "by passing it to the constructor."
            )
        self._saver = savers[0]
        return self._saver


class SummarySaverHook(SessionRunHook):
    """Writes the summary op's value every ``save_steps`` steps or ``save_secs`` seconds.

    Raises:
        ValueError: not exactly one of ``scaffold`` and ``summary_op``, or of
            ``save_steps`` and ``save_secs``.
    """

    def __init__(
        self,
        save_steps: int | None = None,
        save_secs: float | None = None,
        output_dir: Any = None,
        summary_writer: Any = None,
        scaffold: Any = None,
        summary_op: Any = None,
    ) -> None:
        if (scaffold is None) == (summary_op is None):
            raise ValueError("Exactly one of scaffold or summary_op must be provided.")
        self._summary_op = summary_op
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self) -> None:
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = _writer_for(self._output_dir)
        self._next_step: int | None = None
        self._global_step_tensor = _require_global_step("SummarySaverHook")

    def before_run(self, run_context: Any) -> SessionRunArgs:
        self._request_summary = self._next_step is None or self._timer.should_trigger_for_step(
            self._next_step
        )
        requests: dict[str, Any] = {"global_step": self._global_step_tensor}
        if self._request_summary:
            summary_op = self._get_summary_op()
            if summary_op is not None:
                requests["summary"] = summary_op
        return SessionRunArgs(requests)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if not self._summary_writer:
            return
        step = run_values.results["global_step"] + 1
        if self._next_step is None or self._request_summary:
            step = run_context.session.run(self._global_step_tensor)
        if self._next_step is None:
            log = _session_log("START")
            if log is not None:
                self._summary_writer.add_session_log(log, step)
        if self._request_summary:
            self._timer.update_last_triggered_step(step)
            for summary in run_values.results.get("summary", ()):
                self._summary_writer.add_summary(summary, step)
        self._next_step = int(step) + 1

    def end(self, session: Any = None) -> None:
        if self._summary_writer:
            self._summary_writer.flush()

    def _get_summary_op(self) -> list[Any] | None:
        summary_op = self._summary_op
        if summary_op is None:
            summary_op = self._scaffold.summary_op
        if summary_op is None:
            return None
        return summary_op if isinstance(summary_op, list) else [summary_op]


class GlobalStepWaiterHook(SessionRunHook):
    """Holds the first run back until the global step reaches ``wait_until_step``,
    logging what it waits for."""

    def __init__(self, wait_until_step: int) -> None:
        self._wait_until_step = wait_until_step

    def begin(self) -> None:
        self._worker_is_started = False
        self._global_step_tensor = _require_global_step("_GlobalStepWaiterHook")

    def before_run(self, run_context: Any) -> None:
        if self._worker_is_started:
            return
        if self._wait_until_step <= 0:
            self._worker_is_started = True
            return
        _log.info("Waiting for global step %d before starting training.", self._wait_until_step)
        last_logged = time.monotonic()
        while True:
            current = run_context.session.run(self._global_step_tensor)
            if current >= self._wait_until_step:
                self._worker_is_started = True
                return
            if time.monotonic() - last_logged >= 30:
                _log.info(
                    "Waiting for global step %d before starting training. Current step is %d.",
                    self._wait_until_step,
                    current,
                )
                last_logged = time.monotonic()
            time.sleep(0.5)


class FinalOpsHook(SessionRunHook):
    """Runs ``final_ops`` when the session ends; their values are ``final_ops_values``."""

    def __init__(self, final_ops: Any, final_ops_feed_dict: Any = None) -> None:
        self._final_ops = final_ops
        self._final_ops_feed_dict = final_ops_feed_dict
        self._final_ops_values: Any = None

    @property
    def final_ops_values(self) -> Any:
        return self._final_ops_values

    def end(self, session: Any) -> None:
        if self._final_ops is None:
            return
        try:
            self._final_ops_values = session.run(
                self._final_ops, feed_dict=self._final_ops_feed_dict
            )
        except (errors.OutOfRangeError, StopIteration):
            _log.warning(
                "FinalOpsHook's ops raised OutOfRangeError or StopIteration: they read from "
                "an input that is exhausted at the end; make them read only variables."
            )
            raise


class FeedFnHook(SessionRunHook):
    """Feeds what ``feed_fn()`` returns to every run."""

    def __init__(self, feed_fn: Callable[[], Any]) -> None:
        self.feed_fn = feed_fn

    def before_run(self, run_context: Any) -> SessionRunArgs:
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


__all__ = [
    "SecondOrStepTimer",
    "StopAtStepHook",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "LoggingTensorHook",
    "StepCounterHook",
    "CheckpointSaverListener",
    "CheckpointSaverHook",
    "SummarySaverHook",
    "GlobalStepWaiterHook",
    "FinalOpsHook",
    "FeedFnHook",
]
