"""Arithmetic whose IEEE overflow and NaN are results, not warnings.

TensorFlow's kernels give an infinity or a NaN where numpy would warn (or
raise, under ``np.seterr(all="raise")``), so the accumulators' own arithmetic
runs with numpy's floating-point errors ignored, and leaves the caller's error
state as it was.

Two ways, one per kind of caller:

- :func:`ignoring_float_errors` runs one numpy call in a context of the
  calling thread's own in which numpy ignores floating-point errors. Since numpy 2 the error state
  is a context variable (``np.seterr`` sets it in the running context only),
  so that context is made once per thread and entering it costs less than
  entering ``np.errstate``, which matters on a one-element apply. On older
  numpy it is ``np.errstate``.
- :func:`float_errors_ignored` is ``np.errstate(all="ignore")``, for blocks of
  Python code around large work, where its cost does not show.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

# numpy 2 keeps the error state in a context variable; numpy 1 in a
# thread's state, where setting it in a separate context would set it for good.
CONTEXT_LOCAL_ERRORS = np.lib.NumpyVersion(np.__version__) >= "2.0.0"

_threads = threading.local()


def _context_ignoring_float_errors() -> contextvars.Context:
    """A new, empty context in which numpy ignores floating-point errors."""
    context = contextvars.Context()
    context.run(np.seterr, all="ignore")
    return context


def runner_ignoring_float_errors() -> Callable[..., Any]:
    """``run(fn, *args, **kwargs)``: ``fn`` called with numpy's floating-point
    errors ignored, for the calling thread only (a context is entered by one
    thread at a time, and not again from inside ``fn``)."""
    try:
        run: Callable[..., Any] = _threads.run
    except AttributeError:
        run = _threads.run = _context_ignoring_float_errors().run
    return run


def ignoring_float_errors(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` (numpy work, which must not call back into
    tf_accum) with numpy's floating-point errors ignored."""
    if not CONTEXT_LOCAL_ERRORS:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    return runner_ignoring_float_errors()(fn, *args, **kwargs)


def float_errors_ignored() -> Any:
    """A ``with`` block in which numpy ignores floating-point errors."""
    return np.errstate(all="ignore")


def _add(total: Array, gradient: Any) -> None:
    np.add(total, gradient, total)


def add_ignoring_float_errors(total: Array, gradient: Any) -> None:
    """``total += gradient`` in ``total``'s dtype, overflow and NaN without warnings."""
    if CONTEXT_LOCAL_ERRORS:
        try:
            run: Callable[..., Any] = _threads.run
        except AttributeError:
            run = runner_ignoring_float_errors()
        run(np.add, total, gradient, total)
    else:
        with np.errstate(all="ignore"):
            np.add(total, gradient, total)


def in_place_adder(dtype: np.dtype[Any]) -> Callable[[Array, Any], None]:
    """``total += gradient`` for ``dtype``; integer arrays wrap without warnings already."""
    return _add if dtype.kind in "iu" else add_ignoring_float_errors
