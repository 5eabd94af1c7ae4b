"""The resource table: integer handles to accumulators.

The raw ops reach accumulators only through :func:`current_table`, so another
implementation of :class:`ResourceTable` (for example one whose accumulators
live on a distributed engine) can be installed with :func:`set_table` without
changing any op.
"""

from tf_accum.resources.local import LocalResourceTable
from tf_accum.resources.table import ResourceTable, current_table, set_table

__all__ = ["ResourceTable", "LocalResourceTable", "current_table", "set_table"]
