"""A TF1 job on a Ray cluster: which job a process belongs to, and its tasks' hosts.

What a ps task holds lives in a host actor on the Ray cluster, named from
the job's identity and the task, so every process of the job finds it:

- The job's identity is ``TF_ACCUM_JOB`` when it is set (the launcher sets
  it, the same in every process of a job, new for every run); otherwise the
  address of the job's first task (ps task 0), as a TF1 ps task is known
  by its address. Two live processes serving one task of one job are
  refused, so two jobs that cannot be told apart (the same ps task 0, no
  ``TF_ACCUM_JOB``) never share state: the second is told to set one.
- A ps task's host is made by its own process (its ``tf.train.Server``)
  and owned by it: Ray ends it when the process ends, so the state lives as
  long as the ps process, and a new run starts empty. Any other process
  looks the host up by name, waiting (and logging) while the task is not
  up yet.
- Every process that uses a host joins it first, saying which task it is
  and its ClusterSpec: a host refuses a ClusterSpec that disagrees with its
  own, and a second live process for a task.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tf_accum import errors
from tf_accum.accumulators.attempts import Cancellation, copy_error

if TYPE_CHECKING:
    from tf_accum.graph.cluster import ClusterSpec

logger = logging.getLogger("tf_accum")

JOB_VARIABLE = "TF_ACCUM_JOB"
LAUNCHER = "python -m tf_accum.launch"

# Seconds a task's new process waits for Ray to notice that the task's
# previous process ended (its host or its registration goes a moment later)
# before refusing it as a second live process for the task.
HANDOVER = 10.0
# Seconds between the log lines of a wait for a task that is not up.
WAIT_NOTICE = 10.0
POLL = 0.25  # seconds between looks for a task's host while it is not up


@dataclass(frozen=True)
class JobIdentity:
    """What tells a job's hosts from every other job's on the Ray cluster."""

    key: str  # part of every host's actor name
    description: str  # the job, for messages


def first_task(cluster: ClusterSpec) -> tuple[str, int]:
    """The task whose address names the job when TF_ACCUM_JOB is unset: ps task 0
    (the lowest ps index), else the lowest task of the first job by name."""
    job = "ps" if "ps" in cluster.jobs else sorted(cluster.jobs)[0]
    return job, min(cluster.task_indices(job))


def identity(cluster: ClusterSpec) -> JobIdentity:
    """The job of this process's tasks: TF_ACCUM_JOB, else the address of its first task."""
    named = os.environ.get(JOB_VARIABLE)
    if named:
        return JobIdentity("j" + _digest(named), f"job {named!r} ({JOB_VARIABLE})")
    job, task = first_task(cluster)
    address = cluster.task_address(job, task)
    return JobIdentity(
        "a" + _digest(f"/job:{job}/task:{task}@{address}"),
        f"the job whose /job:{job}/task:{task} is {address!r}",
    )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def host_name(job_identity: JobIdentity, job: str, task: int) -> str:
    """The Ray actor name of task (job, task)'s host."""
    return f"tf_accum/task/{job_identity.key}/{job}/{task}"


# --- ClusterSpecs that agree ---------------------------------------------------------


def spec_text(cluster: ClusterSpec) -> str:
    """The ClusterSpec as a host compares it: its tasks, and which jobs were given as
    lists (complete) rather than as dicts (a process may list only the tasks it talks to)."""
    return json.dumps(
        {
            "jobs": {job: cluster.as_dict()[job] for job in sorted(cluster.jobs)},
            "sparse": sorted(cluster.sparse_jobs()),
        },
        sort_keys=True,
    )


def _tasks(tasks: list[str] | Mapping[str, str]) -> dict[int, str]:
    if isinstance(tasks, list):
        return dict(enumerate(tasks))
    return {int(index): address for index, address in tasks.items()}


def disagreement(
    first: str, second: str, names: tuple[str, str] = ("one", "the other")
) -> str | None:
    """Why two processes' ClusterSpecs (``spec_text``) cannot be one job's; None if they can.

    They must name the same jobs; a job both give as a list must have the same
    tasks, and a job either gives as a dict (a sparse view) the same address
    for every task both name. ``names`` name the two ClusterSpecs in the reason.
    """
    a, b = json.loads(first), json.loads(second)
    one, other = names
    if sorted(a["jobs"]) != sorted(b["jobs"]):
        return (
            f"they name different jobs ({sorted(a['jobs'])} in {one}, "
            f"{sorted(b['jobs'])} in {other})"
        )
    sparse = set(a["sparse"]) | set(b["sparse"])
    for job in sorted(a["jobs"]):
        tasks_a, tasks_b = _tasks(a["jobs"][job]), _tasks(b["jobs"][job])
        if job not in sparse and sorted(tasks_a) != sorted(tasks_b):
            return (
                f"job {job!r} has tasks {sorted(tasks_a)} in {one} and {sorted(tasks_b)} in {other}"
            )
        for index in sorted(tasks_a.keys() & tasks_b.keys()):
            if tasks_a[index] != tasks_b[index]:
                return (
                    f"task /job:{job}/task:{index} is {tasks_a[index]!r} in {one} and "
                    f"{tasks_b[index]!r} in {other}"
                )
    return None


def job_over(spec: str | None, joined: set[str], live: set[str]) -> str | None:
    """Why a ps task's job is over, or None while it is not.

    It is over once every task of the ClusterSpec ``spec`` (``spec_text``) that is
    not a ps task has joined the ps task's host (``joined``: task labels) and
    none of them has a live process (``live``: the labels of the tasks whose
    process is still known to live). A worker that restarts before the others
    have all ended keeps the job going, as in TensorFlow; a job whose workers
    never all used this ps task is never over here.
    """
    if spec is None:
        return None
    jobs = json.loads(spec)["jobs"]
    tasks = [
        f"/job:{job}/task:{index}"
        for job in sorted(jobs)
        if job != "ps"
        for index in sorted(_tasks(jobs[job]))
    ]
    if not tasks or not joined.issuperset(tasks) or live.intersection(tasks):
        return None
    return (
        f"every task of the job that is not a ps task ({', '.join(tasks)}) has used it, "
        "and all of their processes have ended"
    )


def refused_spec(label: str, reason: str, theirs: str, ours: str, job: JobIdentity) -> str:
    return (
        f"This process's ClusterSpec disagrees with that of task {label} of {job.description}: "
        f"{reason}. Every process of a job must be given the same ClusterSpec (task "
        f"{label}'s: {_jobs(theirs)}; this process's: {_jobs(ours)}). If they are two "
        f"different jobs, set {JOB_VARIABLE} to a name of its own in every process of each "
        f"(or start each with `{LAUNCHER}`)."
    )


def refused_duplicate(label: str, holder: str, job: JobIdentity) -> str:
    return (
        f"Task {label} of {job.description} is already served by another live process "
        f"({holder}); a task has one process. If this is a new run of the program, end the "
        f"old run's processes first; if it is another job with the same ClusterSpec, set "
        f"{JOB_VARIABLE} to a name of its own in every process of each job (or start it with "
        f"`{LAUNCHER}`)."
    )


def _jobs(text: str) -> str:
    return json.dumps(json.loads(text)["jobs"], sort_keys=True)


def where_this_process_is() -> str:
    """ "pid N on node X": this process, for another process's messages."""
    import ray

    return f"pid {os.getpid()} on node {ray.get_runtime_context().get_node_id()[:12]}"


# --- hosts -----------------------------------------------------------------------------


def make_own_host(
    remote_class: Any,
    name: str,
    args: tuple[Any, ...],
    options: dict[str, Any],
    label: str,
    job: JobIdentity,
    existing_ok: bool = False,
) -> tuple[Any, Any] | None:
    """Make the host called ``name``, owned by this process (Ray ends it when the
    process ends), and return it with its ping answer.

    A host of that name still answering after HANDOVER seconds (or at once, when
    its owner is a live process of this node) belongs to another live process
    for the same task: refused, unless ``existing_ok`` (then None is returned
    at once).

    Raises:
        UnknownError: another live process serves the task.
        UnavailableError, InvalidArgumentError: the host cannot start
            (see ``tf_accum.distributed.feasibility.wait_started``).
    """
    import ray

    from tf_accum.distributed.feasibility import wait_started
    from tf_accum.distributed.placement import HOST_START_TIMEOUT, MAX_CONCURRENCY
    from tf_accum.distributed.proxy import ray_error
    from tf_accum.distributed.wire import NAMESPACE

    settings: dict[str, Any] = {
        "num_cpus": 0,  # hosts must never hold the CPU slots workers need
        "max_concurrency": MAX_CONCURRENCY,
        # a host whose actor process dies while its ps process lives comes back empty
        "max_restarts": -1,
        "max_task_retries": 0,
        **options,
        "name": name,
        "namespace": NAMESPACE,
        "lifetime": "non_detached",
        "get_if_exists": False,
    }
    what = f"the host of task {label}"
    give_up = time.monotonic() + HANDOVER
    while True:
        try:
            actor = remote_class.options(**settings).remote(*args)
            break
        except ray.exceptions.ActorAlreadyExistsError:
            if existing_ok:
                return None
            holder = _owner_of(name)
            if (holder is not None and holder[1]) or time.monotonic() >= give_up:
                where = "a process that does not answer" if holder is None else holder[0]
                raise errors.UnknownError(
                    None, None, refused_duplicate(label, where, job)
                ) from None
            time.sleep(POLL)  # the previous process's host is on its way out
    try:
        answer = wait_started(actor.ping.remote(), options, what, HOST_START_TIMEOUT)
    except ray.exceptions.RayError as exc:
        raise ray_error(exc, what) from None
    return actor, answer


def _owner_of(name: str) -> tuple[str, bool] | None:
    """(where the owner of host ``name`` is, whether it is a live process of this node),
    or None if the host is gone."""
    import ray

    from tf_accum.distributed.wire import NAMESPACE

    try:
        actor = ray.get_actor(name, namespace=NAMESPACE)
        pid, node = ray.get(actor.owner.remote(), timeout=HANDOVER)
    except (ValueError, ray.exceptions.RayError):
        return None
    here = node == ray.get_runtime_context().get_node_id()
    alive = here and _alive(pid)
    return f"pid {pid} on node {node[:12]}", alive


def _owner_gone(pid: int, node: str) -> bool:
    """Whether the process that made a host is known to have ended (only a process
    of this node can be asked)."""
    import ray

    return node == ray.get_runtime_context().get_node_id() and not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_host(
    name: str,
    label: str,
    address: str,
    join: Callable[[Any], Any],
    job: JobIdentity,
    deadline: float | None,
    cancellation: Cancellation | None,
    make: Callable[[], None] | None = None,
) -> tuple[Any, Any]:
    """The host called ``name`` once it is up and ``join(actor)`` (an object ref of
    its ``join`` call) accepts this process: (actor, join's answer). ``make``, if
    given, is called whenever no host of that name is found (it makes one).

    Waits while the task is not up (its process has not started its Server, or
    it ended and Ray has not removed its host yet), logging every WAIT_NOTICE
    seconds what it waits for.

    Raises:
        DeadlineExceededError: ``deadline`` passed first.
        CancelledError (or the cancellation's error): the run was cancelled.
        InvalidArgumentError, UnknownError: the host refused this process.
    """
    import ray

    from tf_accum.distributed.wire import Joined

    started = time.monotonic()
    notice = started + WAIT_NOTICE
    woken = threading.Event()
    key = None if cancellation is None else cancellation.register(lambda _error: woken.set())
    try:
        while True:
            if cancellation is not None and cancellation.error is not None:
                raise copy_error(cancellation.error, f" (while waiting for task {label} to start)")
            actor = _lookup(name)
            if actor is None and make is not None:
                make()
                actor = _lookup(name)
            if actor is not None:
                with contextlib.suppress(ray.exceptions.RayActorError):
                    # a refusal comes back as an answer; a host that is going away, as an error
                    answer = ray.get(join(actor), timeout=2 * HANDOVER + 60.0)
                    if not (
                        isinstance(answer, Joined)
                        and _owner_gone(answer.owner_pid, answer.owner_node)
                    ):
                        return actor, answer
                    # its process ended a moment ago, and Ray has not ended it yet
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise errors.DeadlineExceededError(
                    None,
                    None,
                    f"Timed out waiting for task {label} ({address}) of {job.description} to "
                    f"start: no process serves it (waited {now - started:.1f} s)",
                )
            if now >= notice:
                logger.warning(
                    "Still waiting for task %s (%s) of %s: no process serves it yet (its "
                    "process makes it when it starts its tf.train.Server); waited %.0f s",
                    label,
                    address,
                    job.description,
                    now - started,
                )
                notice = now + WAIT_NOTICE
            pause = POLL if deadline is None else max(0.0, min(POLL, deadline - now))
            woken.wait(pause)
    finally:
        if cancellation is not None:
            cancellation.unregister(key)


def _lookup(name: str) -> Any:
    """The host actor called ``name``, or None if there is none."""
    import ray

    from tf_accum.distributed.wire import NAMESPACE

    try:
        return ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return None
