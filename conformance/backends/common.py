"""Conversions both backends share."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from conformance.case_format import DType, Ref, Slices, Typed

_NUMPY = {"bfloat16": ml_dtypes.bfloat16}

CONSTRUCTORS = {
    "ConditionalAccumulator",
    "ResourceConditionalAccumulator",
    "SparseConditionalAccumulator",
    "FIFOQueueV2",
}
HANDLE_ARGS = {"handle", "resource"}
INT64_INPUTS = {"local_step", "new_global_step", "gradient_indices", "gradient_shape"}
INT32_INPUTS = {"num_required", "n"}
VALUE_INPUTS = {"gradient", "gradient_values"}


def typed_array(typed: Typed) -> np.ndarray:
    dtype = _NUMPY.get(typed.dtype, typed.dtype)
    array = np.asarray(typed.value, dtype=dtype)
    return array.reshape(typed.shape) if typed.shape is not None else array


def inferred_array(value: Any) -> np.ndarray:
    """A Python value as TensorFlow infers it: floats float32, ints int32."""
    if isinstance(value, Typed):
        return typed_array(value)
    array = np.asarray(value)
    if array.dtype == np.float64:
        return array.astype(np.float32)
    if array.dtype == np.int64:
        return array.astype(np.int32)
    return array


def wait_until_queued(
    task: Any, before: int, waiting: Callable[[], int | None], poll: float = 0.001
) -> None:
    """Wait (up to 10 seconds) until ``waiting()`` counts more takes than
    ``before``, says None (the accumulator is gone), or ``task`` has returned."""
    deadline = time.monotonic() + 10
    while not task.finished.is_set() and time.monotonic() < deadline:
        now = waiting()
        if now is None or now > before:
            return
        time.sleep(poll)


def convert_argument(
    value: Any,
    env: dict[str, Any],
    dtype: Callable[[str], Any],
    slices: Callable[..., Any],
) -> Any:
    """A case's argument as a backend passes it: arrays for typed values,
    ``dtype(name)`` for a dtype, the named result for a reference,
    ``slices(values=, indices=, dense_shape=)`` for indexed slices."""
    if isinstance(value, Typed):
        return typed_array(value)
    if isinstance(value, DType):
        return dtype(value.name)
    if isinstance(value, Ref):
        return value.resolve(env)
    if isinstance(value, Slices):
        return slices(
            values=convert_argument(value.values, env, dtype, slices),
            indices=convert_argument(value.indices, env, dtype, slices),
            dense_shape=convert_argument(value.dense_shape, env, dtype, slices),
        )
    if isinstance(value, list):
        return [convert_argument(v, env, dtype, slices) for v in value]
    return value
