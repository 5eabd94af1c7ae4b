"""The tf_accum backend on the Ray table: the same statements, accumulators in Ray actors."""

from __future__ import annotations

import os
from typing import Any

from conformance.backends.tf_accum_backend import TfAccumSession
from tf_accum.resources import ResourceTable, set_table

_table: ResourceTable | None = None


def _cluster_table() -> ResourceTable:
    """A table on TF_ACCUM_RAY_ADDRESS's cluster, else on one started in this process."""
    global _table
    if _table is None:
        from tf_accum.distributed import table_for_address

        _table = table_for_address(os.environ.get("TF_ACCUM_RAY_ADDRESS") or "local")
    return _table


class TfAccumRayBackend:
    name = "tf_accum-ray"

    def __init__(self, table: ResourceTable | None = None) -> None:
        self._table = table

    def open(self) -> TfAccumRaySession:
        return TfAccumRaySession(self._table or _cluster_table())


class TfAccumRaySession(TfAccumSession):
    """Installs the Ray table for the case (its background takes run in plain threads)."""

    def __init__(self, table: ResourceTable) -> None:
        super().__init__()
        self._previous: Any = set_table(table)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            set_table(self._previous)
