"""What the processes of the cross-process tests do: ``python -m tests.distributed.roles ROLE JSON``.

Each process joins the cluster through TF_ACCUM_RAY_ADDRESS (no code change),
prints one JSON line with its outcome, and exits.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import numpy as np

import tf_accum as tfa
from tf_accum import errors
from tf_accum.resources import current_table

raw = tfa.raw_ops
FAR_AHEAD = 2**40  # a local step no take's bump ever makes stale


def shared(name: str, size: int = 2, dtype: Any = tfa.int64) -> int:
    return raw.ResourceConditionalAccumulator(
        dtype=dtype, shape=[size], shared_name=name, reduction_type="SUM"
    )


def worker(name: str, first: int, count: int) -> dict[str, Any]:
    """Apply gradients [v, 1] for v in first .. first+count-1."""
    h = shared(name)
    for v in range(first, first + count):
        raw.ResourceAccumulatorApplyGradient(
            handle=h, local_step=FAR_AHEAD, gradient=np.array([v, 1], np.int64)
        )
    return {"applied": count}


def chief(name: str, expected: int, num_required: int) -> dict[str, Any]:
    """Take rounds until ``expected`` gradients came out; report the totals."""
    h = shared(name)
    total = count = rounds = 0
    while count < expected:
        try:
            result = raw.ResourceAccumulatorTakeGradient(
                handle=h, num_required=num_required, dtype=tfa.int64, timeout=0.5
            )
        except errors.DeadlineExceededError:
            rest = int(raw.ResourceAccumulatorNumAccumulated(handle=h))
            if rest and count + rest == expected:
                num_required = rest  # the workers' last gradients (not a worker's pause)
            continue
        total += int(result[0])
        count += int(result[1])
        rounds += 1
    return {"total": total, "count": count, "rounds": rounds}


def take(name: str, num_required: int, timeout: float | None = None) -> dict[str, Any]:
    h = shared(name)
    try:
        result = raw.ResourceAccumulatorTakeGradient(
            handle=h, num_required=num_required, dtype=tfa.int64, timeout=timeout
        )
    except errors.OpError as error:
        return {"error": type(error).__name__, "message": error.message}
    return {"value": result.tolist()}


def apply(name: str, values: list[int]) -> dict[str, Any]:
    h = shared(name)
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=FAR_AHEAD, gradient=values)
    return {"count": int(raw.ResourceAccumulatorNumAccumulated(handle=h))}


def destroy(name: str) -> dict[str, Any]:
    h = shared(name)
    raw.DestroyResourceOp(resource=h, ignore_lookup_error=False)
    return {"destroyed": True}


def create(name: str, dtype: str) -> dict[str, Any]:
    try:
        shared(name, dtype=tfa.as_dtype(dtype))
    except errors.OpError as error:
        return {"error": type(error).__name__, "message": error.message}
    return {"created": True}


def apply_forever(name: str, size: int) -> dict[str, Any]:
    """Apply all-ones gradients of ``size`` elements until killed."""
    h = shared(name, size=size, dtype=tfa.float32)
    ones = np.ones(size, np.float32)
    while True:
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=FAR_AHEAD, gradient=ones)


def connect_and_count(address: str, name: str) -> dict[str, Any]:
    """Attach with ``connect`` (before any table is made) and read a shared accumulator."""
    table = tfa.distributed.connect(address)
    found = current_table() is table
    return {"installed": found, "count": int(raw.AccumulatorNumAccumulated(handle=shared(name)))}


def hold_private(size: int) -> dict[str, Any]:
    """Make a private accumulator, apply one large gradient, and wait to be killed."""
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[size])
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=np.ones(size, np.float32))
    threading.Event().wait()
    return {}


ROLES = {
    f.__name__: f
    for f in (
        worker,
        chief,
        take,
        apply,
        destroy,
        create,
        apply_forever,
        hold_private,
        connect_and_count,
    )
}

if __name__ == "__main__":
    outcome = ROLES[sys.argv[1]](**json.loads(sys.argv[2]))
    print(json.dumps(outcome), flush=True)
