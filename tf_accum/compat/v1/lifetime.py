"""Tying a private accumulator's life to the Python object that made it."""

from __future__ import annotations

import weakref
from typing import Any

from tf_accum.resources import ResourceTable, current_table


def destroy_with(owner: Any, handle: int) -> weakref.finalize[[int], None]:
    """Destroy ``handle`` when ``owner`` is garbage-collected (or at exit).

    The collector may run the finalizer inside any operation, with the table's
    or an accumulator's lock held; so it only queues the handle, and the table
    destroys it at its next operation.
    """
    table: ResourceTable = current_table()
    return weakref.finalize(owner, table.destroy_soon, handle)
