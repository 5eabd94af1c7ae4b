"""The ``timeout`` argument that every take accepts."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np


def check_timeout(timeout: Any) -> float | None:
    """None (wait forever) or a number of seconds at or above zero.

    Python and numpy ints and floats are numbers; ``float("inf")`` (or any
    number too large for the platform's timers) waits forever, as None does.

    Raises:
        ValueError: a negative or NaN timeout.
        TypeError: not a number (a string, a bool, an array, ...).
    """
    if timeout is None:
        return None
    if isinstance(timeout, (bool, np.bool_)) or not isinstance(timeout, numbers.Real):
        raise TypeError(
            f"timeout must be a number of seconds or None, got {timeout!r} of type "
            f"{type(timeout).__name__}"
        )
    seconds = float(timeout)
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"timeout must be a non-negative number of seconds, got {timeout!r}")
    return None if math.isinf(seconds) else seconds
