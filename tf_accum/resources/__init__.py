"""The resource table: integer handles to accumulators.

The raw ops reach accumulators only through :func:`current_table` and the
:class:`~tf_accum.accumulators.protocol.Accumulator` protocol, so another
implementation of :class:`ResourceTable` (a TF1 session's own table, or one
whose accumulators live on a distributed engine) serves every op unchanged.
"""

from tf_accum.resources.current import current_table, set_table, using_table
from tf_accum.resources.local import LocalResourceTable
from tf_accum.resources.table import ResourceTable

__all__ = ["ResourceTable", "LocalResourceTable", "current_table", "set_table", "using_table"]
