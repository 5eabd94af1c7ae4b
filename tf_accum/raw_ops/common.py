"""Ops that work on every kind of accumulator: count, global step, destroy."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.attempts import Cancellation, TakeAttempt
from tf_accum.accumulators.base import AccumulatorBase
from tf_accum.raw_ops import _lookup
from tf_accum.raw_ops.arguments import handle_of, positive_num_required, scalar_int
from tf_accum.raw_ops.keyword_only import raw_op
from tf_accum.raw_ops.timeout import check_timeout
from tf_accum.resources import current_table

INT32_MAX = 2**31 - 1


def num_accumulated(op_name: str, handle: Any) -> np.int32:
    count: int = _lookup.accumulator(handle, op_name).num_accumulated()
    # the op's output is an int32; a round past 2**31 - 1 gradients reads as
    # that (saturates) while the accumulator keeps the exact count for MEAN
    result: np.int32 = np.int32(min(count, INT32_MAX))
    return result


def set_global_step(op_name: str, handle: Any, new_global_step: Any) -> None:
    acc = _lookup.accumulator(handle, op_name)
    acc.set_global_step(scalar_int(new_global_step, "new_global_step", "int64"))


@raw_op
def AccumulatorNumAccumulated(*, handle: Any, name: str | None = None) -> np.int32:
    """The ref-handle spelling of :func:`ResourceAccumulatorNumAccumulated`.

    Same arguments, result and errors; any accumulator handle works
    (docs/departures.md T14).
    """
    return num_accumulated("AccumulatorNumAccumulated", handle)


@raw_op
def ResourceAccumulatorNumAccumulated(*, handle: Any, name: str | None = None) -> np.int32:
    """The number of gradients accepted since the last completed take.

    Args:
        handle: an accumulator handle (dense or sparse).

    Returns:
        numpy.int32 scalar. A round of more than 2**31 - 1 gradients reads as
        2**31 - 1 (the take still divides a MEAN by the exact count).

    Raises:
        NotFoundError: the handle was destroyed.
    """
    return num_accumulated("ResourceAccumulatorNumAccumulated", handle)


@raw_op
def AccumulatorSetGlobalStep(*, handle: Any, new_global_step: Any, name: str | None = None) -> None:
    """The ref-handle spelling of :func:`ResourceAccumulatorSetGlobalStep`.

    Same arguments, result and errors; any accumulator handle works
    (docs/departures.md T14).
    """
    set_global_step("AccumulatorSetGlobalStep", handle, new_global_step)


@raw_op
def ResourceAccumulatorSetGlobalStep(
    *, handle: Any, new_global_step: Any, name: str | None = None
) -> None:
    """Set the accumulator's global step.

    Gradients with a local_step below it are dropped from then on. A value
    lower than the current step is applied too (with a logged warning).
    Accumulated gradients are kept and waiting takes are not woken.

    Args:
        handle: an accumulator handle (dense or sparse).
        new_global_step: int64 scalar.

    Returns:
        None.

    Raises:
        NotFoundError: the handle was destroyed.
        InvalidArgumentError: new_global_step is not a scalar.
        TypeError: new_global_step is a float.

    Differs from TensorFlow (docs/departures.md T8, T9): a non-scalar value
    changes nothing, and the message names new_global_step (TensorFlow names
    num_required, and sets the step anyway when the value has one element).
    """
    set_global_step("ResourceAccumulatorSetGlobalStep", handle, new_global_step)


@raw_op
def DestroyResourceOp(
    *, resource: Any, ignore_lookup_error: bool = True, name: str | None = None
) -> None:
    """Destroy an accumulator (dense or sparse).

    Every take waiting on it fails with CancelledError; any later use of the
    handle is NotFoundError. A shared name becomes free: the next constructor
    call with it makes a fresh accumulator.

    Args:
        resource: the handle.
        ignore_lookup_error: when False, an unknown or already destroyed handle
            is NotFoundError; when True it is ignored.

    Returns:
        None.

    Differs from TensorFlow (docs/departures.md T3, T14): waiting takes are
    cancelled (TensorFlow only cancels them when the session closes); it
    accepts handles of every constructor.
    """
    current_table().destroy(handle_of(resource), bool(ignore_lookup_error))


def accumulator_stats(handle: Any) -> dict[str, int | None]:
    """Statistics of an accumulator (dense or sparse), read in one consistent snapshot.

    Not a TensorFlow op. Reading takes the accumulator's lock only for as long
    as it takes to copy the counters, so it never holds up an apply or a take.

    Args:
        handle: an accumulator handle.

    Returns:
        A dict of ints (and None):

        - ``accepted``: gradients merged into a round;
        - ``stale``: gradients dropped because their local_step was below the
          global step;
        - ``rejected``: gradients the accumulator refused as invalid (shape,
          rank, index range, a shape differing from the round's), whether it
          found that before or after taking its lock. Arguments the op refuses
          before they reach the accumulator (a dtype other than the
          accumulator's, a non-scalar or non-integer local_step, non-integer
          indices) are not counted;
        - ``takes_served``: takes completed (each consumed one round);
        - ``takes_timed_out``: takes withdrawn when their ``timeout`` expired;
        - ``takes_cancelled``: takes cancelled from outside (a session closing,
          a run's deadline), by destroying the accumulator, or given back by
          a take call that failed with another error after it was served;
        - ``takes_interrupted``: takes withdrawn by an interrupt (Ctrl-C);
        - ``waiting``: takes waiting now;
        - ``head_num_required``: the num_required of the take at the front of
          the queue (the one every later take waits behind), None when nobody waits;
        - ``num_accumulated``: gradients in the current round;
        - ``global_step``: the current global step.

        Counters are Python ints and never overflow.

    Raises:
        NotFoundError: the handle was destroyed.
        InvalidArgumentError: the handle is a queue's.
        TypeError: not an integer handle.
    """
    stats: dict[str, int | None] = _lookup.accumulator(handle, "accumulator_stats").stats()
    return stats


def resource_name(handle: Any) -> str:
    """The name part of a live accumulator's ``container/name`` ("" if it is gone).

    Not an op: the compat classes use it for ``name`` when given a bare handle.
    """
    try:
        label = current_table().lookup(handle_of(handle)).label
    except errors.NotFoundError:
        return ""
    return label.split("/", 1)[-1]


def destroy_when_collected(owner: Any, handle: int) -> weakref.finalize[[int], None]:
    """Destroy ``handle`` when ``owner`` is garbage-collected (or at exit).

    Not an op: the compat classes tie a private accumulator's life to the
    object that made it. The collector may run the finalizer inside any
    operation, with the table's or an accumulator's lock held; so it only
    queues the handle, and the table (the one current now) destroys it at its
    next operation.
    """
    return weakref.finalize(owner, current_table().destroy_soon, handle)


# The take ops: the kind of accumulator each takes from, and its outputs as its
# signature message spells them.
_TAKES = {
    "AccumulatorTakeGradient": ("dense", "{}"),
    "ResourceAccumulatorTakeGradient": ("dense", "{}"),
    "SparseAccumulatorTakeGradient": ("sparse", "int64, {}, int64"),
}


def take_attempt(
    op_type: str,
    callback: Callable[[], Any],
    cancellation: Cancellation | None,
    *,
    handle: Any,
    num_required: Any,
    dtype: Any,
    timeout: Any = None,
    name: str | None = None,
) -> tuple[AccumulatorBase[Any], TakeAttempt[Any]]:
    """The take op ``op_type`` queued as a take attempt instead of waited for.

    Not a TensorFlow op: for a caller that must not block (a host holding its lock).
    The arguments are checked as the op checks them; the take is then queued
    with ``Rounds.try_take(num_required, callback, cancellation)``. The
    caller waits for ``callback``, then collects the attempt (its result is
    the op's) or cancels it; ``timeout`` is checked only (the caller keeps
    the time).

    Raises:
        what the op raises before it would wait.
    """
    kind, outputs = _TAKES[op_type]
    acc = _lookup.accumulator(handle, op_type, kind)
    _lookup.check_take_dtype(acc, dtype, op_type, outputs)
    required = positive_num_required(num_required)
    check_timeout(timeout)
    rounds = cast(AccumulatorBase[Any], acc)  # (a local table's accumulators are)
    return rounds, rounds.try_take(required, callback, cancellation)
