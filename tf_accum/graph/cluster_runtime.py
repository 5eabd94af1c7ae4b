"""A process's view of a TF1 cluster on Ray: its own task, links to the other tasks' hosts,
and where each op runs (see tf_accum.graph.remote_run for how runs use it)."""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tf_accum import errors
from tf_accum.dtypes import resource, string_ref
from tf_accum.graph.devices import DeviceSpec

if TYPE_CHECKING:
    from tf_accum.accumulators.attempts import Cancellation
    from tf_accum.distributed.proxy import HostLink
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


class ClusterRuntime:
    """This process's view of a TF1 cluster on Ray: its task, and links to the others' hosts.

    Args:
        cluster: the ClusterSpec.
        job, task: this process's task.
        host_options: extra Ray actor options of a task's host, by (job, task)
            (default: none; a ps task's host goes on its own process's node,
            using no CPU slot).
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
        self._links: dict[Task, HostLink] = {}
        self._served: set[Task] = set()  # ps tasks whose host this process made and owns
        # the hosts this process made: Ray ends a non-detached actor once its owner
        # holds no handle to it, so the handles are kept as long as this runtime
        self._owned: dict[Task, Any] = {}
        from tf_accum.graph import cluster_job

        self.job_identity = cluster_job.identity(cluster)
        self._spec = cluster_job.spec_text(cluster)

    def attach(self) -> None:
        """Attach this process to Ray (see ``Server``)."""
        from tf_accum.distributed.connect import attach_as_configured

        attach_as_configured("tf.train.Server")

    def _options(self, job: str, task: int) -> dict[str, Any]:
        options = dict(self._host_options(job, task))
        if "scheduling_strategy" not in options:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            # Hard: Ray ignores a soft preference for an actor that asks for no resource
            # (it placed about half of such hosts on another node). The host has no use
            # elsewhere anyway: if this node goes, so does this process, its owner.
            node = ray.get_runtime_context().get_node_id()
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        return options

    def _job_args(self, where: str) -> dict[str, Any]:
        """What a host this process makes knows of it (see ``ResourceHost``)."""
        import ray

        return {
            "spec": self._spec,
            "task": task_label((self.job, self.task)),
            "caller": self._caller,
            "where": where,
            "pid": os.getpid(),
            "node": ray.get_runtime_context().get_node_id(),
        }

    def serve(self, job: str, task: int) -> None:
        """Make task (job, task)'s host, owned by this process (its state ends with it).

        Raises:
            UnknownError: another live process serves the task.
        """
        from tf_accum.distributed.host import remote_class
        from tf_accum.distributed.proxy import HostLink
        from tf_accum.graph import cluster_job
        from tf_accum.graph.task_host import TaskSteps

        key = (job, task)
        with self._lock:
            link = self._links.get(key)
        if link is not None and not link.stale:
            return
        self.attach()
        label = task_label(key)
        made = cluster_job.make_own_host(
            remote_class(),
            cluster_job.host_name(self.job_identity, job, task),
            (label, self._job_args(cluster_job.where_this_process_is()), TaskSteps),
            self._options(job, task),
            label,
            self.job_identity,
        )
        assert made is not None  # without existing_ok, a taken name raises
        actor, (instance, _pid, node) = made
        with self._lock:
            self._served.add(key)
            self._owned[key] = actor
            self._links[key] = HostLink(
                label, actor, instance, self._caller, same_machine=_here(node)
            )

    def link(self, job: str, task: int) -> HostLink | None:
        """The link to task (job, task)'s host this process has, if any (never waits)."""
        with self._lock:
            return self._links.get((job, task))

    def host(
        self,
        job: str,
        task: int,
        deadline: float | None = None,
        cancellation: Cancellation | None = None,
    ) -> HostLink:
        """The link to task (job, task)'s host, once the task is up and its host has
        accepted this process.

        A ps task's host is made by the ps task's own process: until it is up, this
        waits, logging what it waits for, until ``deadline`` (monotonic seconds;
        None: no limit) or ``cancellation``. Any other task's host is made here if
        nobody made it yet, owned by this process.

        Raises:
            DeadlineExceededError: the deadline passed while the task was not up.
            InvalidArgumentError: this process's ClusterSpec disagrees with the host's.
            UnknownError: another live process serves this process's task.
        """
        import ray

        from tf_accum.distributed.host import remote_class
        from tf_accum.distributed.proxy import HostLink
        from tf_accum.distributed.wire import SpecRefused, TaskTaken
        from tf_accum.graph import cluster_job
        from tf_accum.graph.task_host import TaskSteps

        key = (job, task)
        with self._lock:
            link = self._links.get(key)
            served = key in self._served
        if link is not None and not link.stale:
            return link
        name = cluster_job.host_name(self.job_identity, job, task)
        label = task_label(key)
        if served:
            # this process's own host, restarted by Ray (empty) since this process used it
            return self._relink(key, name, label)
        self.attach()
        mine = task_label((self.job, self.task))
        where = cluster_job.where_this_process_is()

        def make() -> None:
            # a task that is not a ps task has no process making its host: it is made
            # on first use, owned by this process, unless another process made it
            made = cluster_job.make_own_host(
                remote_class(),
                name,
                (label, self._job_args(where), TaskSteps),
                dict(self._host_options(job, task)),
                label,
                self.job_identity,
                existing_ok=True,
            )
            if made is not None:
                with self._lock:
                    self._owned[key] = made[0]

        lives: list[Any] = []

        def join(actor: Any) -> Any:
            lives[:] = [actor.hold.remote(self._caller)]
            return actor.join.remote(mine, self._spec, self._caller, where, list(lives))

        try:
            actor, answer = cluster_job.find_host(
                name,
                label,
                self.cluster.task_address(job, task),
                join,
                self.job_identity,
                deadline,
                cancellation,
                None if job == "ps" else make,
            )
        except ray.exceptions.RayError as exc:
            from tf_accum.distributed.proxy import ray_error

            raise ray_error(exc, f"the host of task {label}") from None
        if isinstance(answer, SpecRefused):
            raise errors.InvalidArgumentError(
                None,
                None,
                cluster_job.refused_spec(
                    label, answer.reason, answer.host_spec, self._spec, self.job_identity
                ),
            )
        if isinstance(answer, TaskTaken):
            raise errors.UnknownError(
                None, None, cluster_job.refused_duplicate(mine, answer.where, self.job_identity)
            )
        link = HostLink(
            label,
            actor,
            answer.instance,
            self._caller,
            same_machine=_here(answer.node),
            life=lives,
            life_sent=True,
        )
        with self._lock:
            current = self._links.get(key)
            if current is not None and not current.stale and current.instance == link.instance:
                return current
            self._links[key] = link
        return link

    def _relink(self, key: Task, name: str, label: str) -> HostLink:
        import ray

        from tf_accum.distributed.proxy import HostLink, ray_error
        from tf_accum.distributed.wire import NAMESPACE

        try:
            actor = ray.get_actor(name, namespace=NAMESPACE)
            instance, _pid, node = ray.get(actor.ping.remote())
        except ValueError:
            # ended for good (killed without restart): this process makes it again, empty
            self.serve(*key)
            return self._links[key]
        except ray.exceptions.RayError as exc:
            raise ray_error(exc, f"the host of task {label}") from None
        link = HostLink(label, actor, instance, self._caller, same_machine=_here(node))
        with self._lock:
            self._links[key] = link
        return link

    def counts(self, job: str, task: int) -> dict[str, int]:
        """The host's counts (requests run, accumulators, variables): for tests."""
        import ray

        found: dict[str, int] = ray.get(self.host(job, task).actor.counts.remote())
        return found

    def reset(self) -> None:
        """Empty the hosts of the ps tasks, and of any other task this process used
        (``Session.reset``); waits for ps tasks that are not up."""
        import ray

        tasks = set(self._links)
        if "ps" in self.cluster.jobs:
            tasks.update(("ps", index) for index in self.cluster.task_indices("ps"))
        tasks.discard((self.job, self.task))
        ray.get([self.host(*task).actor.run.remote(("reset",)) for task in sorted(tasks)])

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


def _here(node: str) -> bool:
    """Whether Ray node ``node`` is this process's (a host there shares its memory)."""
    import ray

    return bool(node) and node == ray.get_runtime_context().get_node_id()
