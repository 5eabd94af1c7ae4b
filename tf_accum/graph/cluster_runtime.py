"""A process's view of a TF1 cluster on Ray: its own task, links to the other tasks' hosts,
and where each op runs (see tf_accum.graph.remote_run for how runs use it)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tf_accum import errors
from tf_accum.dtypes import resource, string_ref
from tf_accum.graph.devices import DeviceSpec

if TYPE_CHECKING:
    from tf_accum.graph.cluster import ClusterSpec
    from tf_accum.graph.graph import Operation
    from tf_accum.graph.remote_run import ClusterSession

logger = logging.getLogger("tf_accum")

HANDLE_DTYPES = (resource, string_ref)

Task = tuple[str, int]  # (job, task index)


@dataclass(frozen=True)
class RemoteHandle:
    """An accumulator handle on a task's host, as a run's value (fetching it returns this)."""

    task: str
    handle: int


def task_label(task: Task) -> str:
    return f"/job:{task[0]}/task:{task[1]}"


@dataclass
class TaskLink:
    """One incarnation of a task's host, as this process talks to it."""

    actor: Any
    instance: str
    life: list[Any]
    stale: bool = False
    life_sent: bool = False  # the host has this process's life token

    def life_once(self) -> list[Any] | None:
        # an ObjectRef in a call's arguments costs Ray a borrow: send it once
        if self.life_sent:
            return None
        self.life_sent = True
        return self.life


def _remote_class() -> Any:
    import ray

    from tf_accum.graph.task_host import TaskHost

    with _class_lock:
        global _task_host_class
        if _task_host_class is None:
            _task_host_class = ray.remote(TaskHost)
        return _task_host_class


_task_host_class: Any = None
_class_lock = threading.Lock()


class ClusterRuntime:
    """This process's view of a TF1 cluster on Ray: its task, and links to the others' hosts.

    Args:
        cluster: the ClusterSpec.
        job, task: this process's task.
        host_options: extra Ray actor options of a task's host, by (job, task)
            (default: none; Ray places the hosts, using no CPU slot).
    """

    def __init__(
        self,
        cluster: ClusterSpec,
        job: str,
        task: int,
        host_options: Callable[[str, int], dict[str, Any]] | None = None,
    ) -> None:
        self.cluster = cluster
        self.job = job
        self.task = task
        self._host_options = host_options or (lambda job, task: {})
        self._caller = uuid.uuid4().hex
        self._lock = threading.Lock()
        self._links: dict[Task, TaskLink] = {}
        self._groups: dict[str, Any] = {}
        self._here: set[Task] = set()  # tasks whose host this process makes on its own node

    def attach(self) -> None:
        """Attach this process to Ray (see ``Server``)."""
        from tf_accum.distributed.connect import attach_as_configured

        attach_as_configured("tf.train.Server")

    def _group(self, job: str) -> Any:
        from tf_accum.distributed.placement import HostGroup

        group = self._groups.get(job)
        if group is None:
            label = f"{self.cluster.identity()}/{job}"
            group = HostGroup(
                f"task/{label}",
                max(self.cluster.task_indices(job)) + 1,
                _remote_class,
                lambda index: (task_label((job, index)),),
                lambda index: self._options(job, index),
            )
            self._groups[job] = group
        return group

    def _options(self, job: str, task: int) -> dict[str, Any]:
        options = dict(self._host_options(job, task))
        if (job, task) in self._here and "scheduling_strategy" not in options:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            # soft: if this node goes, Ray may restart the host elsewhere (empty)
            node = ray.get_runtime_context().get_node_id()
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=True)
        return options

    def serve(self, job: str, task: int) -> None:
        """Make task (job, task)'s host now, on this process's node unless it exists already."""
        self._here.add((job, task))
        self.host(job, task)

    def host(self, job: str, task: int) -> TaskLink:
        """The link to task (job, task)'s host, made (and the host started) if needed."""
        key = (job, task)
        with self._lock:
            link = self._links.get(key)
        if link is not None and not link.stale:
            return link
        self.attach()
        actor, (instance, _pid, _node) = self._group(job).start(
            task, f"the host of task {task_label(key)}"
        )
        link = TaskLink(actor, instance, [actor.hold.remote(self._caller)])
        with self._lock:
            current = self._links.get(key)
            if current is not None and not current.stale and current.instance == instance:
                return current
            self._links[key] = link
        return link

    def census(self, job: str, task: int) -> dict[str, int]:
        """The host's counts (requests run, accumulators, variables): for tests."""
        import ray

        found: dict[str, int] = ray.get(self.host(job, task).actor.census.remote())
        return found

    def reset(self) -> None:
        """Empty the hosts of the ps tasks, and of any other task this process used
        (``Session.reset``)."""
        import ray

        tasks = set(self._links)
        if "ps" in self.cluster.jobs:
            tasks.update(("ps", index) for index in self.cluster.task_indices("ps"))
        tasks.discard((self.job, self.task))
        ray.get([self.host(*task).actor.reset.remote() for task in sorted(tasks)])

    def new_session(self) -> ClusterSession:
        from tf_accum.graph.remote_run import ClusterSession

        return ClusterSession(self)

    # --- placement ------------------------------------------------------------------

    def task_of(self, op: Operation) -> Task | None:
        """Where ``op`` runs: another task, or None (this process).

        Raises:
            InvalidArgumentError: its device names a job or task the cluster lacks.
        """
        for tensor in op.inputs:
            if tensor.dtype in HANDLE_DTYPES:
                return self.task_of(tensor.op)
        spec = DeviceSpec.from_string(op.device)
        if spec.job is None:
            return None
        task = 0 if spec.task is None else spec.task
        if spec.job == self.job and spec.task in (None, self.task):
            return None
        if spec.job not in self.cluster.jobs or task not in self.cluster.task_indices(spec.job):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Cannot assign a device for operation {op.name}: {op.device!r} names a task "
                f"the cluster does not have (it has {self.cluster!r})",
            )
        return (spec.job, task)

    def caller(self) -> str:
        return self._caller
