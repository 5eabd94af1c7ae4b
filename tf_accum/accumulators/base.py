"""The state machine every accumulator shares: step, counter and waiting takes.

Dense and sparse accumulators differ only in how a gradient is validated and
merged and how a round's result is computed; everything about *when* a take
completes lives here.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.cancellation import Cancellation
from tf_accum.accumulators.spec import REDUCTION_TYPES, AccumulatorSpec
from tf_accum.resources.errors import missing_resource_error

logger = logging.getLogger("tf_accum")

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

__all__ = ["REDUCTION_TYPES", "AccumulatorBase", "AccumulatorSpec", "missing_resource_error"]

Round = TypeVar("Round")


class _TakeAttempt(Generic[Round]):
    """A take waiting in the queue; it owns a condition on the accumulator's lock."""

    __slots__ = ("num_required", "ready", "done", "outcome", "count", "error")

    def __init__(self, num_required: int, lock: threading.Lock) -> None:
        self.num_required = num_required
        self.ready = threading.Condition(lock)
        self.done = False
        self.outcome: Round | None = None
        self.count = 0
        self.error: errors.OpError | None = None


class AccumulatorBase(ABC, Generic[Round]):
    """Global step, gradient counter and the FIFO queue of waiting takes.

    Invariant guarded by ``_lock``: ``_count`` is the number of gradients merged
    into the subclass's round state since the last completed take; the front of
    ``_waiting`` has ``num_required > _count`` (a flush completes it otherwise);
    ``_global_step`` is a wrapping int64. Methods named ``*_locked`` run with
    ``_lock`` held.
    """

    kind: ClassVar[str]

    def __init__(self, spec: AccumulatorSpec, label: str) -> None:
        self.spec = spec
        self.dtype = spec.dtype
        self.numpy_dtype = spec.dtype.numpy_dtype
        self.shape = spec.shape
        self.reduction_type = spec.reduction_type
        self.label = label
        self._lock = threading.Lock()
        self._global_step = 0
        self._count = 0
        self._waiting: collections.deque[_TakeAttempt[Round]] = collections.deque()
        self._closed = False

    # --- subclass hooks -------------------------------------------------------

    @abstractmethod
    def _detach_round_locked(self) -> Round:
        """Hand over the round's accumulated state and start an empty round."""

    @abstractmethod
    def _finish_round(self, state: Round, count: int) -> Any:
        """Turn a detached round into the take's result (runs without the lock)."""

    # --- shared operations ----------------------------------------------------

    def _check_open_locked(self) -> None:
        if self._closed:
            raise missing_resource_error(self.label)

    def num_accumulated(self) -> int:
        """The number of gradients accepted since the last completed take."""
        with self._lock:
            self._check_open_locked()
            return self._count

    def num_waiting(self) -> int:
        """The number of takes waiting in the queue (for tests and diagnostics)."""
        with self._lock:
            return len(self._waiting)

    def global_step(self) -> int:
        """The current global step."""
        with self._lock:
            self._check_open_locked()
            return self._global_step

    def set_global_step(self, new_global_step: int) -> None:
        """Set the global step; a lower value is applied too, with a warning.

        Waiting takes are not woken: their condition depends only on the counter.
        """
        with self._lock:
            self._check_open_locked()
            previous, self._global_step = self._global_step, new_global_step
        if new_global_step < previous:
            # logged outside the lock: handlers are user code
            logger.warning(
                "Attempt to set the global step of %s to a smaller value: %d -> %d",
                self.label,
                previous,
                new_global_step,
            )

    def apply_dense(
        self, local_step: int, gradient: np.ndarray[Any, Any], owned: bool = False
    ) -> None:
        """Merge a dense gradient; only dense accumulators implement it."""
        raise TypeError(f"{self.label} is a {self.kind} accumulator")

    def apply_sparse(
        self,
        local_step: int,
        indices: np.ndarray[Any, Any],
        values: np.ndarray[Any, Any],
        gradient_shape: np.ndarray[Any, Any] | None,
        owned: bool = False,
    ) -> None:
        """Merge a sparse gradient; only sparse accumulators implement it."""
        raise TypeError(f"{self.label} is a {self.kind} accumulator")

    def take(
        self,
        num_required: int,
        timeout: float | None = None,
        cancellation: Cancellation | None = None,
    ) -> Any:
        """Wait until at least ``num_required`` gradients are in, then take them all.

        Takes are served in arrival order; a take completes when the counter
        reaches its ``num_required`` while it is at the front of the queue. On
        completion the global step goes up by one and the counter goes to 0.

        Raises:
            DeadlineExceededError: ``timeout`` seconds passed first; the attempt
                is withdrawn and consumes nothing.
            CancelledError: the accumulator was destroyed while waiting.
            NotFoundError: the accumulator was already destroyed.
            whatever ``cancellation`` was cancelled with (a run's deadline, a
                closing session): the attempt is withdrawn and consumes nothing.
        """
        with self._lock:
            self._check_open_locked()
            if not self._waiting and self._count >= num_required:
                count = self._count
                state = self._complete_round_locked()
            else:
                state, count = self._wait_locked(num_required, timeout, cancellation)
        return self._finish_round(state, count)

    def _wait_locked(
        self, num_required: int, timeout: float | None, cancellation: Cancellation | None
    ) -> tuple[Round, int]:
        attempt: _TakeAttempt[Round] = _TakeAttempt(num_required, self._lock)
        key = None
        if cancellation is not None:
            key = cancellation.register(lambda error: self._cancel_attempt(attempt, error))
            if key is None:
                assert cancellation.error is not None
                raise _copy_error(cancellation.error)
        self._waiting.append(attempt)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not attempt.done and attempt.error is None:
                if deadline is None:
                    attempt.ready.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise errors.DeadlineExceededError(
                        None, None, "Timed out waiting for notification"
                    )
                attempt.ready.wait(remaining)
        except BaseException:
            # A timed-out or interrupted take must not swallow later gradients:
            # withdraw it and let whoever is behind it try.
            if not attempt.done and attempt in self._waiting:
                self._waiting.remove(attempt)
                self._flush_locked()
            if not attempt.done:
                raise
        finally:
            if cancellation is not None:
                cancellation.unregister(key)
        if attempt.error is not None:
            raise attempt.error
        return attempt.outcome, attempt.count  # type: ignore[return-value]

    def _cancel_attempt(self, attempt: _TakeAttempt[Round], error: errors.OpError) -> None:
        """Withdraw a waiting take from outside (runs without the lock held)."""
        with self._lock:
            if attempt.done or attempt.error is not None:
                return
            attempt.error = _copy_error(error)
            if attempt in self._waiting:
                self._waiting.remove(attempt)
                self._flush_locked()
            attempt.ready.notify()

    def _complete_round_locked(self) -> Round:
        step = self._global_step + 1
        self._global_step = INT64_MIN if step > INT64_MAX else step
        self._count = 0
        return self._detach_round_locked()

    def _flush_locked(self) -> None:
        """Complete waiting takes from the front for as long as the counter allows."""
        while self._waiting and self._count >= self._waiting[0].num_required:
            attempt = self._waiting.popleft()
            attempt.count = self._count
            attempt.outcome = self._complete_round_locked()
            attempt.done = True
            attempt.ready.notify()

    def _accepted_locked(self) -> None:
        """Count a merged gradient and serve whoever waits."""
        self._count += 1
        if self._waiting:
            self._flush_locked()

    def close(self) -> None:
        """Destroy: every waiting take fails with CancelledError; later use is NotFound."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._count = 0
            self._detach_round_locked()
            while self._waiting:
                attempt = self._waiting.popleft()
                attempt.error = errors.CancelledError(
                    None, None, "TakeGrad operation was cancelled"
                )
                attempt.ready.notify()

    @property
    def closed(self) -> bool:
        return self._closed


def _copy_error(error: errors.OpError) -> errors.OpError:
    """A fresh exception per raiser: one instance raised in several threads shares a traceback."""
    copy: errors.OpError = type(error)(error.node_def, error.op, error.message)  # type: ignore[call-arg]
    return copy
