"""What a TF1 cluster task's host runs beyond raw ops: the graph's own steps and the job's rules.

A task's host is a ``tf_accum.distributed.host.ResourceHost`` made with
``TaskSteps`` (see tf_accum.graph.cluster_runtime): the host runs the raw ops
and constructors of a request itself, and hands this its variable, training
and kernel steps (see tf_accum.graph.host_steps), and the questions of a
process joining the task's job (tf_accum.graph.cluster_job).
"""

from __future__ import annotations

from typing import Any

from tf_accum.graph import cluster_job
from tf_accum.graph.host_steps import KERNEL, TRAIN, kernel_step, training_step, variable_step
from tf_accum.graph.variable_store import VariableStore


class TaskSteps:
    """A task host's variables (by name, shared by every session of the cluster),
    and the steps and job rules of the graph layer (``host.TaskExtension``)."""

    def __init__(self) -> None:
        self._variables = VariableStore()

    @property
    def handover(self) -> float:
        return cluster_job.HANDOVER

    def run(self, step: tuple[Any, ...], values: list[Any]) -> tuple[Any, ...]:
        """Run a VAR, TRAIN or KERNEL step on its input ``values``.

        Raises:
            what the step's operation raises.
        """
        if step[0] == KERNEL:
            return kernel_step(step, values)
        if step[0] == TRAIN:
            return training_step(self._variables, step, values)
        return variable_step(self._variables, step, values)

    def counts(self) -> dict[str, int]:
        return {"variables": self._variables.count()}

    def clear(self) -> None:
        self._variables.clear()

    def disagreement(self, host_spec: str, spec: str, task: str) -> str | None:
        return cluster_job.disagreement(host_spec, spec, (f"task {task}'s", "this process's"))

    def job_over(self, spec: str | None, joined: set[str], holders: set[str]) -> str | None:
        return cluster_job.job_over(spec, joined, holders)
