"""``replica_device_setter``: variables and accumulators on ps tasks, the rest on the worker.

The device function TF1's between-graph replication builds every worker's
graph under. Ops whose type is in ``ps_ops`` (variables and the dense
accumulator constructor, as TensorFlow's list has them) go to ps tasks in
turn, round robin in the order they are built, so every worker building the
same graph places the same state on the same task; every other op goes to
the worker device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tf_accum.graph.cluster import ClusterSpec
from tf_accum.graph.devices import DeviceSpec

# The op types TensorFlow 2.21's replica_device_setter sends to ps tasks by
# default. The sparse accumulator's constructor is not among them: as in
# TensorFlow, it lands on the worker unless placed explicitly.
STANDARD_PS_OPS = (
    "Variable",
    "VariableV2",
    "AutoReloadVariable",
    "MutableHashTable",
    "MutableHashTableV2",
    "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2",
    "MutableDenseHashTable",
    "MutableDenseHashTableV2",
    "VarHandleOp",
    "BoostedTreesEnsembleResourceHandleOp",
    "BoostedTreesQuantileStreamResourceHandleOp",
    "ResourceConditionalAccumulator",
    "DecisionTreeResource",
)


class _RoundRobin:
    """Task 0, 1, ..., n-1, 0, ... for successive ps ops."""

    def __init__(self, num_tasks: int) -> None:
        self._num_tasks = num_tasks
        self._next = 0

    def __call__(self, op: Any) -> int:
        task = self._next
        self._next = (self._next + 1) % self._num_tasks
        return task


class _ReplicaDeviceChooser:
    def __init__(
        self,
        ps_tasks: int,
        ps_device: str,
        worker_device: str,
        merge_devices: bool,
        ps_ops: Sequence[str],
        ps_strategy: Callable[[Any], int],
    ) -> None:
        self._ps_tasks = ps_tasks
        self._ps_device = ps_device
        self._worker_device = worker_device
        self._merge_devices = merge_devices
        self._ps_ops = tuple(ps_ops)
        self._ps_strategy = ps_strategy

    def device_function(self, op: Any) -> str:
        """The device of ``op``: a ps task for a ps op, else the worker device.

        Parts of the op's device set by inner scopes are kept (with
        ``merge_devices``, as TensorFlow always does now).
        """
        current = DeviceSpec.from_string(op.device or "")
        if self._ps_tasks and self._ps_device and op.type in self._ps_ops:
            ps = DeviceSpec.from_string(self._ps_device)
            if ps.job and (not current.job or current.job == ps.job):
                ps = ps.replace(task=self._ps_strategy(op))
            return ps.make_merged_spec(current).to_string()
        worker = DeviceSpec.from_string(self._worker_device or "")
        return worker.make_merged_spec(current).to_string()


def replica_device_setter(
    ps_tasks: int = 0,
    ps_device: str = "/job:ps",
    worker_device: str = "/job:worker",
    merge_devices: bool = True,
    cluster: Any = None,
    ps_ops: Sequence[str] | None = None,
    ps_strategy: Callable[[Any], int] | None = None,
) -> Callable[[Any], str] | None:
    """A device function for ``tf.device(...)`` placing state on ps tasks.

    Args:
        ps_tasks: how many ps tasks (ignored when ``cluster`` is given).
        ps_device: the ps job's device (``"/job:ps"``); a task is chosen per op.
        worker_device: where every other op goes.
        merge_devices: accepted; devices are always merged (as TensorFlow does).
        cluster: a ClusterSpec or dict; its ``ps`` job's size is ``ps_tasks``.
        ps_ops: op types placed on ps tasks (default ``STANDARD_PS_OPS``).
        ps_strategy: a function of the op returning its ps task (default:
            round robin in building order).

    Returns:
        The device function, or None when there are no ps tasks (a cluster
        without a ps job, or ``ps_tasks=0``).

    Raises:
        TypeError: a ``ps_strategy`` that is not callable; a cluster that is
            not a ClusterSpec or dict.
    """
    if cluster is not None:
        spec = cluster if isinstance(cluster, ClusterSpec) else ClusterSpec(cluster)
        job = DeviceSpec.from_string(ps_device).job or "ps"
        if job not in spec.jobs:
            return None
        ps_tasks = spec.num_tasks(job)
    if ps_tasks == 0:
        return None
    if ps_strategy is None:
        ps_strategy = _RoundRobin(ps_tasks)
    if not callable(ps_strategy):
        raise TypeError("ps_strategy must be callable")
    chooser = _ReplicaDeviceChooser(
        ps_tasks,
        ps_device,
        worker_device,
        merge_devices,
        STANDARD_PS_OPS if ps_ops is None else ps_ops,
        ps_strategy,
    )
    return chooser.device_function
