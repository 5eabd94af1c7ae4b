"""``tf.train.QueueRunner``: threads that keep running a queue's enqueue ops.

As TensorFlow's: one thread per enqueue op runs it in a session until the
queue is closed (the enqueue's OutOfRangeError or CancelledError, by
default OutOfRangeError only); the last of them to stop so runs the
``close_op``. With a ``Coordinator``, the threads stop when it is asked to
stop, one more thread waits for that and then runs the ``cancel_op``
(closing the queue and cancelling waiting enqueues), and an error stops
the coordinator with it. The threads are daemon threads, whatever
``daemon`` says (docs/departures.md T28): a program's exit never waits for them.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

from tf_accum import errors
from tf_accum.graph import mode
from tf_accum.graph.collections import GraphKeys
from tf_accum.graph.session import get_default_session

_log = logging.getLogger("tf_accum")

# Once its coordinator stops, a runner's runs in progress are cancelled again for
# at most this long (seconds), every RUNNER_STOP_POLL, until its threads end.
RUNNER_STOP_WAIT = 10.0
RUNNER_STOP_POLL = 0.2

_EAGER_MESSAGE = (
    "QueueRunners are not supported when eager execution is enabled: build the graph "
    "(tf.compat.v1.disable_eager_execution()) and run it in a Session."
)


class QueueRunner:
    """Holds a queue's enqueue ops, and starts the threads that run them.

    Args:
        queue: the queue (a ``FIFOQueue``).
        enqueue_ops: the ops each thread runs again and again.
        close_op: run when the last thread sees the queue closed (default:
            ``queue.close()``).
        cancel_op: run when the coordinator stops (default:
            ``queue.close(cancel_pending_enqueues=True)``).
        queue_closed_exception_types: the errors that mean "the queue is
            closed, stop quietly" (default: ``(OutOfRangeError,)``).

    Raises:
        RuntimeError: eager execution.
        ValueError: no queue or no enqueue ops, or a ``queue_runner_def``
            (protocol buffers are not kept).
    """

    def __init__(
        self,
        queue: Any = None,
        enqueue_ops: Sequence[Any] | None = None,
        close_op: Any = None,
        cancel_op: Any = None,
        queue_closed_exception_types: Any = None,
        queue_runner_def: Any = None,
        import_scope: Any = None,
    ) -> None:
        if mode.executing_eagerly():
            raise RuntimeError(_EAGER_MESSAGE)
        if queue_runner_def is not None:
            raise ValueError("queue_runner_def is not supported: pass the queue and its ops")
        if not queue or not enqueue_ops:
            raise ValueError("Must provide queue and enqueue_ops.")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = (
            cancel_op if cancel_op is not None else queue.close(cancel_pending_enqueues=True)
        )
        if queue_closed_exception_types is None:
            self._closed_types: tuple[type[BaseException], ...] = (errors.OutOfRangeError,)
        else:
            types = tuple(queue_closed_exception_types)
            if not types or not all(
                isinstance(t, type) and issubclass(t, errors.OpError) for t in types
            ):
                raise TypeError(
                    "queue_closed_exception_types, when provided, must be a tuple of "
                    f"tf.error types, but saw: {queue_closed_exception_types}"
                )
            self._closed_types = types
        self._lock = threading.Lock()
        # per session: the threads still running an enqueue op
        self._runs: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._exceptions_raised: list[BaseException] = []

    @property
    def queue(self) -> Any:
        return self._queue

    @property
    def enqueue_ops(self) -> list[Any]:
        return self._enqueue_ops

    @property
    def close_op(self) -> Any:
        return self._close_op

    @property
    def cancel_op(self) -> Any:
        return self._cancel_op

    @property
    def queue_closed_exception_types(self) -> tuple[type[BaseException], ...]:
        return self._closed_types

    @property
    def exceptions_raised(self) -> list[BaseException]:
        """Errors the threads stopped on, when there was no coordinator to report them to."""
        return self._exceptions_raised

    @property
    def name(self) -> str:
        """The queue's name."""
        name: str = self._queue.name
        return name

    def _run(self, sess: Any, enqueue_op: Any, coord: Any) -> None:
        """A thread's loop: run ``enqueue_op`` until the queue closes, the
        coordinator stops, or an error (reported to the coordinator)."""
        counted = True
        try:
            while not (coord is not None and coord.should_stop()):
                try:
                    sess.run(enqueue_op)
                except self._closed_types:
                    with self._lock:
                        self._runs[sess] -= 1
                        counted, last = False, self._runs[sess] == 0
                    if last:
                        self._run_quietly(sess, self._close_op, "close")
                    return
        except Exception as error:
            if (
                coord is not None
                and coord.should_stop()
                and isinstance(error, errors.CancelledError)
            ):
                # The stop was asked for already and closing the session cancelled
                # this enqueue: the end of the loop, not a failure to report (after
                # coord.join() TensorFlow raises it here, a traceback in every
                # clean shutdown of a SyncReplicasOptimizer chief).
                _log.debug("QueueRunner of %s stopped: %s", self.name, error)
                return
            if coord is not None:
                coord.request_stop(error)
            else:
                _log.error("Exception in QueueRunner of %s: %s", self.name, error)
                with self._lock:
                    self._exceptions_raised.append(error)
                raise
        finally:
            if counted:
                with self._lock:
                    self._runs[sess] -= 1

    def _close_on_stop(self, sess: Any, coord: Any, runners: list[threading.Thread]) -> None:
        coord.wait_for_stop()
        self._run_quietly(sess, self._cancel_op, "cancel")
        # A runner may be waiting in something the cancel op does not reach (a
        # SyncReplicasOptimizer chief's take waits for gradients that will not come
        # once the workers stop): cancel its run, so that coord.join() and the
        # program's exit do not wait for it (TensorFlow leaves it until the session
        # closes, after the join's grace period).
        cancel = getattr(sess, "_cancel_runs_of_threads", None)
        if cancel is None:
            return
        give_up = time.monotonic() + RUNNER_STOP_WAIT
        while time.monotonic() < give_up:
            alive = {thread.ident for thread in runners if thread.is_alive()}
            alive.discard(None)
            if not alive:
                return
            cancel(
                alive,
                errors.CancelledError(
                    None, None, f"The coordinator of QueueRunner {self.name} was asked to stop"
                ),
            )
            for thread in runners:  # a run may have started just before the stop
                thread.join(RUNNER_STOP_POLL)

    def _run_quietly(self, sess: Any, op: Any, what: str) -> None:
        try:
            sess.run(op)
        except Exception as error:  # the session may be closing: nothing left to close
            _log.debug("Ignored exception running the %s op of %s: %s", what, self.name, error)

    def create_threads(
        self, sess: Any, coord: Any = None, daemon: bool = False, start: bool = False
    ) -> list[threading.Thread]:
        """Threads that run the enqueue ops in ``sess`` (and, with ``coord``,
        the cancel op when it stops); none if they run in ``sess`` already.

        The threads are registered with ``coord``; started with ``start``.
        They are daemon threads whatever ``daemon`` says (docs/departures.md T28).
        """
        with self._lock:
            if self._runs.get(sess, 0) > 0:
                return []
            self._runs[sess] = len(self._enqueue_ops)
            self._exceptions_raised = []
        threads = [
            threading.Thread(
                target=self._run,
                args=(sess, op, coord),
                name=f"QueueRunnerThread-{self.name}-{op.name}",
                daemon=True,
            )
            for op in self._enqueue_ops
        ]
        if coord is not None:
            threads.append(
                threading.Thread(
                    target=self._close_on_stop,
                    args=(sess, coord, list(threads)),
                    name=f"QueueRunnerThread-{self.name}-close_on_stop",
                    daemon=True,
                )
            )
        for thread in threads:
            if coord is not None:
                coord.register_thread(thread)
            if start:
                thread.start()
        return threads


def add_queue_runner(qr: QueueRunner, collection: str = GraphKeys.QUEUE_RUNNERS) -> None:
    """Add ``qr`` to the default graph's ``collection`` (``start_queue_runners`` starts it)."""
    mode.get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(
    sess: Any = None,
    coord: Any = None,
    daemon: bool = True,
    start: bool = True,
    collection: str = GraphKeys.QUEUE_RUNNERS,
) -> list[threading.Thread]:
    """Start the threads of every QueueRunner in the session's graph's ``collection``.

    Args:
        sess: the session (default: the default session).
        coord: a ``Coordinator`` the threads report to and stop with.

    Returns:
        The threads (daemon threads, see :class:`QueueRunner`).

    Raises:
        RuntimeError: eager execution.
        ValueError: no session given and no default session.
    """
    if mode.executing_eagerly():
        raise RuntimeError(_EAGER_MESSAGE)
    if sess is None:
        sess = get_default_session()
        if sess is None:
            raise ValueError(
                "Cannot start queue runners: No default session is registered. Use `with "
                "sess.as_default()` or pass an explicit session to "
                "tf.start_queue_runners(sess=sess)"
            )
    threads: list[threading.Thread] = []
    for qr in sess.graph.get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads


__all__ = ["QueueRunner", "add_queue_runner", "start_queue_runners"]
