"""Two small runtimes for the conformance suite's plug-in point.

``runtime`` is tf_accum seen from outside: its raw ops under another module,
with opaque handles and results that are not numpy arrays (anything with
``__array__`` will do), and the compat classes. ``broken`` is the same raw ops
with one deliberate bug (AccumulatorNumAccumulated counts one too many) and no
compat classes, for the report's failures and its "n/a" column.
conformance/backends/plugin.py says what a runtime provides.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

import tf_accum
from tf_accum.resources import current_table


class Handle:
    """A handle the suite can only pass back."""

    def __init__(self, value: int) -> None:
        self.value = value


class ForeignTensor:
    """A result of another library's type: readable through ``__array__`` only."""

    def __init__(self, array: Any) -> None:
        self._array = np.asarray(array)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return self._array if dtype is None else self._array.astype(dtype)


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, Handle) else value


def _wrap(name: str, op: Callable[..., Any]) -> Callable[..., Any]:
    def call(**kwargs: Any) -> Any:
        result = op(**{key: _unwrap(value) for key, value in kwargs.items()})
        if name.endswith("ConditionalAccumulator"):
            return Handle(result)
        if name == "SparseAccumulatorTakeGradient":
            return tuple(ForeignTensor(part) for part in result)
        if isinstance(result, np.ndarray):
            return ForeignTensor(result)
        return result

    call.__name__ = name
    return call


def _num_waiting(handle: Handle) -> int:
    return current_table().lookup(handle.value).num_waiting()


RAW_OPS = {name: _wrap(name, getattr(tf_accum.raw_ops, name)) for name in tf_accum.raw_ops.__all__}

# IndexedSlices: a compat Variable's scatter_* takes only its own kind (cases V*)
runtime = SimpleNamespace(
    **RAW_OPS,
    compat=tf_accum.compat.v1,
    num_waiting=_num_waiting,
    IndexedSlices=tf_accum.IndexedSlices,
)


def _miscounted(**kwargs: Any) -> Any:
    return np.int32(RAW_OPS["AccumulatorNumAccumulated"](**kwargs) + 1)


broken = SimpleNamespace(**dict(RAW_OPS, AccumulatorNumAccumulated=_miscounted))
