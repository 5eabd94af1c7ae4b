"""``ClusterSpec`` and ``Server``: a TF1 cluster's tasks, mapped onto a Ray cluster.

A TF1 program names its tasks in a ``ClusterSpec`` (job -> addresses) and
starts a ``Server`` for its own task; worker sessions on ``server.target``
then place state on ps tasks. Here the addresses are only names: nothing
listens on them. What a ps task holds (its accumulators and variables) lives
in a host actor on the Ray cluster the process is attached to (named by
``TF_ACCUM_RAY_ADDRESS`` or ``tf_accum.distributed.connect``), made by the
ps task's own process and ended with it, as a TF1 ps task's state lives in
its process; the other processes of the job find it by the job's identity
(``TF_ACCUM_JOB``, else ps task 0's address; see
``tf_accum.graph.cluster_job``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import operator
import threading
from collections.abc import Mapping
from typing import Any

from tf_accum import errors

logger = logging.getLogger("tf_accum")

_JOB_TYPE_MESSAGE = (
    "`cluster` must be a dictionary mapping one or more job names to lists of network "
    "addresses, or a `ClusterSpec`"
)


class ClusterSpec:
    """The tasks of a TF1 cluster: job name -> task addresses.

    Args:
        cluster: a dict mapping each job name to a list of addresses (task i
            is the i-th) or to a dict from task index to address; or another
            ClusterSpec (copied).

    Raises:
        TypeError: a cluster that is no such dict, a job name or an address
            that is not a string, tasks that are neither a list nor a dict.
        ValueError: a task index that is not an integer.
    """

    def __init__(self, cluster: Any) -> None:
        sparse: set[str] = set()
        if isinstance(cluster, ClusterSpec):
            sparse = cluster.sparse_jobs()
            cluster = cluster.as_dict()
        if not isinstance(cluster, Mapping):
            raise TypeError(_JOB_TYPE_MESSAGE)
        self._jobs: dict[str, dict[int, str]] = {}
        # jobs whose tasks were given as a dict: a process may list only some of them
        self._sparse = sparse
        for job, tasks in cluster.items():
            if isinstance(job, bytes):
                job = job.decode()
            if not isinstance(job, str):
                raise TypeError(f"Job name {job!r} must be bytes or unicode")
            if isinstance(tasks, (list, tuple)):
                found = dict(enumerate(tasks))
            elif isinstance(tasks, Mapping):
                found = {int(index): address for index, address in tasks.items()}
                self._sparse.add(job)
            else:
                raise TypeError(
                    f"The tasks for job '{job}' must be a list or a dictionary from integers "
                    "to strings."
                )
            for address in found.values():
                if not isinstance(address, (str, bytes)):
                    raise TypeError(f"Task address {address!r} must be bytes or unicode")
            self._jobs[job] = {
                i: a.decode() if isinstance(a, bytes) else a for i, a in sorted(found.items())
            }

    @property
    def jobs(self) -> list[str]:
        """The job names, in the order given."""
        return list(self._jobs)

    def as_dict(self) -> dict[str, list[str] | dict[int, str]]:
        """job -> list of addresses when its tasks are 0..n-1, else -> dict index -> address."""
        result: dict[str, list[str] | dict[int, str]] = {}
        for job, tasks in self._jobs.items():
            if list(tasks) == list(range(len(tasks))):
                result[job] = list(tasks.values())
            else:
                result[job] = dict(tasks)
        return result

    def _job(self, job_name: str) -> dict[int, str]:
        tasks = self._jobs.get(job_name)
        if tasks is None:
            raise ValueError(f"No such job in cluster: {job_name!r}")
        return tasks

    def num_tasks(self, job_name: str) -> int:
        """How many tasks ``job_name`` has. Raises ValueError for an unknown job."""
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        """The task indices of ``job_name``, ascending. Raises ValueError for an unknown job."""
        return list(self._job(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        """The address of a task.

        Raises:
            ValueError: an unknown job, or no task ``task_index`` in it.
        """
        tasks = self._job(job_name)
        try:
            return tasks[int(task_index)]
        except KeyError:
            raise ValueError(f"No task with index {task_index} in job {job_name!r}") from None

    def job_tasks(self, job_name: str) -> list[str | None]:
        """Addresses of ``job_name``'s tasks by index, None where an index has no task.

        Raises:
            ValueError: an unknown job.
        """
        tasks = self._job(job_name)
        if not tasks:
            return []
        return [tasks.get(i) for i in range(max(tasks) + 1)]

    def sparse_jobs(self) -> set[str]:
        """The jobs whose tasks were given as a dict (index -> address), not a list."""
        return set(self._sparse)

    def identity(self) -> str:
        """A short digest of the cluster's jobs and addresses: the same in every process."""
        text = json.dumps(sorted((job, sorted(t.items())) for job, t in self._jobs.items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterSpec) and self._jobs == other._jobs

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ClusterSpec({dict(sorted(self.as_dict().items()))!r})"


# Seconds between join()'s checks of whether the job is over.
JOIN_CHECK_INTERVAL = 0.5
# Seconds join() waits for a ps task's host to say whether the job is over.
JOIN_CHECK_TIMEOUT = 10.0

# Servers of this process by target: a Session(target) finds its cluster here.
_servers: dict[str, Server] = {}
_servers_lock = threading.Lock()


class Server:
    """This process's task of a TF1 cluster.

    Args:
        server_or_cluster_def: a ClusterSpec or a dict for one.
        job_name: this task's job (may be left out when the cluster has one job).
        task_index: this task's index (may be left out when the job has one task).
        protocol, config: accepted; nothing listens on the addresses.
        start: for a ``ps`` task, make its host (on this process's node) now;
            workers wait for it.

    The process attaches to Ray when it first needs a host (a ps task's
    Server: when it starts; a worker's: at its sessions' first run placing an
    op on another task): to the cluster already attached
    (``tf_accum.distributed.connect``), else to ``TF_ACCUM_RAY_ADDRESS``, else
    to a new one-machine cluster in this process (which only this process can
    reach: a warning says so). A cluster of one task never needs Ray.

    A ps task's host (its state) is owned by this process and ends with it. A
    worker's first run that needs a ps task waits while the task is not up,
    logging what it waits for (bounded by the run's deadline).

    Differs from TensorFlow: a second live process for a task of the same job
    (``TF_ACCUM_JOB``, else ps task 0's address) is refused anywhere on the
    Ray cluster, and so is a process whose ClusterSpec disagrees with its ps
    tasks' (docs/departures.md T30).

    Raises:
        TypeError: a task_index that is not an int (``"1"``, ``1.0``, ``True``).
        ValueError: no job_name (or task_index) given where it cannot be inferred.
        InvalidArgumentError: a job or task the cluster does not have.
        UnknownError: this process already has a Server for the task's address;
            or, for a ps task, another live process serves the same task of
            the same job (see ``TF_ACCUM_JOB``).
        UnavailableError, FailedPreconditionError: attaching to Ray failed (see
            ``tf_accum.distributed.connect``).
    """

    def __init__(
        self,
        server_or_cluster_def: Any,
        job_name: str | None = None,
        task_index: int | None = None,
        protocol: str | None = None,
        config: Any = None,
        start: bool = True,
    ) -> None:
        cluster = ClusterSpec(server_or_cluster_def)
        if job_name is None:
            if len(cluster.jobs) != 1:
                raise ValueError("Must specify an explicit `job_name`.")
            job_name = cluster.jobs[0]
        if job_name not in cluster.jobs:
            raise errors.InvalidArgumentError(
                None, None, f'Job "{job_name}" was not defined in cluster {cluster!r}'
            )
        if task_index is None:
            if cluster.num_tasks(job_name) != 1:
                raise ValueError("Must specify an explicit `task_index`.")
            task_index = cluster.task_indices(job_name)[0]
        if isinstance(task_index, bool):
            raise TypeError(f"task_index must be an int, not a bool ({task_index!r})")
        task_index = operator.index(task_index)  # TypeError for "1" or 1.0, as TensorFlow
        if task_index not in cluster.task_indices(job_name):
            raise errors.InvalidArgumentError(
                None, None, f'Task {task_index} was not defined in job "{job_name}"'
            )
        self._cluster = cluster
        self._job_name = job_name
        self._task_index = task_index
        self._target = f"grpc://{cluster.task_address(job_name, self._task_index)}"
        self._stopped = threading.Event()
        from tf_accum.graph.cluster_runtime import ClusterRuntime

        self._runtime = ClusterRuntime(cluster, job_name, self._task_index)
        with _servers_lock:
            other = _servers.get(self._target)
            # port 0 asks for any free port: such servers never clash
            if other is not None and not self._target.endswith(":0"):
                raise errors.UnknownError(
                    None,
                    None,
                    f"Could not start tf.train.Server for task /job:{job_name}/task:"
                    f"{self._task_index}: this process already has a Server on "
                    f"{self._target} (task /job:{other.job_name}/task:{other.task_index}); a "
                    "process has one Server per task. Pass the existing server (or its "
                    ".target) to the code that needs it.",
                )
            _servers[self._target] = self
        if start:
            self.start()

    @property
    def target(self) -> str:
        """``"grpc://" + this task's address``: pass it to ``Session``."""
        return self._target

    @property
    def cluster_spec(self) -> ClusterSpec:
        return self._cluster

    @property
    def job_name(self) -> str:
        return self._job_name

    @property
    def task_index(self) -> int:
        return self._task_index

    @property
    def runtime(self) -> Any:
        """The ``ClusterRuntime`` sessions on this server's target run through."""
        return self._runtime

    def start(self) -> None:
        """For a ps task, attach to Ray and make its host on this node (idempotent).

        The host, owned by this process, holds the task's state until the
        process ends. It is pinned to this process's node: a host whose actor
        process dies while this process lives is restarted there, empty.

        Raises:
            UnknownError: another live process serves this task of this job.
        """
        if self._job_name == "ps" and sum(map(self._cluster.num_tasks, self._cluster.jobs)) > 1:
            self._runtime.serve(self._job_name, self._task_index)

    def join(self) -> None:
        """Block while this task serves (a ps process's last call), until the job is over.

        For a ps task the job is over once every task of the ClusterSpec that
        is not a ps task (the workers) has used this task and all of their
        processes have ended (a worker that restarts before the others have
        all ended keeps it going), or when its host ends (the job's state is
        gone: the host was killed, or the Ray cluster stopped); for any task,
        when ``stop()`` is called. Returning, it logs why (at INFO, logger
        ``tf_accum``). A SIGTERM ends the process as it ends any Python
        program (tf_accum installs no signal handler), and Ctrl-C raises
        KeyboardInterrupt here. The task's state lives in its host on the Ray
        cluster until this process ends; this keeps the process alive, as
        TensorFlow's ``join`` does.

        Differs from TensorFlow: TensorFlow's ``join`` never returns
        (docs/departures.md T30).
        """
        job_over = self._job_over if self._job_name == "ps" else (lambda: None)
        while not self._stopped.wait(JOIN_CHECK_INTERVAL):
            reason = job_over()
            if reason is not None:
                logger.info(
                    "tf.train.Server of task /job:%s/task:%d: join() returns: %s",
                    self._job_name,
                    self._task_index,
                    reason,
                )
                return

    def _job_over(self) -> str | None:
        """Why this ps task's job is over, or None while it is not (see ``join``)."""
        import ray

        link = self._runtime.host(self._job_name, self._task_index)
        # The host answers this process's life-token call only when it ends.
        ready, _ = ray.wait(link.life, timeout=0)
        if ready:
            return "its host ended (it was killed, or the Ray cluster stopped)"
        try:
            found: str | None = ray.get(
                link.actor.run.remote(("job_over",)), timeout=JOIN_CHECK_TIMEOUT
            )
        except ray.exceptions.GetTimeoutError:
            return None  # a host busy serving: the job is not over
        except ray.exceptions.RayActorError:
            return "its host ended (it was killed, or the Ray cluster stopped)"
        if found is None:
            return None
        return f"the job is over for this task: {found}"

    def stop(self) -> None:
        """Let ``join()`` return (TensorFlow's servers cannot be stopped; this is for tests)."""
        self._stopped.set()

    @staticmethod
    def create_local_server(config: Any = None, start: bool = True) -> Server:
        """A server of a one-task cluster ``{"localhost": ["localhost:0"]}``."""
        return Server({"localhost": ["localhost:0"]}, "localhost", 0, None, config, start)


def server_for_target(target: str) -> Server:
    """The Server of this process whose target is ``target``.

    Raises:
        UnimplementedError: no Server of this process has that target.
    """
    with _servers_lock:
        found = _servers.get(target)
    if found is None:
        raise errors.UnimplementedError(
            None,
            None,
            f"Session target {target!r}: no tf.train.Server of this process has that target. "
            "Make this task's Server first (tf.train.Server(cluster, job_name, task_index)) and "
            "pass its .target; '' runs the session in this process only.",
        )
    return found
