"""Arithmetic in the accumulator's own dtype, shared by dense and sparse.

IEEE overflow and NaN are results, not errors, as in TensorFlow's kernels, so
floating-point warnings are silenced around the accumulator's own arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

try:
    # numpy >= 2 keeps its floating-point error state in a context variable;
    # setting it directly costs a third of entering np.errstate, which matters
    # on the per-apply path.
    from numpy._core.umath import _extobj_contextvar, _make_extobj

    _IGNORE = _make_extobj(all="ignore")

    @contextmanager
    def quiet_float_errors() -> Iterator[None]:
        token = _extobj_contextvar.set(_IGNORE)
        try:
            yield
        finally:
            _extobj_contextvar.reset(token)

    def _add_quietly(total: Array, gradient: Any) -> None:
        token = _extobj_contextvar.set(_IGNORE)
        try:
            np.add(total, gradient, total)
        finally:
            _extobj_contextvar.reset(token)

except ImportError:  # pragma: no cover - older numpy

    def quiet_float_errors() -> Any:
        return np.errstate(all="ignore")

    def _add_quietly(total: Array, gradient: Any) -> None:
        with np.errstate(all="ignore"):
            np.add(total, gradient, total)


def _add(total: Array, gradient: Any) -> None:
    np.add(total, gradient, total)


def in_place_adder(dtype: np.dtype[Any]) -> Callable[[Array, Any], None]:
    """``total += gradient`` for ``dtype``; integer arrays wrap without warnings already."""
    return _add if dtype.kind in "iu" else _add_quietly


def divide_in_place(total: Array, counts: Any) -> Array:
    """Divide ``total`` by ``counts`` (a scalar or per-row array), in its own dtype.

    Floating and complex types divide by the count converted to the dtype (so
    float16 rounds exactly as TensorFlow's kernels do). Integer types divide
    exactly and truncate toward zero; the quotient always fits the dtype because
    its magnitude never exceeds the total's.
    """
    dtype = total.dtype
    if dtype.kind not in "iu":
        with quiet_float_errors():
            np.divide(total, np.asarray(counts).astype(dtype), out=total)
        return total
    wide_type = np.int64 if dtype.kind == "i" else np.uint64
    wide = total.astype(wide_type)
    divisor = np.asarray(counts, dtype=wide_type)
    quotient = wide // divisor
    if dtype.kind == "i":
        # floor division rounds negative quotients down; truncation rounds up.
        quotient += (wide - quotient * divisor != 0) & (wide < 0)
    total[...] = quotient.astype(dtype)
    return total
