"""``tf.train.Supervisor``: TensorFlow's older training-loop manager, still common in TF1 programs.

A Supervisor finds or makes the model's init, ready and local init ops, its
saver, summary op and global step (then finalizes the graph). The chief's
``prepare_or_wait_for_session`` restores the latest checkpoint of ``logdir``
or initializes the model, and starts the standard services: threads that
save a checkpoint every ``save_model_secs`` and write the summaries and the
steps per second every ``save_summaries_secs``. Another worker waits (with
the session manager, logging what it waits for) until the chief has made
the model ready. The graph's queue runners start in both. Every thread
reports to the Supervisor's ``Coordinator`` and stops with ``stop()``; they
are daemon threads, so a program's exit never waits for them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from tf_accum.graph import mode
from tf_accum.graph.basic_hooks import _session_log
from tf_accum.graph.collections import (
    GraphKeys,
    global_variables,
    global_variables_initializer,
    local_variables_initializer,
)
from tf_accum.graph.coordinator import Coordinator, LooperThread
from tf_accum.graph.global_step import global_step as global_step_value
from tf_accum.graph.initialization import report_uninitialized_variables
from tf_accum.graph.ops import group
from tf_accum.graph.session_manager import SessionManager

_log = logging.getLogger("tf_accum")

READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
SUMMARY_OP = "summary_op"
SAVERS = "savers"


class Supervisor:
    """Initializes or restores the model, waits for the chief, and runs the
    background services of a TF1 training loop.

    Args:
        graph: the model's graph (default: the default graph); finalized here.
        ready_op, ready_for_local_init_op, init_op, local_init_op, summary_op,
        saver, global_step: ``Supervisor.USE_DEFAULT`` takes the first item of
            the graph's collection of that name, or makes TensorFlow's default
            (``report_uninitialized_variables()``, ``global_variables_initializer()``,
            a group of ``local_variables_initializer()``, ``merge_all()``, a
            ``Saver()`` when there are variables, the ``global_step`` tensor);
            None means none.
        is_chief: whether this task initializes the model and runs the services.
        init_feed_dict, init_fn: feeds for ``init_op``; called as ``init_fn(sess)`` after it.
        logdir: where the chief restores from, saves checkpoints and writes summaries.
        save_summaries_secs, save_model_secs: the services' periods (0 or None: no service).
        recovery_wait_secs: how often a waiting worker tries again.
        stop_grace_secs: how long ``stop()`` lets threads take to end.
        checkpoint_basename: the checkpoints' file name in ``logdir``.
        session_manager: a ``SessionManager`` to use instead of the default one.
        summary_writer: default: a ``FileWriter`` on ``logdir`` (chief only).
        local_init_run_options: the ``RunOptions`` of ``local_init_op``'s run.

    Raises:
        RuntimeError: eager execution.
    """

    USE_DEFAULT: Any = 0

    def __init__(
        self,
        graph: Any = None,
        ready_op: Any = USE_DEFAULT,
        ready_for_local_init_op: Any = USE_DEFAULT,
        is_chief: bool = True,
        init_op: Any = USE_DEFAULT,
        init_feed_dict: Any = None,
        local_init_op: Any = USE_DEFAULT,
        logdir: str | None = None,
        summary_op: Any = USE_DEFAULT,
        saver: Any = USE_DEFAULT,
        global_step: Any = USE_DEFAULT,
        save_summaries_secs: float | None = 120,
        save_model_secs: float | None = 600,
        recovery_wait_secs: float = 30,
        stop_grace_secs: float = 120,
        checkpoint_basename: str = "model.ckpt",
        session_manager: SessionManager | None = None,
        summary_writer: Any = USE_DEFAULT,
        init_fn: Callable[[Any], Any] | None = None,
        local_init_run_options: Any = None,
    ) -> None:
        if mode.executing_eagerly():
            raise RuntimeError("Supervisors are incompatible with eager execution.")
        graph = graph if graph is not None else mode.get_default_graph()
        self._graph = graph
        with graph.as_default():
            self._init_ready_op(ready_op, ready_for_local_init_op)
            self._init_init_op(init_op, init_feed_dict)
            self._init_local_init_op(local_init_op)
            self._init_saver(saver)
            self._init_summary_op(summary_op)
            self._init_global_step(global_step)
        self._is_chief = is_chief
        self._coord = Coordinator()
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._init_fn = init_fn
        self._local_init_run_options = local_init_run_options
        self._logdir: str | None = None
        self._save_summaries_secs: float | None = None
        self._save_model_secs: float | None = None
        self._save_path: str | None = None
        self._summary_writer: Any = None
        self._graph_added_to_summary = False
        if is_chief:
            self._logdir = logdir
            self._save_summaries_secs = save_summaries_secs
            self._save_model_secs = save_model_secs
            if logdir:
                self._save_path = os.path.join(logdir, checkpoint_basename)
                # TensorFlow's event writer makes it; without tensorboard none is made
                os.makedirs(logdir, exist_ok=True)
            if summary_writer is Supervisor.USE_DEFAULT:
                if logdir:
                    from tf_accum.graph.summary_writer import FileWriter

                    self._summary_writer = FileWriter(logdir)
            else:
                self._summary_writer = summary_writer
        if session_manager is None:
            session_manager = SessionManager(
                local_init_op=self._local_init_op,
                ready_op=self._ready_op,
                ready_for_local_init_op=self._ready_for_local_init_op,
                graph=graph,
                recovery_wait_secs=recovery_wait_secs,
                local_init_run_options=local_init_run_options,
            )
        self._session_manager = session_manager
        graph.finalize()

    # --- the ops, found or made -----------------------------------------------

    def _first_of(self, key: str) -> Any:
        found = self._graph.get_collection(key)
        if len(found) > 1:
            _log.info("Found %d %s operations. Returning the first one.", len(found), key)
        return found[0] if found else None

    def _init_ready_op(self, ready_op: Any, ready_for_local_init_op: Any) -> None:
        if ready_op is Supervisor.USE_DEFAULT:
            ready_op = self._first_of(GraphKeys.READY_OP)
            if ready_op is None:
                ready_op = report_uninitialized_variables()
                self._graph.add_to_collection(GraphKeys.READY_OP, ready_op)
        self._ready_op = ready_op
        if ready_for_local_init_op is Supervisor.USE_DEFAULT:
            ready_for_local_init_op = self._first_of(READY_FOR_LOCAL_INIT_OP)
        self._ready_for_local_init_op = ready_for_local_init_op

    def _init_init_op(self, init_op: Any, init_feed_dict: Any) -> None:
        if init_op is Supervisor.USE_DEFAULT:
            init_op = self._first_of(GraphKeys.INIT_OP)
            if init_op is None:
                init_op = global_variables_initializer()
                self._graph.add_to_collection(GraphKeys.INIT_OP, init_op)
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict

    def _init_local_init_op(self, local_init_op: Any) -> None:
        if local_init_op is Supervisor.USE_DEFAULT:
            local_init_op = self._first_of(GraphKeys.LOCAL_INIT_OP)
            if local_init_op is None:
                local_init_op = group(local_variables_initializer())
                self._graph.add_to_collection(GraphKeys.LOCAL_INIT_OP, local_init_op)
        self._local_init_op = local_init_op

    def _init_saver(self, saver: Any) -> None:
        if saver is Supervisor.USE_DEFAULT:
            saver = self._first_of(SAVERS)
            if saver is None and global_variables():
                from tf_accum.graph.saver import Saver

                saver = Saver()
                self._graph.add_to_collection(SAVERS, saver)
        self._saver = saver

    def _init_summary_op(self, summary_op: Any) -> None:
        if summary_op is Supervisor.USE_DEFAULT:
            summary_op = self._first_of(SUMMARY_OP)
            if summary_op is None:
                from tf_accum.graph.summary_ops import merge_all

                summary_op = merge_all()
                if summary_op is not None:
                    self._graph.add_to_collection(SUMMARY_OP, summary_op)
        self._summary_op = summary_op

    def _init_global_step(self, global_step: Any) -> None:
        if global_step is Supervisor.USE_DEFAULT:
            global_step = self._first_of(GraphKeys.GLOBAL_STEP)
            if global_step is None:
                try:
                    global_step = self._graph.get_tensor_by_name("global_step:0")
                except KeyError:
                    global_step = None
                if global_step is not None:
                    if global_step.dtype.base_dtype.name not in ("int32", "int64"):
                        _log.warning(
                            "Found 'global_step' is not an int type: %s", global_step.dtype
                        )
                        global_step = None
                    else:
                        self._graph.add_to_collection(GraphKeys.GLOBAL_STEP, global_step)
        self._global_step = global_step

    # --- properties -----------------------------------------------------------

    @property
    def is_chief(self) -> bool:
        return self._is_chief

    @property
    def session_manager(self) -> SessionManager:
        return self._session_manager

    @property
    def coord(self) -> Coordinator:
        return self._coord

    @property
    def init_op(self) -> Any:
        return self._init_op

    @property
    def init_feed_dict(self) -> Any:
        return self._init_feed_dict

    @property
    def local_init_op(self) -> Any:
        return self._local_init_op

    @property
    def ready_op(self) -> Any:
        return self._ready_op

    @property
    def ready_for_local_init_op(self) -> Any:
        return self._ready_for_local_init_op

    @property
    def summary_writer(self) -> Any:
        return self._summary_writer

    @property
    def summary_op(self) -> Any:
        return self._summary_op

    @property
    def save_summaries_secs(self) -> float | None:
        return self._save_summaries_secs

    @property
    def global_step(self) -> Any:
        return self._global_step

    @property
    def saver(self) -> Any:
        return self._saver

    @property
    def save_model_secs(self) -> float | None:
        return self._save_model_secs

    @property
    def save_path(self) -> str | None:
        return self._save_path

    @property
    def logdir(self) -> str | None:
        return self._logdir

    @property
    def recovery_wait_secs(self) -> float:
        return self._recovery_wait_secs

    @property
    def stop_grace_secs(self) -> float:
        return self._stop_grace_secs

    # --- sessions ------------------------------------------------------------

    def _write_graph(self) -> None:
        if self._summary_writer and not self._graph_added_to_summary:
            self._summary_writer.add_graph(self._graph)
            self._graph_added_to_summary = True

    def prepare_or_wait_for_session(
        self,
        master: str = "",
        config: Any = None,
        wait_for_checkpoint: bool = False,
        max_wait_secs: float = 7200,
        start_standard_services: bool = True,
    ) -> Any:
        """A session whose model is ready: the chief restores or initializes it
        (and starts the standard services), another worker waits for the chief.
        With ``start_standard_services``, the graph's queue runners start too.

        Raises:
            DeadlineExceededError: a worker waited ``max_wait_secs`` in vain.
            RuntimeError: the chief's init ops did not make the model ready.
        """
        self._coord.clear_stop()
        if self._summary_writer:
            self._summary_writer.reopen()
        if self._is_chief:
            sess = self._session_manager.prepare_session(
                master,
                init_op=self.init_op,
                saver=self.saver,
                checkpoint_dir=self._logdir,
                wait_for_checkpoint=wait_for_checkpoint,
                max_wait_secs=max_wait_secs,
                config=config,
                init_feed_dict=self._init_feed_dict,
                init_fn=self._init_fn,
            )
            self._write_graph()
            if start_standard_services:
                _log.info("Starting standard services.")
                self.start_standard_services(sess)
        else:
            sess = self._session_manager.wait_for_session(
                master, config=config, max_wait_secs=max_wait_secs
            )
        if start_standard_services:
            _log.info("Starting queue runners.")
            self.start_queue_runners(sess)
        return sess

    def start_standard_services(self, sess: Any) -> list[Any]:
        """Start the chief's service threads: checkpoints every ``save_model_secs``,
        summaries and steps per second every ``save_summaries_secs`` (each first
        at once). Returns the threads.

        Raises:
            RuntimeError: not the chief.
        """
        if not self._is_chief:
            raise RuntimeError(
                "Only chief supervisor can start standard services. Because only chief "
                "supervisors can write events."
            )
        if not self._logdir:
            _log.warning("Standard services need a 'logdir' passed to the SessionManager")
            return []
        if self._global_step is not None and self._summary_writer:
            log = _session_log("START")
            if log is not None:
                step = global_step_value(sess, self._global_step)
                self._summary_writer.add_session_log(log, step)
        threads = []
        if self._save_summaries_secs and self._summary_writer:
            if self._summary_op is not None:
                threads.append(self.loop(self._save_summaries_secs, self._write_summaries, [sess]))
            if self._global_step is not None:
                threads.append(
                    self.loop(self._save_summaries_secs, _StepCounter(self, sess).record)
                )
        if self._saver and self._save_model_secs:
            threads.append(self.loop(self._save_model_secs, self._save_checkpoint, [sess]))
        return threads

    def _write_summaries(self, sess: Any) -> None:
        if self._global_step is not None:
            summaries, step = sess.run([self._summary_op, self._global_step])
        else:
            summaries, step = sess.run(self._summary_op), None
        if self._summary_writer:
            _log.info("Recording summary at step %s.", step)
            self._summary_writer.add_summary(summaries, step)

    def _save_checkpoint(self, sess: Any) -> None:
        _log.info("Saving checkpoint to path %s", self._save_path)
        self._saver.save(sess, self._save_path, global_step=self._global_step)
        if self._summary_writer and self._global_step is not None:
            log = _session_log("CHECKPOINT", self._save_path or "")
            if log is not None:
                step = global_step_value(sess, self._global_step)
                self._summary_writer.add_session_log(log, step)

    def start_queue_runners(self, sess: Any, queue_runners: Any = None) -> list[Any]:
        """Start the threads of ``queue_runners`` (default: the graph's), with the
        Supervisor's coordinator. Returns them."""
        if mode.executing_eagerly():
            raise RuntimeError("Queues are not compatible with eager execution.")
        if queue_runners is None:
            queue_runners = self._graph.get_collection(GraphKeys.QUEUE_RUNNERS)
        threads: list[Any] = []
        for runner in queue_runners:
            threads.extend(runner.create_threads(sess, coord=self._coord, daemon=True, start=True))
        return threads

    def loop(
        self,
        timer_interval_secs: float | None,
        target: Callable[..., Any],
        args: Any = None,
        kwargs: Any = None,
    ) -> Any:
        """Start a ``LooperThread`` calling ``target(*args, **kwargs)`` every
        ``timer_interval_secs`` (None: again and again) until a stop is requested;
        returns it (registered with the Supervisor's coordinator)."""
        return LooperThread.loop(self._coord, timer_interval_secs, target, args, kwargs)

    def stop(
        self,
        threads: Any = None,
        close_summary_writer: bool = True,
        ignore_live_threads: bool = False,
    ) -> None:
        """Ask every thread to stop and wait for them (at most ``stop_grace_secs``).

        Raises:
            The exception a thread (or ``request_stop``) reported, if any;
            RuntimeError: threads still running after the grace period (unless
                ``ignore_live_threads``).
        """
        self._coord.request_stop()
        try:
            self._coord.join(
                threads,
                stop_grace_period_secs=self._stop_grace_secs,
                ignore_live_threads=ignore_live_threads,
            )
        finally:
            if close_summary_writer and self._summary_writer:
                log = _session_log("STOP")
                if log is not None:
                    self._summary_writer.add_session_log(log)
                self._summary_writer.close()
                self._graph_added_to_summary = False

    def request_stop(self, ex: Any = None) -> None:
        """Ask the threads and the loop to stop (``ex``: an error ``stop()`` raises)."""
        self._coord.request_stop(ex=ex)

    def should_stop(self) -> bool:
        return self._coord.should_stop()

    def stop_on_exception(self) -> Any:
        return self._coord.stop_on_exception()

    def wait_for_stop(self) -> None:
        self._coord.wait_for_stop()

    def summary_computed(self, sess: Any, summary: Any, global_step: Any = None) -> None:
        """Write ``summary`` (a summary op's value) at ``global_step`` (default: the current one).

        Raises:
            RuntimeError: no summary writer.
        """
        if not self._summary_writer:
            raise RuntimeError("Writing a summary requires a summary writer.")
        if global_step is None and self._global_step is not None:
            global_step = global_step_value(sess, self._global_step)
        self._summary_writer.add_summary(summary, global_step)

    @contextlib.contextmanager
    def managed_session(
        self,
        master: str = "",
        config: Any = None,
        start_standard_services: bool = True,
        close_summary_writer: bool = True,
    ) -> Iterator[Any]:
        """A session for a ``with`` block: made by ``prepare_or_wait_for_session``;
        at the end the threads are stopped and the session closed. An error in
        the block stops the threads and is raised again, except an
        ``OutOfRangeError``, which ends the block normally.
        """
        sess = None
        try:
            sess = self.prepare_or_wait_for_session(
                master=master, config=config, start_standard_services=start_standard_services
            )
            yield sess
        except Exception as e:  # noqa: BLE001 - given to the coordinator, raised by stop()
            self.request_stop(e)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                if sess is not None:
                    try:
                        sess.close()
                    except Exception:  # noqa: BLE001 - the block's own error matters more
                        _log.debug("closing the Supervisor's session failed", exc_info=True)

    # TensorFlow's old names
    PrepareSession = prepare_or_wait_for_session
    StartQueueRunners = start_queue_runners
    StartStandardServices = start_standard_services
    Stop = stop
    RequestStop = request_stop
    Loop = loop
    ShouldStop = should_stop
    StopOnException = stop_on_exception
    WaitForStop = wait_for_stop
    SummaryComputed = summary_computed


class _StepCounter:
    """The steps per second between two calls, logged (the first ten) and written as a summary."""

    def __init__(self, supervisor: Supervisor, sess: Any) -> None:
        self._supervisor = supervisor
        self._sess = sess
        self._step_tensor = supervisor.global_step
        self._tag = f"{self._step_tensor.op.name}/sec"
        self._last_time = time.time()
        self._last_step = global_step_value(sess, self._step_tensor)
        self._logged = 0

    def record(self) -> None:
        step = global_step_value(self._sess, self._step_tensor)
        now = time.time()
        added, elapsed = step - self._last_step, now - self._last_time
        self._last_step, self._last_time = step, now
        steps_per_sec = added / elapsed if elapsed > 0 else float("inf")
        writer = self._supervisor.summary_writer
        if writer:
            try:
                from tf_accum.graph.proto_messages import message_class

                summary = message_class("Summary")()
            except Exception:  # noqa: BLE001 - no protobuf: the writer writes nothing anyway
                summary = None
            if summary is not None:
                summary.value.add(tag=self._tag, simple_value=steps_per_sec)
                writer.add_summary(summary, step)
        if self._logged < 10:
            self._logged += 1
            _log.info("%s: %g", self._tag, steps_per_sec)


__all__ = ["Supervisor"]
