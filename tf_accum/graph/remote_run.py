"""Runs of a session on a cluster's target: state on other tasks, one request per host.

How a TF1 cluster maps onto Ray:

- Every task other than the session's own (in practice each ps task) is a
  host actor on the Ray cluster (``tf_accum.distributed.host``), named from
  the job's identity, the job and the task index
  (``tf_accum.graph.cluster_job``), so every process of the job finds the
  same host whatever order they start in. A ps task's host is made by the
  ps process and ends with it; a run waits while it is not up. The
  ClusterSpec's addresses are only names.
- An op runs on a task when its device names that task (``/job:ps/task:1``;
  a job without a task is task 0) and it holds state: an accumulator op or a
  variable op. An op taking an accumulator or variable handle runs where
  the handle's producer runs, as TensorFlow colocates ops with their
  resources. Every other op (math, constants, anything placed on the
  session's own task or on no device) runs in the session's process.
- A cheap op without state (``host_steps.HOST_KERNEL_TYPES``: a NoOp, an
  Identity, a Mul, ...) whose inputs all come from one host's ops (or
  constants) and whose users all run on that host runs there too, as
  TensorFlow colocates an optimizer's beta-power updates and the
  sync-replicas tokens with their variables: it would otherwise cost a round
  trip between two requests. A NoOp left in the session's process orders
  nothing by itself: what waits for it waits for its inputs instead.
- The ops of one ``Session.run`` on one host go to it as one request and run
  there in dependency order (takes after the ops they may wait for). A run
  whose ops on host A need a value from host B sends B's request first:
  each host gets one request per run unless the run's dataflow goes back and
  forth between hosts.

A take waiting on a host is withdrawn when the run's deadline passes, its
session closes, a sibling op fails, or its process dies: it consumes nothing.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import pickle
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tf_accum import errors
from tf_accum.accumulators.attempts import Cancellation, cancelled_by, copy_error
from tf_accum.distributed.bulk import THRESHOLD as SHARED_MEMORY_BYTES
from tf_accum.distributed.bulk import Bulk, CallerBuffer, aligned, worth_sharing
from tf_accum.distributed.process_exit import (
    exiting,
    hold_thread_when_exiting,
    refuse_when_exiting,
)
from tf_accum.distributed.proxy import HostLink, ray_error
from tf_accum.distributed.small_messages import (
    MEDIUM_BYTES,
    array_bytes,
    pieces_for,
    split,
    unpack,
)
from tf_accum.distributed.wire import (
    RESTARTED,
    Done,
    Outcome,
    ReadsChanged,
    Request,
    StepFailed,
    StepRefused,
    answer_values,
)
from tf_accum.graph.cluster_runtime import (
    HANDLE_DTYPES,
    ClusterRuntime,
    RemoteHandle,
    Task,
    task_label,
)
from tf_accum.graph.executor import Plan, RunContext, _call, _store, execute, takes_go_back
from tf_accum.graph.host_steps import (
    HOST_KERNEL_BYTES,
    HOST_KERNEL_TYPES,
    KERNEL,
    VARIABLE_METHODS,
    write_steps,
)
from tf_accum.raw_ops.op_table import OPS as NODE_SPECS
from tf_accum.raw_ops.training import TRAINING_OPS
from tf_accum.resources import using_table

if TYPE_CHECKING:
    from tf_accum.graph.graph import Operation, Tensor
    from tf_accum.graph.session import Session


Values = dict["Tensor", Any]

# A request that may wait (a take, a dequeue) says what it waits for after this
# long, then again after twice as long, ...
REPORT_AFTER = 30.0  # seconds

_log = logging.getLogger("tf_accum")

# What a long wait of an op should also say (see ``wait_hint``); ops held weakly.
_WAIT_HINTS: weakref.WeakKeyDictionary[Operation, str] = weakref.WeakKeyDictionary()
# What a long wait of an op says, from what its host knows now (see ``wait_report``).
_WAIT_REPORTS: weakref.WeakKeyDictionary[Operation, Callable[[HostState, float], str | None]] = (
    weakref.WeakKeyDictionary()
)
# Called with an accumulator's stale count and global step after a take on a host
# (see ``after_take``).
_AFTER_TAKE: weakref.WeakKeyDictionary[Operation, Callable[[int, int], None]] = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True)
class _Placed:
    remote: dict[Operation, Task]  # ops that run on another task's host
    # what each op of the plan waits for in a cluster run (see ``_lift_constants``)
    producers: dict[Operation, tuple[Operation, ...]]


# What a run did, in order: local ops run at once, requests sent together, or the one
# blocking local op run (see ``ClusterSession.execute``).
_Action = tuple[str, Any]


@dataclass(frozen=True)
class _Request:
    """A batch's request as built once: its pickled steps, the tensors its slots take,
    and per op its outputs, whether it makes an accumulator and whether the answer
    carries its outputs (for the answer)."""

    plan: Plan
    blob: bytes
    slots: tuple[Tensor, ...]
    outputs: tuple[tuple[Operation, tuple[Tensor, ...], bool, bool], ...]
    # the pieces to ask its answer in (learnt from the last answer: a run's answers
    # are the same size from run to run)
    answer_pieces: list[int]
    # it takes from accumulators, and the run only fetches what they take: if the run
    # fails, the rounds go back (see host._Host.give_back)
    gives_back: bool
    # the slots whose large values may travel through shared memory: every op of the
    # request that takes one copies it or makes new values from it (the host reads
    # them from the caller's buffer, which the caller reuses once answered)
    shared_slots: tuple[int, ...]
    # the bytes of the large arrays its answer carries (learnt from the last answer):
    # the room left for them in the caller's buffer
    answer_room: list[int]


# A request waiting for its answer: (task, ops, request id, link, cancellation key, request).
_Pending = tuple[Task, "list[Operation]", str, HostLink, "int | None", _Request]

# A route stops reading ahead on a task once its reads had changed this many times,
# and more than once per this many runs that used them.
READ_AHEAD_MISSES = 3
READ_AHEAD_HITS_PER_MISS = 8


@dataclass
class _ReadAhead:
    """A task whose runs of a route read ahead: its last request of a run also reads
    what the next run's first request to it reads (variable reads only), so that run
    sends it no request of reads. The next run's last request carries which reads it
    used, and the host runs it only if the variables still hold what was read (a read
    then, at the request's arrival, is a read within the run); if one changed, the run
    starts again without them. So every action of the route before the task's last
    request is one that can run again unseen: local ops without effects, requests
    that only read."""

    reads: int  # the index in the route's actions of the request of reads
    last: int  # ... and of the task's last request, which goes alone
    request: _Request  # the request of reads
    # the reads held for the next run: the id of the request that read them, and
    # their outputs
    held: tuple[str, list[tuple[Any, ...]]] | None = None
    used: int = 0
    changed: int = 0

    @property
    def on(self) -> bool:
        return (
            self.changed < READ_AHEAD_MISSES or self.changed * READ_AHEAD_HITS_PER_MISS <= self.used
        )


@dataclass(frozen=True)
class _Ahead:
    """What a task's last request of a run asks of reads ahead: to run ``reads`` (their
    pickled steps; None: none) after its own, and whether the run used the reads of
    request ``reads_from``."""

    entry: _ReadAhead
    reads: bytes | None
    reads_from: str | None


class _ReadsHadChanged(Exception):
    """The host ran nothing of a request: reads ahead its run used had changed."""


@dataclass
class _Route:
    """The actions of a run that succeeded, and the remote ops whose cached handles it
    started from: a run of the same plan from the same handles takes the same actions
    (each is decided by what is done so far), so it replays them without the search.
    ``generation``: the session's handle cache when the run started (a route is
    replayed only while the cache is unchanged). ``ahead``: the tasks whose reads
    its runs read ahead."""

    plan: Plan
    generation: int
    start: tuple[tuple[Operation, Tensor], ...]
    actions: list[_Action]
    ahead: dict[Task, _ReadAhead] = field(default_factory=dict)


def _run_here(
    op: Operation, values: Values, done: set[Operation], run: RunContext, fed: Values
) -> None:
    """Run the local ``op`` in this process and store its outputs."""
    run.op = op
    _store(values, op, _call(run, op, values), fed)
    done.add(op)


class ClusterSession:
    """The cluster side of one Session: its placement cache, handles and requests."""

    def __init__(self, runtime: ClusterRuntime) -> None:
        self.runtime = runtime
        # the session's task label, then a unique part: a host tells the replicas
        # that applied gradients apart by it (``host.replica_of``)
        self.key = f"{task_label((runtime.job, runtime.task))}#{uuid.uuid4().hex}"
        # request ids: the session's key and a count (unique on every host, and cheap)
        self._count = itertools.count()
        self._lock = threading.Lock()
        self._placed: dict[int, tuple[Plan, _Placed]] = {}
        self._handles: dict[Operation, RemoteHandle] = {}
        self._requests: dict[tuple[Any, ...], _Request] = {}
        self._routes: dict[int, _Route] = {}
        self._generation = 0  # changes whenever ``_handles`` does
        self._used: set[Task] = set()
        # per task, the host incarnation this session's handles there come from: a
        # request to another one (the task restarted, or its process was replaced)
        # is refused by the host, and the session learns its state is gone
        self._known: dict[Task, str] = {}

    def _placement(self, plan: Plan) -> _Placed:
        found = self._placed.get(id(plan))
        if found is not None and found[0] is plan:
            return found[1]
        remote: dict[Operation, Task] = {}
        for op in plan.ops:
            task = self.runtime.task_of(op)
            if task is None:
                continue
            if op.type in NODE_SPECS or op.type in VARIABLE_METHODS or op.type in TRAINING_OPS:
                remote[op] = task
            elif any(t.dtype in HANDLE_DTYPES for t in op.inputs):
                raise errors.UnimplementedError(
                    None,
                    None,
                    f"Operation {op.name} (type {op.type}) uses state on task "
                    f"{task_label(task)}, and tf_accum runs only accumulator, variable "
                    f"({', '.join(sorted(VARIABLE_METHODS))}) and training ops on another task",
                )
        if not plan.feeds_outputs:
            _move_to_hosts(plan, remote)
        placed = _Placed(remote, _lift_constants(plan, remote))
        with self._lock:
            if len(self._placed) > 256:
                self._placed.clear()
            self._placed[id(plan)] = (plan, placed)
        return placed

    def execute(
        self,
        session: Session,
        plan: Plan,
        fed: dict[Tensor, Any],
        deadline: float | None,
        cancellation: Cancellation,
    ) -> dict[Tensor, Any]:
        """Run ``plan`` with its remote ops on their hosts; returns every tensor's value.

        Raises:
            the error of the first op that failed (on a host: the failing
            step's; of several hosts, the one earliest in the plan).
        """
        placed = self._placement(plan)
        if not placed.remote:
            return execute(session, plan, fed, deadline, cancellation)
        values: dict[Tensor, Any] = dict(fed)
        done: set[Operation] = set()
        run = RunContext(session, deadline, cancellation)
        route = self._routes.get(id(plan))
        with self._lock:
            if route is not None and route.plan is plan and route.generation == self._generation:
                for op, tensor in route.start:
                    values[tensor] = self._handles[op]
                    done.add(op)
            else:
                route = None
                for op in placed.remote:
                    handle = self._handles.get(op)
                    if handle is not None:
                        values[op.outputs[0]] = handle
                        done.add(op)
            generation = self._generation
        # requests sent whose takes go back if the run fails
        giving_back: list[tuple[HostLink, str]] = []
        try:
            with using_table(session.table), cancelled_by(cancellation):
                if route is not None:
                    if not route.ahead:
                        self._replay(route, plan, placed, values, done, run, fed, giving_back)
                        return values
                    start_values, start_done = dict(values), set(done)
                    try:
                        self._replay(route, plan, placed, values, done, run, fed, giving_back, True)
                    except _ReadsHadChanged:
                        # nothing the run did so far was seen: it starts again
                        values.clear()
                        values.update(start_values)
                        done.clear()
                        done.update(start_done)
                        self._replay(
                            route, plan, placed, values, done, run, fed, giving_back, False
                        )
                    return values
                start = tuple((op, op.outputs[0]) for op in plan.ops if op in done)
                actions: list[_Action] = []
                while len(done) < len(plan.ops):
                    ran = self._run_local(plan, placed, values, done, run, fed, False, actions)
                    batches = self._collect(plan, placed, done)
                    batches = _deferred(plan, placed, done, _ahead_of_waits(plan, placed, batches))
                    if batches:
                        actions.append(("send", batches))
                        self._send(
                            batches, plan, placed, values, done, deadline, cancellation, giving_back
                        )
                    elif not ran and not self._run_local(
                        plan, placed, values, done, run, fed, True, actions
                    ):
                        raise errors.InternalError(None, None, "A run could not make progress")
        except BaseException:
            _give_back(giving_back)
            raise
        actions = self._without_inline_constants(plan, placed, actions)
        ahead = self._reads_ahead(plan, actions)
        with self._lock:
            if len(self._routes) > 256:
                self._routes.clear()
            self._routes[id(plan)] = _Route(plan, generation, start, actions, ahead)
        return values

    def _reads_ahead(self, plan: Plan, actions: list[_Action]) -> dict[Task, _ReadAhead]:
        """The tasks whose reads a route of ``actions`` can read ahead (see _ReadAhead)."""
        sends: dict[Task, list[int]] = {}
        for index, (kind, what) in enumerate(actions):
            if kind == "send":
                for task in what:
                    sends.setdefault(task, []).append(index)
        found: dict[Task, _ReadAhead] = {}
        for task, indices in sends.items():
            if len(indices) != 2 or len(actions[indices[1]][1]) != 1:
                continue
            ops = actions[indices[0]][1][task]
            made = self._requests.get((id(plan), task, tuple(ops)))
            if (
                made is None
                or made.plan is not plan
                or made.slots
                or not all(op.type == "ReadVariableOp" for op in ops)
                or not _unseen_again(actions[: indices[1]])
            ):
                continue
            found[task] = _ReadAhead(indices[0], indices[1], made)
        return found

    def _without_inline_constants(
        self, plan: Plan, placed: _Placed, actions: list[_Action]
    ) -> list[_Action]:
        """``actions`` without the local constants a replay need not run: those only
        remote ops use, whose requests carry the constant's value in their steps
        (not in a slot), and that the run does not fetch."""
        in_slots: set[Operation] = set()
        for kind, what in actions:
            if kind == "send":
                for task, ops in what.items():
                    made = self._requests.get((id(plan), task, tuple(ops)))
                    if made is None or made.plan is not plan:
                        return actions
                    in_slots.update(tensor.op for tensor in made.slots)

        def needed(op: Operation) -> bool:
            return (
                op.type != "Const"
                or op in plan.fetched
                or op in in_slots
                or any(user not in placed.remote for user in plan.consumers[op])
            )

        kept: list[_Action] = []
        for kind, what in actions:
            if kind == "local":
                what = [op for op in what if needed(op)]
                if not what:
                    continue
            kept.append((kind, what))
        return kept

    def _replay(
        self,
        route: _Route,
        plan: Plan,
        placed: _Placed,
        values: dict[Tensor, Any],
        done: set[Operation],
        run: RunContext,
        fed: dict[Tensor, Any],
        giving_back: list[tuple[HostLink, str]],
        use_held: bool = False,
    ) -> None:
        """Take ``route``'s actions again (see ``_Route``); with ``use_held``, using the
        reads held ahead (see ``_ReadAhead``)."""
        used: dict[Task, str] = {}  # per task, the request whose reads ahead the run used
        for index, (kind, what) in enumerate(route.actions):
            if kind != "send":
                for op in what:
                    _run_here(op, values, done, run, fed)
                continue
            asks: dict[Task, _Ahead] = {}
            for task, entry in route.ahead.items():
                if index == entry.reads and use_held and entry.on:
                    with self._lock:
                        held, entry.held = entry.held, None
                    if held is not None:
                        self._store(task, entry.request, held[1], values, done)
                        what = {t: ops for t, ops in what.items() if t != task}
                        used[task] = held[0]
                elif index == entry.last and (entry.on or task in used):
                    # reads used are checked even if the route stopped reading ahead
                    # since (another thread's run found its reads changed)
                    reads = entry.request.blob if entry.on else None
                    asks[task] = _Ahead(entry, reads, used.get(task))
            if what:
                self._send(
                    what,
                    plan,
                    placed,
                    values,
                    done,
                    run.deadline,
                    run.cancellation,
                    giving_back,
                    asks,
                )

    @staticmethod
    def _run_local(
        plan: Plan,
        placed: _Placed,
        values: dict[Tensor, Any],
        done: set[Operation],
        run: RunContext,
        fed: dict[Tensor, Any],
        blocking: bool,
        actions: list[_Action],
    ) -> bool:
        """Run the local ops that are ready (non-blocking ones, or else the first blocking
        one); what ran is added to ``actions``."""
        ran: list[Operation] = []
        for op in plan.ops:
            if op in done or op in placed.remote or op.blocking != blocking:
                continue
            if all(p in done for p in placed.producers[op]):
                _run_here(op, values, done, run, fed)
                ran.append(op)
                if blocking:
                    break
        if ran:
            actions.append(("local", ran))
        return bool(ran)

    @staticmethod
    def _collect(plan: Plan, placed: _Placed, done: set[Operation]) -> dict[Task, list[Operation]]:
        """Per host, the remote ops whose inputs are known or made by the same request."""
        batches: dict[Task, list[Operation]] = {}
        members: dict[Task, set[Operation]] = {}
        for op in plan.ops:
            task = placed.remote.get(op)
            if task is None or op in done:
                continue
            inside = members.get(task, set())
            if all(p in done or p in inside for p in placed.producers[op]):
                batches.setdefault(task, []).append(op)
                members.setdefault(task, set()).add(op)
        for task, ops in batches.items():
            batches[task] = _blocking_last(ops, placed)
        return batches

    def _request(
        self, plan: Plan, task: Task, ops: list[Operation], values: dict[Tensor, Any]
    ) -> tuple[_Request, list[Any]]:
        """The request of ``ops`` to ``task``'s host: its steps, pickled once per plan and
        batch (constants inline), and the values that change from run to run (fed or
        computed tensors, handles), in the order of the steps' slots."""
        key = (id(plan), task, tuple(ops))
        found = self._requests.get(key)
        if found is None or found.plan is not plan:
            slots: list[Tensor] = []
            steps = write_steps(ops, values, plan.producers, slots)
            unanswered = _unanswered(plan, ops)
            gives_back = takes_go_back(ops, plan.consumers)
            contents = (steps, unanswered, gives_back)
            if any(step[0] == KERNEL for step in steps):
                from ray import cloudpickle  # a kernel is a closure: pickled by value

                blob = cloudpickle.dumps(contents, pickle.HIGHEST_PROTOCOL)  # type: ignore[no-untyped-call]
            else:
                blob = pickle.dumps(contents, pickle.HIGHEST_PROTOCOL)
            outputs = tuple(
                (
                    op,
                    op.outputs,
                    op.type in NODE_SPECS and NODE_SPECS[op.type].constructor,
                    i not in unanswered,
                )
                for i, op in enumerate(ops)
            )
            shared = tuple(
                i
                for i, tensor in enumerate(slots)
                if all(op.type in _COPY_THEIR_INPUTS for op in ops if tensor in op.inputs)
            )
            found = _Request(plan, blob, tuple(slots), outputs, [1], gives_back, shared, [0])
            with self._lock:
                if len(self._requests) > 256:
                    self._requests.clear()
                self._requests[key] = found
        label = task_label(task)
        sent = [values[tensor] for tensor in found.slots]
        for i, value in enumerate(sent):
            if type(value) is RemoteHandle:
                if value.task != label:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"A handle of an accumulator on task {value.task} was passed to an op "
                        f"on task {label}",
                    )
                sent[i] = value.handle
        return found, sent

    def _send(
        self,
        batches: dict[Task, list[Operation]],
        plan: Plan,
        placed: _Placed,
        values: dict[Tensor, Any],
        done: set[Operation],
        deadline: float | None,
        cancellation: Cancellation,
        giving_back: list[tuple[HostLink, str]],
        asks: dict[Task, _Ahead] | None = None,
    ) -> None:
        """Send a request to each host of ``batches`` (``asks``: their reads ahead), and
        store the answers.

        Raises:
            the error of the failing op earliest in the plan; _ReadsHadChanged when
            a host ran nothing because reads ahead the run used had changed.
        """
        import ray

        runtime = self.runtime
        changed = False
        # the requests that put values in, or asked for room in, this thread's buffer
        # of their host
        buffers: dict[Any, CallerBuffer] = {}
        pending: dict[Any, _Pending] = {}
        rest: dict[Any, list[Any]] = {}  # a split answer's pieces after the first
        try:
            for task, ops in batches.items():
                refuse_when_exiting(f"send a request to task {task_label(task)}")
                link = runtime.host(*task, deadline, cancellation)
                self._used.add(task)
                request = f"{self.key}/{next(self._count)}"
                blocking = any(op.blocking for op in ops)
                key = None
                if blocking:
                    key = cancellation.register(_canceller(link, request))
                    if key is None:
                        assert cancellation.error is not None
                        raise copy_error(cancellation.error)
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                made, sent = self._request(plan, task, ops, values)
                if made.gives_back:
                    # before it is sent: Ctrl-C may land inside Ray's submit, or as the
                    # answer arrives, before the run has stored it
                    giving_back.append((link, request))
                life = link.life_once()
                with self._lock:
                    known = self._known.setdefault(task, link.instance)
                buffer, room = _room(link, made, sent)
                ask = None if asks is None else asks.get(task)
                packed = Request(
                    known,
                    self.key,
                    runtime.caller(),
                    life,
                    request,
                    made.blob,
                    sent,
                    remaining,
                    made.answer_pieces[0],
                    None if ask is None else ask.reads,
                    None if ask is None else ask.reads_from,
                    room,
                )
                size = array_bytes(sent) if life is None else None
                arguments: tuple[Any, ...] = (packed,)
                if size is not None and size <= MEDIUM_BYTES:
                    arguments = split(packed)
                if made.answer_pieces[0] == 1:
                    ref = link.actor.run.remote(*arguments)
                else:
                    run = link.actor.run.options(num_returns=made.answer_pieces[0])
                    ref, *others = run.remote(*arguments)
                    rest[ref] = others
                pending[ref] = (task, ops, request, link, key, made)
                if buffer is not None:
                    buffers[ref] = buffer
            failures: list[tuple[Operation, BaseException]] = []
            answers = _answers_at_once(pending, rest)
            while pending:
                ref = _next_answer(pending)
                task, ops, request, link, key, made = pending[ref]
                try:
                    answer, pieces = (
                        answers.pop(ref)
                        if ref in answers
                        else _answer(ref, rest.get(ref, []), task, ops, key, self, link)
                    )
                    outcome: Outcome = unpack(answer, *pieces)
                    buffer = buffers.pop(ref, None)
                    if buffer is not None and type(outcome) is Done:
                        outcome = _taken_out(outcome, buffer)
                except ray.exceptions.RayError as exc:
                    del pending[ref]
                    if buffers.pop(ref, None) is not None:
                        link.drop_buffer()
                    cancellation.unregister(key)
                    if isinstance(exc, (ray.exceptions.RayActorError,)):
                        link.stale = True
                        self._forget(task)
                    failures.append(
                        (ops[0], ray_error(exc, f"the host of task {task_label(task)}"))
                    )
                    self._cancel_all(pending)
                    continue
                # answered: a later cancellation must not reach for it
                del pending[ref]
                cancellation.unregister(key)
                ask = None if asks is None else asks.get(task)
                if isinstance(outcome, ReadsChanged):
                    # nothing ran: nothing to give back either
                    if (link, request) in giving_back:
                        giving_back.remove((link, request))
                    if ask is not None:
                        ask.entry.changed += 1
                    changed = True
                    continue
                if ask is not None:
                    if ask.reads_from is not None:
                        ask.entry.used += 1
                    if type(outcome) is Done and outcome.read_ahead is not None:
                        with self._lock:
                            ask.entry.held = (request, outcome.read_ahead)
                made.answer_pieces[0] = _answer_pieces(answer, pieces, outcome)
                if type(outcome) is Done:
                    made.answer_room[0] = _large_bytes(outcome)
                failed = self._absorb(task, made, outcome, values, done, link)
                if failed is not None:
                    failures.append(failed)
                    self._cancel_all(pending)
            if failures:
                order = {op: i for i, op in enumerate(plan.ops)}
                raise min(failures, key=lambda found: order[found[0]])[1]
            if changed:
                raise _ReadsHadChanged
        except BaseException:
            hold_thread_when_exiting()
            # interrupted or failed while requests wait: withdraw their takes
            self._cancel_all(pending)
            for ref in pending:
                if ref in buffers:  # its host may still read the buffer
                    pending[ref][3].drop_buffer()
            raise

    @staticmethod
    def _cancel_all(pending: dict[Any, _Pending]) -> None:
        """Cancel the blocking requests still waiting for their answers; those that
        give back are left to the run's ``_give_back`` (every path here fails the run)."""
        if exiting():
            return  # the hosts withdraw an ended process's takes themselves
        for _task, ops, request, link, _key, made in pending.values():
            if not made.gives_back and any(op.blocking for op in ops):
                with contextlib.suppress(Exception):
                    link.actor.run.remote(("cancel", request))

    def _absorb(
        self,
        task: Task,
        made: _Request,
        outcome: Done | StepFailed | StepRefused,
        values: dict[Tensor, Any],
        done: set[Operation],
        link: HostLink,
    ) -> tuple[Operation, BaseException] | None:
        """Store a request's outputs; (op, error) of its failing step, if one failed."""
        if isinstance(outcome, Done):
            self._store(task, made, outcome.outputs, values, done)
            return None
        op = made.outputs[outcome.step][0]
        if isinstance(outcome, StepRefused):
            return op, outcome.error()
        failure = outcome.failure
        if failure.kind == RESTARTED:
            if link.instance == self._known.get(task):
                link.stale = True  # the host restarted since this process linked to it
            self._forget(task)
            error: errors.OpError = errors.UnavailableError(
                None,
                None,
                f"The host of task {task_label(task)} restarted since this session last used "
                "it: the state it held is lost (a restarted ps task starts empty)",
            )
        else:
            error = failure.error()
        error._op = op
        return op, error

    def _store(
        self,
        task: Task,
        made: _Request,
        answered_outputs: list[tuple[Any, ...]],
        values: dict[Tensor, Any],
        done: set[Operation],
    ) -> None:
        """Store the outputs of a request's steps that ran (the handles it made are kept)."""
        for (op, tensors, constructor, answered), outputs in zip(
            made.outputs, answered_outputs, strict=True
        ):
            if not answered:  # only a take's counts come back (see _unanswered)
                done.add(op)
                if outputs and op in _AFTER_TAKE:
                    _AFTER_TAKE[op](*outputs)
                continue
            if constructor:
                handle = RemoteHandle(task_label(task), int(outputs[0]))
                with self._lock:
                    self._handles[op] = handle
                    self._generation += 1
                outputs = (handle,)
            # a variable op's host step always returns the value; the op may not
            for tensor, value in zip(tensors, outputs[: len(tensors)], strict=True):
                values[tensor] = value
            done.add(op)
            if len(outputs) > len(tensors) and op in _AFTER_TAKE:
                _AFTER_TAKE[op](*outputs[len(tensors) :])

    def _forget(self, task: Task) -> None:
        """Drop what this session knows of ``task``'s host: its state is gone."""
        label = task_label(task)
        with self._lock:
            for op in [o for o, h in self._handles.items() if h.task == label]:
                del self._handles[op]
            self._known.pop(task, None)
            self._generation += 1

    def close(self) -> None:
        """Free what this session made privately on its hosts; shared state stays."""
        if exiting():
            return  # the hosts free an ended process's state themselves
        for task in list(self._used):
            link = self.runtime.link(*task)
            if link is not None and not link.stale:
                with contextlib.suppress(Exception):
                    link.actor.run.remote(("close_session", self.key))


def _answer_pieces(answer: Any, pieces: list[bytes], outcome: Outcome) -> int:
    """The pieces to ask the next answer of the same request in: as many as this
    one's pickled bytes need, or, for one Ray serialised, as its arrays would
    (one when they are too large to travel pickled)."""
    if type(answer) is bytes:
        return pieces_for(len(answer) + sum(len(piece) for piece in pieces))
    size = None
    if type(outcome) is Done:
        size = array_bytes(answer_values(outcome))
    if size is None or size > MEDIUM_BYTES:
        return 1
    return pieces_for(size + 4096)  # and the pickled tuples around the arrays


def wait_hint(op: Operation, text: str) -> None:
    """Have a long wait of ``op`` on another task's host say ``text`` too (what the
    program should check), beside the op's name and how long it has waited."""
    _WAIT_HINTS[op] = text


def wait_report(op: Operation, report: Callable[[HostState, float], str | None]) -> None:
    """Have a long wait of ``op`` on another task's host say ``report(state, waited)``
    (the hint's place; None: the hint), which may ask the host what it holds now."""
    _WAIT_REPORTS[op] = report


def after_take(op: Operation, record: Callable[[int, int], None]) -> None:
    """Call ``record(stale, global_step)`` with the counts of take ``op``'s accumulator
    each time the op completes on another task's host."""
    _AFTER_TAKE[op] = record


class HostState:
    """What a wait report may ask the host of a waiting request."""

    # a question to a host that does not answer this fast is left out of the report
    ANSWER_WITHIN = 10.0  # seconds

    def __init__(self, session: ClusterSession, task: Task, link: HostLink) -> None:
        self._session = session
        self.task = task_label(task)
        self._link = link

    def replicas(self) -> list[str]:
        """The task labels of the session's job (the replicas of a synchronous job)."""
        runtime = self._session.runtime
        job = runtime.job
        try:
            indices = runtime.cluster.task_indices(job)
        except (ValueError, KeyError, AttributeError):
            return []
        return [task_label((job, index)) for index in indices]

    def accumulator(self, constructor: Operation) -> dict[str, Any] | None:
        """The counters of the accumulator ``constructor`` made in this session (on
        whichever task's host) and the local step each replica last applied with
        (``"replicas"``), or None (not made in this session, or no answer)."""
        import ray

        with self._session._lock:
            handle = self._session._handles.get(constructor)
        if handle is None:
            return None
        link = self._link
        if handle.task != self.task:
            job, _, index = handle.task[len("/job:") :].rpartition("/task:")
            link = self._session.runtime.link(job, int(index))  # type: ignore[assignment]
            if link is None:
                return None
        try:
            found: dict[int, dict[str, Any]] = ray.get(
                link.actor.run.remote(("accumulator_report", [handle.handle])),
                timeout=self.ANSWER_WITHIN,
            )
        except Exception:
            return None
        return found.get(handle.handle)


def _answer(
    ref: Any,
    others: list[Any],
    task: Task,
    ops: list[Operation],
    key: Any,
    session: ClusterSession,
    link: HostLink,
) -> tuple[Any, list[Any]]:
    """The answer to a request and the pieces ``others`` of a split one, got together;
    one that may wait (a take: ``key`` is its cancellation's) logs what it waits for
    after ``REPORT_AFTER`` seconds, then after twice as long, ..."""
    import ray

    what = f"wait for task {task_label(task)}"
    refs = [ref, *others]
    if key is None:
        refuse_when_exiting(what)
        found = ray.get(refs)
        return found[0], found[1:]
    start = time.monotonic()
    wait = REPORT_AFTER
    while True:
        refuse_when_exiting(what)
        try:
            found = ray.get(refs, timeout=wait)
            return found[0], found[1:]
        except ray.exceptions.GetTimeoutError:
            waited = time.monotonic() - start
            blocking = [op for op in ops if op.blocking]
            state = HostState(session, task, link)
            hints = []
            for op in blocking:
                report = _WAIT_REPORTS.get(op)
                text = report(state, waited) if report is not None else None
                if text is None:
                    text = _WAIT_HINTS.get(op)
                if text:
                    hints.append(text)
            _log.warning(
                "A run has waited %.0f s for %s on task %s%s",
                waited,
                ", ".join(op.name for op in blocking),
                task_label(task),
                "".join(f"; {hint}" for hint in hints),
            )
            wait = waited


def _next_answer(pending: dict[Any, tuple[Any, ...]]) -> Any:
    """The request to wait for next: one that cannot wait on anything (no take), else
    the first answered; a ray.wait costs a call, so only when takes wait in several."""
    for ref, (*_, key, _made) in pending.items():
        if key is None or len(pending) == 1:  # no cancellation registered: no take
            return ref
    import ray

    refuse_when_exiting("wait for several tasks")
    return ray.wait(list(pending))[0][0]


def _answers_at_once(
    pending: dict[Any, tuple[Any, ...]], rest: dict[Any, list[Any]]
) -> dict[Any, tuple[Any, list[Any]]]:
    """The answers (and the pieces in ``rest`` of split ones) of several requests none
    of which has a take (none waits on another's), by one ``ray.get`` (a get per
    request costs a worker a wait each); empty for a single request, when one has a
    take, or when Ray failed one (each is then got on its own, to say which)."""
    if len(pending) < 2 or any(key is not None for *_, key, _made in pending.values()):
        return {}
    import ray

    refs = [piece for ref in pending for piece in (ref, *rest.get(ref, ()))]
    refuse_when_exiting("wait for several tasks")
    try:
        found = iter(ray.get(refs))
    except ray.exceptions.RayError:
        return {}
    answers = {}
    for ref in pending:
        answer = next(found)
        answers[ref] = (answer, [next(found) for _ in rest.get(ref, ())])
    return answers


def _canceller(link: HostLink, request: str) -> Callable[[errors.OpError], None]:
    def cancel(_error: errors.OpError) -> None:
        if exiting():
            return
        with contextlib.suppress(Exception):
            link.actor.run.remote(("cancel", request))

    return cancel


def _give_back(giving_back: list[tuple[HostLink, str]]) -> None:
    """A run failed (Ctrl-C, say) after sending these requests: their takes' rounds,
    which only the run fetched, go back (see ``host._Host.give_back``)."""
    if exiting():
        return  # the hosts withdraw an ended process's takes themselves
    for link, request in giving_back:
        with contextlib.suppress(Exception):
            link.actor.run.remote(("give_back", request))


def _move_to_hosts(plan: Plan, remote: dict[Operation, Task]) -> None:
    """Add to ``remote`` the cheap ops without state that sit between ops of hosts:
    every input from one host's ops (or from constants), every user on a host, not
    fetched. Their kernels travel in the request's steps (see host_steps). An
    op's control inputs do not decide where it runs (it has no effect to order:
    it runs once they are done, wherever it runs)."""
    if not remote:  # a run of this process's own task alone: nothing travels (nor needs Ray)
        return
    from ray import cloudpickle

    # a chain of cheap ops (a read's Identity, then a Mul) moves as a whole: each is a
    # candidate when its inputs are on one host or candidates there, then candidates
    # with a user or an input that stays here are dropped until none is left. Users
    # on another host are no reason to stay: the value travels through this process
    # either way, and computed on its inputs' host it is that host's output, which
    # the other host's ops wait for ahead of the takes (see _ahead_of_waits)
    candidates: dict[Operation, Task] = {}
    deciding: dict[Operation, list[Operation]] = {}

    def placed(op: Operation) -> Task | None:
        return remote.get(op) or candidates.get(op)

    for op in plan.ops:
        if op in remote or op.type not in HOST_KERNEL_TYPES or op in plan.fetched:
            continue
        inputs = {tensor.op for tensor in op.inputs}
        if op.type == "NoOp":  # no inputs: where the ops it orders run, if on one host
            found = list(plan.producers[op])
        else:
            found = [p for p in plan.producers[op] if p in inputs]
        if any(placed(p) is None and (p.type != "Const" or p.inputs) for p in found):
            continue  # an input computed here
        tasks = {placed(p) for p in found} - {None}
        if len(tasks) != 1 or not plan.consumers[op]:
            continue
        try:
            size = len(cloudpickle.dumps(op.kernel))  # type: ignore[no-untyped-call]
        except Exception:
            continue  # what it holds does not travel: it runs here
        if size <= HOST_KERNEL_BYTES:
            candidates[op] = tasks.pop()  # type: ignore[assignment]
            deciding[op] = found
    dropped = True
    while dropped:
        dropped = False
        for op in list(candidates):
            if any(placed(u) is None for u in plan.consumers[op]) or any(
                placed(p) is None and (p.type != "Const" or p.inputs) for p in deciding[op]
            ):
                del candidates[op]
                dropped = True
    remote.update(candidates)


def _lift_constants(
    plan: Plan, remote: dict[Operation, Task]
) -> dict[Operation, tuple[Operation, ...]]:
    """What each op of ``plan`` waits for, with local constants and NoOps waiting for
    nothing.

    A constant built under ``control_dependencies`` (``apply_grad(1.0)`` after an
    assign on a ps task, say) has no effect to order: only the ops that use it
    must come after its control inputs. So the constant runs at once and its
    users wait for those control inputs instead; the assign and the applies
    then go to their host as one request, in dependency order, instead of a
    request, a local constant and a second request. A NoOp (``group``, an
    optimizer's update) orders nothing by itself either: what waits for it
    waits for its inputs.
    """
    lifted: dict[Operation, tuple[Operation, ...]] = {}
    producers: dict[Operation, tuple[Operation, ...]] = {}
    for op in plan.ops:
        needs: list[Operation] = []
        for producer in plan.producers[op]:
            needs.append(producer)
            needs.extend(lifted.get(producer, ()))
        found = tuple(dict.fromkeys(needs))
        if op not in remote and (op.type == "Const" and not op.inputs or op.type == "NoOp"):
            lifted[op] = found
            producers[op] = ()
        else:
            producers[op] = found
    return producers


def _ahead_of_waits(
    plan: Plan, placed: _Placed, batches: dict[Task, list[Operation]]
) -> dict[Task, list[Operation]]:
    """``batches`` with the ops that may wait (a take, a dequeue, what needs them) held
    back for the next round on each host where ops of another host need the others'
    outputs: those go first, so that the other host's ops need not wait for the
    take (a sync-replicas chief's Adam updates on two ps tasks read the beta powers
    of one; with them read first, each task's takes and updates go together)."""
    inside = {op for ops in batches.values() for op in ops}
    found = dict(batches)
    for task, ops in batches.items():
        if not any(op.blocking for op in ops):
            continue
        waiting: set[Operation] = set()
        for op in ops:  # in dependency order
            if op.blocking or any(p in waiting for p in placed.producers[op]):
                waiting.add(op)
        first = [op for op in ops if op not in waiting]
        needed = any(
            p in first
            for op in plan.ops
            if op not in inside and placed.remote.get(op) not in (None, task)
            for p in placed.producers[op]
        )
        if first and needed:
            found[task] = first
    return found


def _deferred(
    plan: Plan, placed: _Placed, done: set[Operation], batches: dict[Task, list[Operation]]
) -> dict[Task, list[Operation]]:
    """``batches`` without those of the hosts that had better wait for another's answer.

    A host whose next ops wait only for ops of this round, some of them in another
    host's batch in which nothing may wait (no take, no dequeue), sends its batch
    with those ops in one request after that batch's answer, instead of one request
    now and another then: the same round trips, one request fewer (a worker's
    applies to two ps tasks and its token's dequeue after both, say). Never behind
    a batch that is deferred itself, and never all of them.
    """
    if len(batches) < 2:
        return batches
    inside = {op: task for task, ops in batches.items() for op in ops}
    may_wait = {task for task, ops in batches.items() if any(op.blocking for op in ops)}
    behind: dict[Task, set[Task]] = {}
    for op in plan.ops:
        task = placed.remote.get(op)
        if task not in batches or op in done or op in inside:
            continue
        producers = placed.producers[op]
        if not all(p in done or p in inside for p in producers):
            continue
        others = {inside[p] for p in producers if p in inside and inside[p] != task}
        if others and not others & may_wait:
            behind.setdefault(task, set()).update(others)
    deferred = {task for task, others in behind.items() if not others & behind.keys()}
    if not deferred or len(deferred) == len(batches):
        return batches
    return {task: ops for task, ops in batches.items() if task not in deferred}


def _unanswered(plan: Plan, ops: list[Operation]) -> tuple[int, ...]:
    """The steps of a request of ``ops`` whose outputs its answer need not carry: only
    ops of the same request use them, and the run does not fetch them (a chief's takes
    feed its optimizer's updates on the host; their means stay there). A take's
    stale count and global step still come back (see ``after_take``); an
    accumulator's handle always does."""
    batch = set(ops)
    return tuple(
        i
        for i, op in enumerate(ops)
        if not (op.type in NODE_SPECS and NODE_SPECS[op.type].constructor)
        and op not in plan.fetched
        and all(user in batch for user in plan.consumers[op])
    )


def _blocking_last(ops: list[Operation], placed: _Placed) -> list[Operation]:
    """``ops`` (in dependency order) with blocking ops, and what needs them, last."""
    downstream: set[Operation] = set()
    for op in ops:
        if op.blocking or any(p in downstream for p in placed.producers[op]):
            downstream.add(op)
    return [op for op in ops if op not in downstream] + [op for op in ops if op in downstream]


def _unseen_again(actions: list[_Action]) -> bool:
    """Whether running ``actions`` again would change nothing anyone sees: local ops
    without effects, and requests that only read variables."""
    for kind, what in actions:
        if kind == "local":
            if any(op.effects for op in what):
                return False
        elif any(op.type != "ReadVariableOp" for ops in what.values() for op in ops):
            return False
    return True


# Op types that copy their inputs or make new values from them, whatever they are: a
# request whose slot only such ops take may send it through shared memory.
_COPY_THEIR_INPUTS = frozenset(
    {
        "ResourceAccumulatorApplyGradient",
        "AccumulatorApplyGradient",
        "AssignVariableOp",
        "AssignAddVariableOp",
        "AssignSubVariableOp",
        *TRAINING_OPS,
    }
)


def _room(
    link: HostLink, made: _Request, sent: list[Any]
) -> tuple[CallerBuffer | None, Bulk | None]:
    """This thread's buffer for a request to ``link``'s host, when it shares this
    machine and the request sends or is answered large arrays: those of its shared
    slots are put in (replaced in ``sent`` by their descriptors), and the room after
    them is for the answer's. (None, None) when none is used."""
    shared = [i for i in made.shared_slots if worth_sharing(sent[i])]
    need = sum(aligned(sent[i].nbytes) for i in shared) + made.answer_room[0]
    buffer = link.buffer(need) if need >= SHARED_MEMORY_BYTES else None
    if buffer is None:
        return None, None
    offset = 0
    for i in shared:
        value = sent[i]
        sent[i] = buffer.put(value, offset)
        offset += aligned(value.nbytes)
    return buffer, buffer.describe(offset)


def _taken_out(outcome: Done, buffer: CallerBuffer) -> Done:
    """``outcome`` with the arrays its host wrote into ``buffer`` copied out."""

    def out(outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        if not any(type(value) is Bulk for value in outputs):
            return outputs
        return tuple(buffer.take_out(v) if type(v) is Bulk else v for v in outputs)

    ahead = outcome.read_ahead
    return Done(
        [out(outputs) for outputs in outcome.outputs],
        None if ahead is None else [out(outputs) for outputs in ahead],
    )


def _large_bytes(outcome: Done) -> int:
    """The room the large arrays of an answer take in a buffer."""
    return sum(aligned(v.nbytes) for v in answer_values(outcome) if worth_sharing(v))
