"""Accumulators shared across processes and machines (on Ray)."""

from __future__ import annotations

from tf_accum.resources.table import ResourceTable


def table_for_address(address: str) -> ResourceTable:
    """The resource table for a Ray cluster at ``address`` (``"local"`` starts one).

    Raises:
        UnimplementedError: distributed tables are not available yet.
    """
    from tf_accum import errors

    raise errors.UnimplementedError(
        None, None, f"no distributed resource table is available (asked for {address!r})"
    )
