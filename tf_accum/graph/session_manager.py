"""``tf.train.SessionManager``: make a session whose model is ready, by initializing,
restoring or waiting.

The chief calls ``prepare_session``: it restores the latest checkpoint if
there is one, otherwise runs the init op. Other workers call
``wait_for_session``: it makes sessions until the model they see is ready
(``ready_op`` reports nothing uninitialized), that is until the chief has
initialized the variables they share on the ps tasks. Each try that finds
the model not ready is logged with what is still uninitialized and since
when, so that a worker whose chief never starts does not wait in silence.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.graph import mode
from tf_accum.graph.checkpoint_management import get_checkpoint_state
from tf_accum.graph.session import Session

_log = logging.getLogger("tf_accum")


def _name_of(op: Any) -> str:
    return str(getattr(op, "name", op))


def _ready(op: Any, sess: Any, what: str) -> tuple[bool, str | None]:
    """Whether ``op`` (a report of what is uninitialized) finds nothing, and if not, what."""
    if op is None:
        return True, None
    try:
        value = sess.run(op)
    except errors.FailedPreconditionError as e:
        if "uninitialized" not in str(e) and "Uninitialized" not in str(e):
            _log.warning("%s : error [%s]", what, e)
            raise
        return False, str(e)
    if value is None:
        return True, None
    value = np.asarray(value)
    if value.dtype == np.int32 or value.size == 0:
        return True, None
    names = ", ".join(v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in value.flat)
    return False, "Variables not initialized: " + names


class SessionManager:
    """Makes sessions whose model is initialized, restored, or made ready by another process.

    Args:
        local_init_op: run in each new session once ``ready_for_local_init_op`` passes.
        ready_op: a string tensor of what is uninitialized (empty: ready).
        ready_for_local_init_op: the check that must pass before ``local_init_op``.
        graph: the graph (default: the default graph).
        recovery_wait_secs: how long ``wait_for_session`` (and a wait for a
            checkpoint) sleeps between tries.
        local_init_run_options: the ``RunOptions`` of ``local_init_op``'s run.
        local_init_feed_dict: its feeds.

    Raises:
        ValueError: ``ready_for_local_init_op`` without ``local_init_op``.
    """

    def __init__(
        self,
        local_init_op: Any = None,
        ready_op: Any = None,
        ready_for_local_init_op: Any = None,
        graph: Any = None,
        recovery_wait_secs: float = 30,
        local_init_run_options: Any = None,
        local_init_feed_dict: Any = None,
    ) -> None:
        self._graph = graph if graph is not None else mode.get_default_graph()
        self._local_init_op = local_init_op
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._recovery_wait_secs = recovery_wait_secs
        self._local_init_run_options = local_init_run_options
        self._local_init_feed_dict = local_init_feed_dict
        self._target: str | None = None
        if ready_for_local_init_op is not None and local_init_op is None:
            raise ValueError(
                "If you pass a ready_for_local_init_op you must also pass a local_init_op "
                f", ready_for_local_init_op [{ready_for_local_init_op}]"
            )

    def _restore_checkpoint(
        self,
        master: str,
        saver: Any = None,
        checkpoint_dir: str | None = None,
        checkpoint_filename_with_path: str | None = None,
        wait_for_checkpoint: bool = False,
        max_wait_secs: float = 7200,
        config: Any = None,
    ) -> tuple[Session, bool]:
        self._target = master
        if checkpoint_dir and checkpoint_filename_with_path:
            raise ValueError(
                "Can not provide both checkpoint_dir and checkpoint_filename_with_path."
            )
        sess = Session(master, graph=self._graph, config=config)
        if not saver or not (checkpoint_dir or checkpoint_filename_with_path):
            return sess, False
        if checkpoint_filename_with_path:
            saver.restore(sess, checkpoint_filename_with_path)
            return sess, True
        waited = 0.0
        state = get_checkpoint_state(checkpoint_dir)
        while not state or not state.model_checkpoint_path:
            if not wait_for_checkpoint or waited >= max_wait_secs:
                return sess, False
            _log.info(
                "Waiting for a checkpoint in %s (waited %.0f of %.0f secs).",
                checkpoint_dir,
                waited,
                max_wait_secs,
            )
            time.sleep(self._recovery_wait_secs)
            waited += self._recovery_wait_secs
            state = get_checkpoint_state(checkpoint_dir)
        saver.restore(sess, state.model_checkpoint_path)
        saver.recover_last_checkpoints(list(state.all_model_checkpoint_paths))
        return sess, True

    def prepare_session(
        self,
        master: str,
        init_op: Any = None,
        saver: Any = None,
        checkpoint_dir: str | None = None,
        checkpoint_filename_with_path: str | None = None,
        wait_for_checkpoint: bool = False,
        max_wait_secs: float = 7200,
        config: Any = None,
        init_feed_dict: Any = None,
        init_fn: Any = None,
    ) -> Session:
        """A session on ``master`` whose model is restored from the latest checkpoint
        (of ``checkpoint_dir``, or ``checkpoint_filename_with_path``) or, with
        none, initialized by ``init_op`` and ``init_fn(session)``; then
        ``local_init_op`` runs.

        Raises:
            RuntimeError: nothing to initialize with, or the model is still not
                ready afterwards (naming what is uninitialized).
            ValueError: both ``checkpoint_dir`` and ``checkpoint_filename_with_path``.
        """
        sess, restored = self._restore_checkpoint(
            master,
            saver,
            checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
            wait_for_checkpoint=wait_for_checkpoint,
            max_wait_secs=max_wait_secs,
            config=config,
        )
        if not restored:
            if init_op is None and not init_fn and self._local_init_op is None:
                sess.close()
                raise RuntimeError(
                    "Model is not initialized and no init_op or init_fn or local_init_op was given"
                )
            if init_op is not None:
                sess.run(init_op, feed_dict=init_feed_dict)
            if init_fn:
                init_fn(sess)
        ok, message = self._try_run_local_init_op(sess)
        if not ok:
            sess.close()
            raise RuntimeError(
                "Init operations did not make model ready for local_init.  "
                f"Init op: {_name_of(init_op)}, init fn: {init_fn}, error: {message}"
            )
        ok, message = self._model_ready(sess)
        if not ok:
            sess.close()
            raise RuntimeError(
                "Init operations did not make model ready.  "
                f"Init op: {_name_of(init_op)}, init fn: {init_fn}, "
                f"local_init_op: {self._local_init_op}, error: {message}"
            )
        return sess

    def recover_session(
        self,
        master: str,
        saver: Any = None,
        checkpoint_dir: str | None = None,
        checkpoint_filename_with_path: str | None = None,
        wait_for_checkpoint: bool = False,
        max_wait_secs: float = 7200,
        config: Any = None,
    ) -> tuple[Session, bool]:
        """A session on ``master``, restored from a checkpoint if there is one.

        Returns:
            ``(session, initialized)``: ``initialized`` is True when a checkpoint
            was restored and made the model ready; ``local_init_op`` runs either way
            when it can.
        """
        sess, restored = self._restore_checkpoint(
            master,
            saver,
            checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
            wait_for_checkpoint=wait_for_checkpoint,
            max_wait_secs=max_wait_secs,
            config=config,
        )
        local_ok, message = self._try_run_local_init_op(sess)
        if not restored:
            return sess, False
        source = checkpoint_dir or checkpoint_filename_with_path
        if not local_ok:
            _log.info(
                "Restoring model from %s did not make model ready for local init: %s",
                source,
                message,
            )
            return sess, False
        ready, message = self._model_ready(sess)
        if not ready:
            _log.info("Restoring model from %s did not make model ready: %s", source, message)
            return sess, False
        _log.info("Restored model from %s", source)
        return sess, True

    def wait_for_session(
        self, master: str, config: Any = None, max_wait_secs: float | None = float("inf")
    ) -> Session:
        """A session on ``master`` once another process (the chief) has made the model ready.

        Tries every ``recovery_wait_secs``: a new session runs ``local_init_op``
        when ``ready_for_local_init_op`` passes, then checks ``ready_op``. Each
        try that is not ready is logged (INFO) with what is still uninitialized
        and how long this has waited.

        Raises:
            DeadlineExceededError: not ready within ``max_wait_secs``.
        """
        self._target = master
        limit = float("inf") if max_wait_secs is None else float(max_wait_secs)
        started = time.monotonic()
        started_wall = time.strftime("%H:%M:%S")
        while True:
            sess = Session(master, graph=self._graph, config=config)
            ready_message: str | None = None
            local_ok, local_message = self._try_run_local_init_op(sess)
            if local_ok:
                ready, ready_message = self._model_ready(sess)
                if ready:
                    return sess
            self._safe_close(sess)
            waited = time.monotonic() - started
            if limit - waited - self._recovery_wait_secs < 0:
                raise errors.DeadlineExceededError(
                    None,
                    None,
                    f"Session was not ready after waiting {limit:.0f} secs. "
                    f"Ready_for_local_init_op: {local_message}, ready: {ready_message}",
                )
            _log.info(
                "Waiting for model to be ready (initialized by the chief) since %s, "
                "%.0f secs so far.  Ready_for_local_init_op:  %s, ready: %s",
                started_wall,
                waited,
                local_message,
                ready_message,
            )
            time.sleep(self._recovery_wait_secs)

    def _safe_close(self, sess: Session) -> None:
        try:
            sess.close()
        except Exception:  # noqa: BLE001 - a failing close must not hide why we retry
            _log.debug("closing a session that was not ready failed", exc_info=True)

    def _model_ready(self, sess: Any) -> tuple[bool, str | None]:
        return _ready(self._ready_op, sess, "Model not ready")

    def _model_ready_for_local_init(self, sess: Any) -> tuple[bool, str | None]:
        return _ready(self._ready_for_local_init_op, sess, "Model not ready for local init")

    def _try_run_local_init_op(self, sess: Any) -> tuple[bool, str | None]:
        if self._local_init_op is None:
            return True, None
        ready, message = self._model_ready_for_local_init(sess)
        if not ready:
            return False, message
        _log.info("Running local_init_op.")
        sess.run(
            self._local_init_op,
            feed_dict=self._local_init_feed_dict,
            options=self._local_init_run_options,
        )
        _log.info("Done running local_init_op.")
        return True, None


__all__ = ["SessionManager"]
