"""The tf_accum graph backend: the TensorFlow backend's own TF1 code, run on
``tf_accum.compat.v1`` instead of TensorFlow.

Nothing here re-implements how a case is built and run: the cases go through
the very graph-mode code that records TensorFlow's golden results (one Graph
and Session per case, inputs fed through placeholders, ops paired by name),
with the module it imports swapped. That is the promise of graph mode: TF1
code runs by changing its imports.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace
from typing import Any

import tf_accum as tfa
import tf_accum.compat.v1 as v1
from conformance.backends.common import wait_until_queued
from conformance.backends.tensorflow_backend import TensorFlowSession

# The names the TensorFlow backend uses, as tf_accum provides them.
TF_SHIM = SimpleNamespace(
    Graph=v1.Graph,
    compat=SimpleNamespace(v1=v1),
    raw_ops=tfa.raw_ops,
    IndexedSlices=tfa.IndexedSlices,
    constant=v1.constant,
    as_dtype=tfa.as_dtype,
    Operation=v1.Operation,
    Tensor=v1.Tensor,
    int32=tfa.int32,
    int64=tfa.int64,
    string=tfa.string,
)


class TfAccumGraphBackend:
    name = "tf_accum-graph"

    def open(self) -> TfAccumGraphSession:
        return TfAccumGraphSession(TF_SHIM)


class TfAccumGraphSession(TensorFlowSession):
    probe_seconds = 0.05  # settle() sees the take queued; this only adds margin

    def _waiting(self) -> int:
        table = self.session.table
        total = 0
        for handle in table.live_handles():
            with contextlib.suppress(tfa.errors.NotFoundError):
                total += table.lookup(handle).num_waiting()
        return total

    def prepare(self, call: Any, env: dict[str, Any]) -> Any:
        self._before = self._waiting()
        return super().prepare(call, env)

    def settle(self, task: Any) -> None:
        """Wait until the background take is queued in the session (or has returned)."""
        wait_until_queued(task, self._before, self._waiting)

    def clean_message(self, message: str) -> str:
        return message
