"""The ``timeout`` argument that every take accepts."""

from __future__ import annotations

import math
from typing import Any


def check_timeout(timeout: Any) -> float | None:
    """None (wait forever) or a number of seconds at or above zero.

    Raises:
        ValueError: a negative or NaN timeout.
        TypeError: not a number.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        try:
            timeout = float(timeout)
        except (TypeError, ValueError):
            raise TypeError(
                f"timeout must be a number of seconds or None, got {timeout!r}"
            ) from None
    if math.isnan(timeout) or timeout < 0:
        raise ValueError(f"timeout must be a non-negative number of seconds, got {timeout!r}")
    return float(timeout)
