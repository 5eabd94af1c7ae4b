"""Tying a private accumulator's life to the Python object that made it."""

from __future__ import annotations

import weakref
from typing import Any

from tf_accum import raw_ops


def _destroy_quietly(handle: int) -> None:
    raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=True)


def destroy_with(owner: Any, handle: int) -> weakref.finalize[[int], None]:
    """Destroy ``handle`` when ``owner`` is garbage-collected (or at exit)."""
    return weakref.finalize(owner, _destroy_quietly, handle)
