"""The TF1 idiom with its accumulators on a ps task: the graph backend's code, run
in a session on a worker's ``tf.train.Server`` target with every op built
under ``tf.device("/job:ps/task:0")``, so each accumulator op runs on the ps
task's host actor on Ray.

Needs a Ray cluster attached to the process (``tf_accum.distributed.connect``,
or the tests' cluster). Every case session empties the ps task when it closes
(``Session.reset``), as each case starts from nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

import tf_accum.compat.v1 as v1
from conformance.backends.common import wait_until_queued
from conformance.backends.tf_accum_graph_backend import TF_SHIM, TfAccumGraphSession

PS_DEVICE = "/job:ps/task:0"


class TfAccumPsBackend:
    """One TF1 cluster (a ps task and a worker) for all the cases it runs."""

    name = "tf_accum-ps"

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:8]
        cluster = {"ps": [f"ps-{tag}:2222"], "worker": [f"worker-{tag}:2222"]}
        # this process serves the ps task too: its host lives as long as this process
        self.ps_server = v1.train.Server(cluster, job_name="ps", task_index=0)
        self.server = v1.train.Server(cluster, job_name="worker", task_index=0)
        self.last: TfAccumPsSession | None = None  # the case session opened last

    def open(self) -> TfAccumPsSession:
        session = self.last = TfAccumPsSession(self.server)
        return session


class TfAccumPsSession(TfAccumGraphSession):
    def __init__(self, server: Any) -> None:
        super().__init__(TF_SHIM)
        self.server = server
        self.session.close()  # the local one the graph backend made
        self.session = v1.Session(server.target, graph=self.graph)
        self.runs = 0  # Session.run calls the case made (some cases only build)
        run = self.session.run

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.runs += 1
            return run(*args, **kwargs)

        self.session.run = counted

    def _build(self, call: Any, env: dict[str, Any]) -> Any:
        with self.graph.as_default(), v1.device(PS_DEVICE):
            return super()._build(call, env)

    def _waiting(self) -> int:
        waiting: int = self.server.runtime.counts("ps", 0)["waiting"]
        return waiting

    def settle(self, task: Any) -> None:
        wait_until_queued(task, self._before, self._waiting, poll=0.005)

    def close(self) -> None:
        if not self.closed:
            super().close()
            v1.Session.reset(self.server.target)
