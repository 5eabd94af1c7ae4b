"""Which table the raw ops use: the process's, or one chosen for a context.

A TF1 ``Session`` runs its ops against its own table (each session has its
own accumulators), so the choice is a context variable: the threads a run
starts inherit it, and other threads keep the process's table.
"""

from __future__ import annotations

import contextvars
import importlib
import os
import threading
from collections.abc import Callable

from tf_accum.context_blocks import ContextBlock
from tf_accum.resources.table import ResourceTable

# The environment variable that turns the distributed table on without code changes.
RAY_ADDRESS_VARIABLE = "TF_ACCUM_RAY_ADDRESS"

# Tables picked by an environment variable: the variable, and the plug-in that
# makes a table of its value, as "module:function" (imported only when the
# variable is set, so the layers above are never imported from here). Checked
# in order; with none set, the process gets an in-process table.
_ADDRESS_TABLES: dict[str, str] = {
    RAY_ADDRESS_VARIABLE: "tf_accum.distributed:table_for_address",
}


def register_address_table(variable: str, factory: str) -> None:
    """Make the process's table, when the environment variable ``variable``
    is set, with ``factory`` ("module:function", called with the variable's
    value and returning a ResourceTable) instead of an in-process table."""
    _ADDRESS_TABLES[variable] = factory


_process_table: ResourceTable | None = None
_process_lock = threading.Lock()
_context_table: contextvars.ContextVar[ResourceTable | None] = contextvars.ContextVar(
    "tf_accum_table", default=None
)


def current_table() -> ResourceTable:
    """The table the raw ops use here: the context's, else the process's.

    The process's table is made at first use: a distributed one when
    ``TF_ACCUM_RAY_ADDRESS`` is set, else an in-process one.
    """
    table = _context_table.get() or _process_table
    if table is None:
        with _process_lock:
            if _process_table is None:
                _install_locked(_default_table())
            table = _process_table
    assert table is not None
    return table


def _default_table() -> ResourceTable:
    for variable, factory in _ADDRESS_TABLES.items():
        address = os.environ.get(variable)
        if address:
            module_name, _, function = factory.partition(":")
            make: Callable[[str], ResourceTable] = getattr(
                importlib.import_module(module_name), function
            )
            return make(address)
    from tf_accum.resources.local import LocalResourceTable

    return LocalResourceTable()


def _install_locked(table: ResourceTable) -> ResourceTable | None:
    global _process_table
    previous, _process_table = _process_table, table
    return previous


def set_table(table: ResourceTable) -> ResourceTable | None:
    """Install ``table`` as the process's table; returns the one it replaces (or None)."""
    with _process_lock:
        return _install_locked(table)


def _fresh_lock_after_fork() -> None:
    # another thread may have held it at the fork; the child has no such thread
    global _process_lock
    _process_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_fresh_lock_after_fork)


def using_table(table: ResourceTable) -> ContextBlock[ResourceTable]:
    """Run the block (and the threads it starts with its context) against ``table``."""
    return ContextBlock(_context_table, table)
