"""Accumulators shared across processes and machines, on Ray.

``connect(address)`` (or the ``TF_ACCUM_RAY_ADDRESS`` environment variable,
read at the first use of the table) makes every accumulator the process
creates live in Ray actors: one host actor per container holds its
accumulators, keyed by shared_name, so every process attached to the cluster
shares them; ``place(container, hosts=K, resources=..., node=..., soft=...)``
spreads a container over K hosts placed on purpose. Ray is an optional extra (``pip install 'tf-accum[ray]'``) and
is only imported when one of these functions runs.
"""

from __future__ import annotations

from typing import Any

from tf_accum.distributed.connect import connect, table_for_address
from tf_accum.distributed.placement import place

__all__ = ["RayResourceTable", "connect", "place", "table_for_address"]


def __getattr__(name: str) -> Any:
    # The table's module needs Ray at use, not at import; still, keep it out
    # of ``import tf_accum``.
    if name == "RayResourceTable":
        from tf_accum.distributed.table import RayResourceTable

        return RayResourceTable
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
