"""The resource table: integer handles to accumulators.

The raw ops reach accumulators only through :func:`current_table` and the
:class:`~tf_accum.accumulators.protocol.Accumulator` protocol, so another
implementation of :class:`ResourceTable` (a TF1 session's own table, or one
whose accumulators live on a distributed engine) serves every op unchanged.
"""

from typing import Any

from tf_accum.resources.current import current_table, set_table, using_table
from tf_accum.resources.table import ResourceTable

__all__ = ["ResourceTable", "LocalResourceTable", "current_table", "set_table", "using_table"]


def __getattr__(name: str) -> Any:
    # Imported on demand: the accumulators import resources.errors, and the
    # in-process table imports the accumulators.
    if name == "LocalResourceTable":
        from tf_accum.resources.local import LocalResourceTable

        return LocalResourceTable
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
