"""The accumulator every kind shares: its declared spec, its statistics and
the operations on its step and counter; rounds and takes come from
tf_accum/accumulators/rounds.py.

Dense and sparse accumulators differ only in how a gradient is validated and
merged and how a round's result is computed; everything about *when* a take
completes lives there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.missing import missing_resource_error
from tf_accum.accumulators.rounds import Round, Rounds
from tf_accum.accumulators.spec import REDUCTION_TYPES, AccumulatorSpec

logger = logging.getLogger("tf_accum")

# The keys of stats(), in the order they are documented.
STATS_KEYS = (
    "accepted",
    "stale",
    "rejected",
    "takes_served",
    "takes_timed_out",
    "takes_cancelled",
    "takes_interrupted",
    "waiting",
    "head_num_required",
    "num_accumulated",
    "global_step",
)

__all__ = [
    "REDUCTION_TYPES",
    "STATS_KEYS",
    "AccumulatorBase",
    "AccumulatorSpec",
    "missing_resource_error",
]

_APPLY_METHODS = ("apply", "apply_dense", "apply_sparse")


class AccumulatorBase(Rounds[Round]):
    """An accumulator of a declared spec: its rounds and takes (Rounds), its statistics, and the applies its kind implements; ``kind`` names it."""

    kind: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # every leaf's apply counts the gradients it refuses
        for name in _APPLY_METHODS:
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, "_counts_rejections", False):
                setattr(cls, name, _counting_rejections(method))

    def __init__(self, spec: AccumulatorSpec, label: str) -> None:
        super().__init__(label)
        self.spec = spec
        self.dtype = spec.dtype
        self.numpy_dtype = spec.dtype.numpy_dtype
        self.shape = spec.shape
        self.reduction_type = spec.reduction_type
        self._n_stale = 0
        self._n_rejected = 0

    def num_accumulated(self) -> int:
        """The number of gradients accepted since the last completed take."""
        with self._lock:
            self._check_open_locked()
            return self._count

    def num_waiting(self) -> int:
        """The number of takes waiting in the queue (for tests and diagnostics)."""
        with self._lock:
            return len(self._queued_locked())

    def global_step(self) -> int:
        """The current global step."""
        with self._lock:
            self._check_open_locked()
            return self._global_step

    def stats(self) -> dict[str, int | None]:
        """A consistent snapshot of the accumulator's counters (see ``STATS_KEYS``).

        ``accepted``, ``stale`` and ``rejected`` count gradients: merged, dropped
        as stale, refused as invalid by the accumulator (after or before its
        lock). ``takes_served``, ``takes_timed_out``, ``takes_cancelled``
        (destroy or an outside cancellation) and ``takes_interrupted`` count
        takes; ``waiting`` is the queue's length now and ``head_num_required``
        the front take's ``num_required`` (None when nobody waits). All are
        read under the lock in one go, so they agree with one another.

        Raises:
            NotFoundError: the accumulator was destroyed.
        """
        with self._lock:
            self._check_open_locked()
            self._settle_locked()
            waiting = self._queued_locked()
            head = waiting[0].num_required if waiting else None
            return {
                "accepted": self._n_accepted,
                "stale": self._n_stale,
                "rejected": self._n_rejected,
                "takes_served": self._served - len(self._given_back),
                "takes_timed_out": self._n_timed_out,
                "takes_cancelled": self._n_cancelled,
                "takes_interrupted": self._n_interrupted,
                "waiting": len(waiting),
                "head_num_required": head,
                "num_accumulated": self._count,
                "global_step": self._global_step,
            }

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

    def _stale_locked(self) -> None:
        """Count a gradient dropped as stale."""
        self._n_stale += 1


def _counting_rejections(apply: Callable[..., None]) -> Callable[..., None]:
    """Count the gradients a leaf's apply refuses as invalid."""

    def counted(self: AccumulatorBase[Any], *args: Any, **kwargs: Any) -> None:
        try:
            apply(self, *args, **kwargs)
        except errors.InvalidArgumentError:
            with self._lock:
                self._n_rejected += 1
            raise

    counted.__doc__ = apply.__doc__
    counted.__name__ = apply.__name__
    counted._counts_rejections = True  # type: ignore[attr-defined]
    return counted
