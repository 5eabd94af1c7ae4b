"""What the processes of the placement tests do: ``python -m tests.distributed.placement_roles ROLE JSON``.

Each process joins the cluster through TF_ACCUM_RAY_ADDRESS, places the
container as told (or not at all), prints one JSON line and exits.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

import tf_accum as tfa
from tf_accum import errors
from tf_accum.resources import current_table

raw = tfa.raw_ops
FAR_AHEAD = 2**40  # a local step no take's bump ever makes stale
SIZE = 3  # elements of a dense gradient; rows of a sparse one
WIDTH = 2  # columns of a sparse gradient


def dense(container: str, name: str) -> int:
    return raw.ResourceConditionalAccumulator(
        dtype=tfa.int64, shape=[SIZE], container=container, shared_name=name, reduction_type="SUM"
    )


def sparse(container: str, name: str) -> int:
    return raw.SparseConditionalAccumulator(
        dtype=tfa.int64,
        shape=[SIZE, WIDTH],
        container=container,
        shared_name=name,
        reduction_type="SUM",
    )


def _place(container: str, placement: dict[str, Any] | None) -> None:
    if placement is not None:
        tfa.distributed.place(container, **placement)


def hosts(container: str, names: list[str], placement: dict[str, Any] | None) -> dict[str, Any]:
    """Make ``names`` (dense, shared) in this order; say each one's host actor name."""
    try:
        _place(container, placement)
        handles = {name: dense(container, name) for name in names}
    except errors.OpError as error:
        return {"error": type(error).__name__, "message": error.message}
    table: Any = current_table()
    return {"hosts": {name: table.host_of(h)[0] for name, h in handles.items()}}


def apply(
    container: str, names: list[str], sparse_names: list[str], worker: int, steps: int,
    placement: dict[str, Any] | None,
) -> dict[str, Any]:  # fmt: skip
    """Apply ``steps`` gradients to every accumulator; dense ones get
    [worker, step, 1]; sparse ones row ``step % SIZE`` of [worker, step]."""
    _place(container, placement)
    dense_handles = [dense(container, name) for name in names]
    sparse_handles = [sparse(container, name) for name in sparse_names]
    for step in range(steps):
        for h in dense_handles:
            gradient = np.array([worker, step, 1], np.int64)
            raw.ResourceAccumulatorApplyGradient(handle=h, local_step=FAR_AHEAD, gradient=gradient)
        for h in sparse_handles:
            raw.SparseAccumulatorApplyGradient(
                handle=h,
                local_step=FAR_AHEAD,
                gradient_indices=np.array([step % SIZE], np.int64),
                gradient_values=np.array([[worker, step]], np.int64),
                gradient_shape=np.array([SIZE, WIDTH], np.int64),
                has_known_shape=True,
            )
    return {"applied": steps * (len(names) + len(sparse_names))}


ROLES = {f.__name__: f for f in (hosts, apply)}

if __name__ == "__main__":
    outcome = ROLES[sys.argv[1]](**json.loads(sys.argv[2]))
    print(json.dumps(outcome), flush=True)
