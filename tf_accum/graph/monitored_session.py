"""``tf.train.MonitoredSession`` and ``MonitoredTrainingSession``: a training loop's session
with hooks, queue runners, checkpoints and summaries handled for it.

Making one calls every hook's ``begin``, then makes the session (a
``ChiefSessionCreator`` restores or initializes the model; a
``WorkerSessionCreator`` waits for the chief), starts the graph's queue
runners with a ``Coordinator``, and calls ``after_create_session``. Each
``run`` adds what the hooks' ``before_run`` ask for, then gives them the
results in ``after_run``. ``close`` (or leaving a ``with`` block, where an
``OutOfRangeError`` or ``StopIteration`` ends the loop normally) calls the
hooks' ``end``, stops the queue runners within ``stop_grace_period_secs``
and closes the session. Queue runner threads are daemon threads: exit
never waits for them.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tf_accum import errors
from tf_accum.graph import mode
from tf_accum.graph.basic_hooks import (
    CheckpointSaverHook,
    StepCounterHook,
    SummarySaverHook,
)
from tf_accum.graph.coordinator import Coordinator
from tf_accum.graph.queue_runner import start_queue_runners
from tf_accum.graph.scaffold import Scaffold
from tf_accum.graph.session_manager import SessionManager
from tf_accum.graph.session_run_hook import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)

_log = logging.getLogger("tf_accum")

# how often a non-chief's WorkerSessionCreator checks whether the chief has
# initialized the model (TensorFlow's SessionManager default; tests shorten it)
WORKER_RECOVERY_WAIT_SECS: float = 30

# errors after which a MonitoredSession makes a new session (a ps task restarted)
_PREEMPTION_ERRORS = (errors.AbortedError, errors.UnavailableError)


class _UseDefault:
    def __repr__(self) -> str:
        return "USE_DEFAULT"


USE_DEFAULT: Any = _UseDefault()


class SessionCreator:
    """Makes the session a monitored session wraps."""

    def create_session(self) -> Any:
        raise NotImplementedError("create_session is not implemented for this SessionCreator")


class ChiefSessionCreator(SessionCreator):
    """Makes the chief's session: restored from ``checkpoint_dir``'s latest
    checkpoint (or ``checkpoint_filename_with_path``) if there is one,
    otherwise initialized with the scaffold's init op."""

    def __init__(
        self,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: Any = None,
        checkpoint_dir: str | None = None,
        checkpoint_filename_with_path: str | None = None,
    ) -> None:
        self._checkpoint_dir = checkpoint_dir
        self._checkpoint_filename_with_path = checkpoint_filename_with_path
        self._scaffold = scaffold or Scaffold()
        self._session_manager: SessionManager | None = None
        self._master = master
        self._config = config

    def _get_session_manager(self) -> SessionManager:
        if self._session_manager is None:
            self._session_manager = SessionManager(
                local_init_op=self._scaffold.local_init_op,
                local_init_feed_dict=self._scaffold.local_init_feed_dict,
                ready_op=self._scaffold.ready_op,
                ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                graph=mode.get_default_graph(),
            )
        return self._session_manager

    def create_session(self) -> Any:
        self._scaffold.finalize()
        return self._get_session_manager().prepare_session(
            self._master,
            saver=self._scaffold.saver,
            checkpoint_dir=self._checkpoint_dir,
            checkpoint_filename_with_path=self._checkpoint_filename_with_path,
            config=self._config,
            init_op=self._scaffold.init_op,
            init_feed_dict=self._scaffold.init_feed_dict,
            init_fn=self._scaffold.init_fn,
        )


class WorkerSessionCreator(SessionCreator):
    """Makes a non-chief's session: waits (at most ``max_wait_secs``, logging
    what it waits for) until the chief has made the model ready."""

    def __init__(
        self,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: Any = None,
        max_wait_secs: float = 30 * 60,
    ) -> None:
        self._scaffold = scaffold or Scaffold()
        self._session_manager: SessionManager | None = None
        self._master = master
        self._config = config
        self._max_wait_secs = max_wait_secs

    def _get_session_manager(self) -> SessionManager:
        if self._session_manager is None:
            self._session_manager = SessionManager(
                local_init_op=self._scaffold.local_init_op,
                local_init_feed_dict=self._scaffold.local_init_feed_dict,
                ready_op=self._scaffold.ready_op,
                ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                graph=mode.get_default_graph(),
                recovery_wait_secs=WORKER_RECOVERY_WAIT_SECS,
            )
        return self._session_manager

    def create_session(self) -> Any:
        self._scaffold.finalize()
        return self._get_session_manager().wait_for_session(
            self._master, config=self._config, max_wait_secs=self._max_wait_secs
        )


class StepContext:
    """What ``run_step_fn``'s function gets: the raw session, a run with the
    hooks, and a way to end the loop."""

    def __init__(self, session: Any, run_with_hooks_fn: Callable[..., Any]) -> None:
        self._session = session
        self._run_with_hooks_fn = run_with_hooks_fn

    @property
    def session(self) -> Any:
        return self._session

    def run_with_hooks(self, *args: Any, **kwargs: Any) -> Any:
        return self._run_with_hooks_fn(*args, **kwargs)

    def request_stop(self) -> None:
        """End the loop: raises StopIteration, which the session's ``with`` block swallows."""
        raise StopIteration("step_fn has requested the iterations to stop.")


def _merge_feeds(hook_feeds: Mapping[Any, Any], user_feeds: Any) -> Any:
    if not hook_feeds:
        return user_feeds
    if not user_feeds:
        return dict(hook_feeds)
    conflicts = [key for key in user_feeds if key in hook_feeds]
    if conflicts:
        raise RuntimeError(
            f"Same tensor is fed by a SessionRunHook and user. Conflict(s): {conflicts}"
        )
    merged = dict(user_feeds)
    merged.update(hook_feeds)
    return merged


def _merge_options(options: Any, incoming: Any) -> Any:
    """``options`` with a hook's: the larger timeout and trace level win, as in TensorFlow."""
    from tf_accum.graph.protos import RunOptions

    merged = RunOptions()
    for name in ("timeout_in_ms", "trace_level"):
        mine = getattr(options, name, 0) if options is not None else 0
        setattr(merged, name, max(mine or 0, getattr(incoming, name, 0) or 0))
    return merged


class _MonitoredSession:
    """What MonitoredSession and SingularMonitoredSession share."""

    def __init__(
        self,
        session_creator: SessionCreator | None,
        hooks: Sequence[SessionRunHook] | None,
        should_recover: bool,
        stop_grace_period_secs: float = 120,
    ) -> None:
        self._graph_was_finalized = mode.get_default_graph().finalized
        self._hooks = list(hooks or [])
        for hook in self._hooks:
            hook.begin()
        self._creator = session_creator or ChiefSessionCreator()
        self._should_recover = should_recover
        self._stop_grace_period_secs = stop_grace_period_secs
        self._tf_sess: Any = None
        self._coord: Coordinator | None = None
        self._threads: list[Any] = []
        self._stop_requested = False
        self._closed = False
        self._create_session()

    # --- making and ending the session ----------------------------------------

    def _create_session(self) -> None:
        while True:
            try:
                sess = self._creator.create_session()
                break
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                _log.info("An error was raised while a session was being made; trying again: %s", e)
        coord = Coordinator()
        self._tf_sess, self._coord = sess, coord
        self._stop_requested = False
        self._threads = start_queue_runners(sess=sess, coord=coord)
        for hook in self._hooks:
            hook.after_create_session(sess, coord)

    def _stop_threads_and_close(self) -> None:
        """Stop the queue runners (at most the grace period), then close the session."""
        coord, sess, threads = self._coord, self._tf_sess, self._threads
        self._coord, self._tf_sess, self._threads = None, None, []
        try:
            if coord is not None:
                coord.request_stop()
                coord.join(
                    threads,
                    stop_grace_period_secs=self._stop_grace_period_secs,
                    ignore_live_threads=True,
                )
        finally:
            try:
                if sess is not None:
                    sess.close()
            except Exception:  # noqa: BLE001 - an error of the join above matters more
                _log.debug("closing the monitored session's session failed", exc_info=True)

    def _close_internal(self, exception_type: Any = None) -> None:
        try:
            if not exception_type:
                for hook in self._hooks:
                    hook.end(self._tf_sess)
        finally:
            try:
                if self._closed:
                    raise RuntimeError("Session is already closed.")
                self._stop_threads_and_close()
            finally:
                self._closed = True
                if not self._graph_was_finalized:
                    mode.get_default_graph()._finalized = False

    def close(self) -> None:
        """Call the hooks' ``end``, stop the queue runners and close the session."""
        self._close_internal()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exception_type: Any, exception_value: Any, traceback: Any) -> bool:
        if exception_type in (errors.OutOfRangeError, StopIteration):
            exception_type = None
        self._close_internal(exception_type)
        # an end of input, or a stop asked by run_step_fn, ends the loop quietly
        return exception_type is None

    # --- running --------------------------------------------------------------

    @property
    def graph(self) -> Any:
        return self._tf_sess.graph if self._tf_sess is not None else None

    def should_stop(self) -> bool:
        """Whether the loop should end: a hook or the coordinator asked, or the session is closed."""
        if self._closed or self._tf_sess is None:
            return True
        return self._stop_requested or (self._coord is not None and self._coord.should_stop())

    def run(
        self, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None
    ) -> Any:
        """Run ``fetches`` with the hooks' fetches and feeds added; returns ``fetches``' values.

        Raises:
            RuntimeError: the session is closed, or ``should_stop()`` already said True.
            The run's errors (a queue runner's error instead, if one stopped the coordinator).
        """
        if self._closed:
            raise RuntimeError("Run called after the session was closed.")
        while True:
            try:
                return self._hooked_run(fetches, feed_dict, options, run_metadata)
            except _PREEMPTION_ERRORS as e:
                if not self._should_recover:
                    raise
                _log.info(
                    "An error was raised, maybe a restarted parameter server: the session is "
                    "closed and a new one made. Error: %s",
                    e,
                )
                self._stop_threads_and_close()
                self._create_session()

    def _hooked_run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> Any:
        if self._stop_requested:
            raise RuntimeError("Run called even after should_stop requested.")
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict), self._tf_sess)
        asked: list[tuple[SessionRunHook, int]] = []
        all_fetches: list[Any] = []
        hook_feeds: dict[Any, Any] = {}
        for hook in self._hooks:
            request = hook.before_run(context)
            if request is None:
                continue
            if request.fetches is not None:
                asked.append((hook, len(all_fetches)))
                all_fetches.append(request.fetches)
            if request.feed_dict:
                if any(key in hook_feeds for key in request.feed_dict):
                    raise RuntimeError("Same tensor is fed by two hooks.")
                hook_feeds.update(request.feed_dict)
            if request.options is not None:
                options = _merge_options(options, request.options)
        feeds = _merge_feeds(hook_feeds, feed_dict)
        # The hooks' fetches come first: what they read but the caller's ops
        # change (the global step) is read before the change, as TensorFlow's
        # executor usually does for reads made when the model was built.
        all_fetches.append(fetches)
        try:
            outputs = self._tf_sess.run(
                all_fetches, feed_dict=feeds, options=options, run_metadata=run_metadata
            )
        except _PREEMPTION_ERRORS:
            raise
        except Exception:
            # a queue runner's error that stopped the coordinator is the cause to report
            if self._coord is not None:
                self._coord.raise_requested_exception()
            raise
        positions = dict((id(hook), at) for hook, at in asked)
        for hook in self._hooks:
            at = positions.get(id(hook))
            hook.after_run(
                context,
                SessionRunValues(
                    results=outputs[at] if at is not None else None,
                    options=options,
                    run_metadata=run_metadata,
                ),
            )
        self._stop_requested = self._stop_requested or context.stop_requested
        return outputs[-1]

    def run_step_fn(self, step_fn: Callable[[StepContext], Any]) -> Any:
        """Call ``step_fn(step_context)``: it may run the raw session and runs with hooks.

        Raises:
            ValueError: ``step_fn`` takes other arguments than ``step_context``.
            StopIteration: ``step_context.request_stop()`` was called.
        """
        names = tuple(inspect.signature(step_fn).parameters)
        if names not in (("step_context",), ("self", "step_context")):
            raise ValueError(
                "`step_fn` may either have one `step_context` argument, or `self` and "
                f"`step_context` arguments if it's an instance method. Got {names} instead."
            )
        if self._closed:
            raise RuntimeError("Run called after the session was closed.")
        try:
            return step_fn(StepContext(self._tf_sess, self.run))
        except (StopIteration, *_PREEMPTION_ERRORS):
            raise
        except Exception:
            if self._coord is not None:
                self._coord.raise_requested_exception()
            raise


class MonitoredSession(_MonitoredSession):
    """A session with hooks, queue runners and recovery: a run that fails with
    AbortedError or UnavailableError makes a new session and runs again.

    Args:
        session_creator: makes the session (default ``ChiefSessionCreator()``).
        hooks: ``SessionRunHook``s, called in this order.
        stop_grace_period_secs: how long ``close`` gives the queue runner threads to end.
    """

    def __init__(
        self,
        session_creator: SessionCreator | None = None,
        hooks: Sequence[SessionRunHook] | None = None,
        stop_grace_period_secs: float = 120,
    ) -> None:
        super().__init__(
            session_creator,
            hooks,
            should_recover=True,
            stop_grace_period_secs=stop_grace_period_secs,
        )


class SingularMonitoredSession(_MonitoredSession):
    """A chief's monitored session without recovery; ``raw_session()`` is the session it wraps."""

    def __init__(
        self,
        hooks: Sequence[SessionRunHook] | None = None,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: Any = None,
        checkpoint_dir: str | None = None,
        stop_grace_period_secs: float = 120,
        checkpoint_filename_with_path: str | None = None,
    ) -> None:
        creator = ChiefSessionCreator(
            scaffold=scaffold,
            master=master,
            config=config,
            checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
        )
        super().__init__(
            creator, hooks, should_recover=False, stop_grace_period_secs=stop_grace_period_secs
        )

    def raw_session(self) -> Any:
        return self._tf_sess


def MonitoredTrainingSession(  # noqa: N802 - TensorFlow's name
    master: str = "",
    is_chief: bool = True,
    checkpoint_dir: str | None = None,
    scaffold: Scaffold | None = None,
    hooks: Sequence[SessionRunHook] | None = None,
    chief_only_hooks: Sequence[SessionRunHook] | None = None,
    save_checkpoint_secs: Any = USE_DEFAULT,
    save_summaries_steps: Any = USE_DEFAULT,
    save_summaries_secs: Any = USE_DEFAULT,
    config: Any = None,
    stop_grace_period_secs: float = 120,
    log_step_count_steps: int | None = 100,
    max_wait_secs: float = 7200,
    save_checkpoint_steps: Any = USE_DEFAULT,
    summary_dir: str | None = None,
    save_graph_def: bool = True,
) -> MonitoredSession:
    """A ``MonitoredSession`` set up for training, as TensorFlow's.

    The chief (``is_chief``) restores ``checkpoint_dir``'s latest checkpoint
    or initializes the model, and gets ``chief_only_hooks``, then a
    ``StepCounterHook`` (every ``log_step_count_steps``) and a
    ``SummarySaverHook`` (every ``save_summaries_steps``, default 100) writing
    to ``summary_dir`` (default ``checkpoint_dir``), and a
    ``CheckpointSaverHook`` (every ``save_checkpoint_secs``, default 600)
    into ``checkpoint_dir``, then ``hooks``. Another worker waits (at most
    ``max_wait_secs``) for the chief to make the model ready, and runs ``hooks`` only.
    """
    if save_summaries_steps is USE_DEFAULT and save_summaries_secs is USE_DEFAULT:
        save_summaries_steps, save_summaries_secs = 100, None
    elif save_summaries_secs is USE_DEFAULT:
        save_summaries_secs = None
    elif save_summaries_steps is USE_DEFAULT:
        save_summaries_steps = None
    if save_checkpoint_steps is USE_DEFAULT and save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_steps, save_checkpoint_secs = None, 600
    elif save_checkpoint_secs is USE_DEFAULT:
        save_checkpoint_secs = None
    elif save_checkpoint_steps is USE_DEFAULT:
        save_checkpoint_steps = None
    scaffold = scaffold or Scaffold()
    if not is_chief:
        worker = WorkerSessionCreator(
            scaffold=scaffold, master=master, config=config, max_wait_secs=max_wait_secs
        )
        return MonitoredSession(
            session_creator=worker,
            hooks=list(hooks or []),
            stop_grace_period_secs=stop_grace_period_secs,
        )
    all_hooks: list[SessionRunHook] = list(chief_only_hooks or [])
    chief = ChiefSessionCreator(
        scaffold=scaffold, checkpoint_dir=checkpoint_dir, master=master, config=config
    )
    summary_dir = summary_dir or checkpoint_dir
    if summary_dir:
        if log_step_count_steps and log_step_count_steps > 0:
            all_hooks.append(
                StepCounterHook(output_dir=summary_dir, every_n_steps=log_step_count_steps)
            )
        if (save_summaries_steps and save_summaries_steps > 0) or (
            save_summaries_secs and save_summaries_secs > 0
        ):
            all_hooks.append(
                SummarySaverHook(
                    scaffold=scaffold,
                    save_steps=save_summaries_steps,
                    save_secs=save_summaries_secs,
                    output_dir=summary_dir,
                )
            )
    if checkpoint_dir and (
        (save_checkpoint_secs and save_checkpoint_secs > 0)
        or (save_checkpoint_steps and save_checkpoint_steps > 0)
    ):
        all_hooks.append(
            CheckpointSaverHook(
                checkpoint_dir,
                save_steps=save_checkpoint_steps,
                save_secs=save_checkpoint_secs,
                scaffold=scaffold,
                save_graph_def=save_graph_def,
            )
        )
    all_hooks.extend(hooks or [])
    return MonitoredSession(
        session_creator=chief, hooks=all_hooks, stop_grace_period_secs=stop_grace_period_secs
    )


__all__ = [
    "USE_DEFAULT",
    "SessionCreator",
    "ChiefSessionCreator",
    "WorkerSessionCreator",
    "StepContext",
    "MonitoredSession",
    "SingularMonitoredSession",
    "MonitoredTrainingSession",
]
