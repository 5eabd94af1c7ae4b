"""``tf.train.SyncReplicasOptimizer``: synchronous data-parallel training through accumulators.

Each worker's training op applies its gradients to one accumulator per
variable (shared by the variable's name, on the variable's device), tagged
with the worker's local step, and then waits for a token from the sync token
queue; the token is the global step the worker computes its next gradients
at. The chief runs the sync op in a queue runner: it takes the mean of
``replicas_to_aggregate`` gradients from every accumulator, applies them with
the wrapped optimizer (which adds 1 to the global step), and puts one token
per replica into the queue. A gradient computed at an older step than the
accumulator's arrives stale and is dropped.

Beyond TensorFlow, no wait of these ops is silent: a token dequeue or a take
that has waited ``WAIT_REPORT_AFTER`` seconds logs what it waits for (then
again after twice as long, ...), and says when nobody takes the gradients
(the chief's queue runner never started) or too few arrive. The chief logs
the stale gradients the accumulators dropped, and the optimizer's hook
counts them.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from tf_accum import errors
from tf_accum.compat.v1.conditional_accumulator import ConditionalAccumulator
from tf_accum.compat.v1.queues import FIFOQueue
from tf_accum.compat.v1.sparse_conditional_accumulator import SparseConditionalAccumulator
from tf_accum.graph import mode
from tf_accum.graph.array_ops import fill
from tf_accum.graph.collections import global_variables
from tf_accum.graph.executor import RunContext
from tf_accum.graph.graph import LOCAL_VARIABLES, Operation, Tensor
from tf_accum.graph.initialization import report_uninitialized_variables
from tf_accum.graph.ops import group, no_op
from tf_accum.graph.optimizers.optimizer import Optimizer
from tf_accum.graph.optimizers.slots import colocated_with
from tf_accum.graph.queue_runner import QueueRunner
from tf_accum.graph.remote_run import HostState, after_take, wait_hint, wait_report
from tf_accum.graph.session_run_hook import SessionRunHook
from tf_accum.graph.variables import Variable, assign
from tf_accum.indexed_slices import IndexedSlices
from tf_accum.raw_ops.common import accumulator_stats

# A token dequeue or a take says what it waits for after this long, then
# again after twice as long, ...
WAIT_REPORT_AFTER = 30.0  # seconds

_log = logging.getLogger("tf_accum")


class SyncReplicasOptimizer(Optimizer):
    """Aggregate the gradients of several replicas before each update (TF1).

    Args:
        opt: the optimizer that computes the gradients and applies their mean.
        replicas_to_aggregate: gradients averaged per variable for each update.
        total_num_replicas: the replicas that send gradients (default:
            ``replicas_to_aggregate``). More than ``replicas_to_aggregate``:
            the extra ones are backups, and the gradients that arrive after
            the update are stale and dropped. Fewer: replicas compute several
            batches per update (the chief's initial tokens let them start).
        variable_averages: an ``ExponentialMovingAverage`` the chief applies
            to ``variables_to_average`` after each update.
        variables_to_average: the variables to average.
        use_locking: passed on as TensorFlow's optimizers take it.
        name: the name scope of the accumulators.

    Differs from TensorFlow: waits that last are logged (``WAIT_REPORT_AFTER``),
    and the chief logs and counts the stale gradients dropped (see the hook's
    ``stale_gradients``).
    """

    def __init__(
        self,
        opt: Any,
        replicas_to_aggregate: int,
        total_num_replicas: int | None = None,
        variable_averages: Any = None,
        variables_to_average: Any = None,
        use_locking: bool = False,
        name: str = "sync_replicas",
    ) -> None:
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        super().__init__(use_locking, name)
        _log.info(  # TensorFlow's words, for logs that are searched for them
            "SyncReplicasV2: replicas_to_aggregate=%s; total_num_replicas=%s",
            replicas_to_aggregate,
            total_num_replicas,
        )
        self._opt = opt
        self._replicas_to_aggregate = replicas_to_aggregate
        self._total_num_replicas = total_num_replicas
        self._tokens_per_step = max(total_num_replicas, replicas_to_aggregate)
        self._variable_averages = variable_averages
        self._variables_to_average = variables_to_average
        self._gradients_applied = False
        self._global_step: Variable | None = None
        self._sync_token_queue: FIFOQueue | None = None
        self._chief_queue_runner: QueueRunner | None = None
        self._accumulator_list: list[tuple[Any, str]] = []
        self._local_step: Variable | None = None
        self._record = _SyncRecord()

    def compute_gradients(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped optimizer's ``compute_gradients``: ``[(gradient, variable), ...]``
        of one replica, which may be changed (clipped, ...) before ``apply_gradients``."""
        return self._opt.compute_gradients(*args, **kwargs)

    def apply_gradients(  # type: ignore[override]  # TensorFlow's signature for this class
        self, grads_and_vars: Any, global_step: Any = None, name: str | None = None
    ) -> Any:
        """Build the replica's training op and the chief's sync op.

        The training op applies each gradient to its variable's accumulator
        with the replica's local step, then takes a token from the sync
        token queue and makes it the local step. The chief's sync op (run by
        ``get_chief_queue_runner()``) takes the mean of
        ``replicas_to_aggregate`` gradients from each accumulator, applies
        them with the wrapped optimizer, which adds 1 to ``global_step``,
        and enqueues the new global step once per replica.

        Args:
            grads_and_vars: ``(gradient, variable)`` pairs; a gradient is a
                Tensor, an ``IndexedSlices`` or None (the variable is skipped).
            global_step: the global step variable (required).
            name: ignored, as in TensorFlow.

        Returns:
            The training op: the local step's assignment (a Tensor).

        Raises:
            ValueError: no pairs, no ``global_step``, or a gradient that is
                neither a Tensor nor an ``IndexedSlices``.
        """
        pairs = list(grads_and_vars)
        if not pairs:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        graph = mode.building_graph()
        if graph is None:
            graph = global_step.graph
            if graph is None:
                raise NotImplementedError(
                    "SyncReplicasOptimizer builds graph ops: build the model in a tf.Graph"
                )
            with graph.as_default():
                return self.apply_gradients(pairs, global_step, name)
        self._global_step = global_step
        step_dtype = global_step.dtype.base_dtype
        anchor = no_op()
        assert anchor is not None
        # the local step lives with the replica, not on a ps task
        with graph.device(None), graph.device(anchor.device or None):
            local_step = Variable(
                0,
                trainable=False,
                collections=[LOCAL_VARIABLES],
                dtype=step_dtype,
                name="sync_rep_local_step",
            )
        self._local_step = local_step
        self.local_step_init_op = assign(local_step, global_step)
        chief_init_ops: list[Any] = [self.local_step_init_op]
        self.ready_for_local_init_op = report_uninitialized_variables(global_variables())

        apply_ops: list[Any] = []
        aggregated: list[Any] = []
        take_ops: list[Operation] = []
        var_list: list[Variable] = []
        with graph.name_scope(self._name):
            for grad, var in pairs:
                var_list.append(var)
                if grad is None:
                    aggregated.append(None)
                    continue
                with colocated_with(var):
                    shared = var.name + "/grad_accum"
                    if isinstance(grad, Tensor):
                        accumulator: Any = ConditionalAccumulator(
                            grad.dtype, shape=var.get_shape(), shared_name=shared
                        )
                        apply_ops.append(accumulator.apply_grad(grad, local_step=local_step))
                        taken = accumulator.take_grad(self._replicas_to_aggregate)
                        take_ops.append(taken.op)
                    elif isinstance(grad, IndexedSlices):
                        accumulator = SparseConditionalAccumulator(
                            grad.values.dtype, shape=(), shared_name=shared
                        )
                        apply_ops.append(
                            accumulator.apply_indexed_slices_grad(grad, local_step=local_step)
                        )
                        taken = accumulator.take_indexed_slices_grad(self._replicas_to_aggregate)
                        take_ops.append(taken.values.op)
                    else:
                        raise ValueError("Unknown grad type!")
                    aggregated.append(taken)
                    self._accumulator_list.append((accumulator, var.op.device))

            step_device = global_step.op.device or None
            with graph.device(step_device), graph.name_scope(""):
                update_op = self._opt.apply_gradients(
                    list(zip(aggregated, var_list, strict=True)), global_step
                )
                token_queue = FIFOQueue(
                    -1, step_dtype, shapes=(), name="sync_token_q", shared_name="sync_token_q"
                )
                self._sync_token_queue = token_queue
                with graph.control_dependencies(apply_ops):
                    token = token_queue.dequeue()
                train_op = assign(local_step, token)
                with graph.control_dependencies([update_op]):
                    # read after the update: the tokens carry the new step
                    tokens = fill([self._tokens_per_step], global_step.read_value())
                    sync_op: Any = token_queue.enqueue_many((tokens,))
                if self._variable_averages is not None:
                    with graph.control_dependencies([sync_op]):
                        sync_op = self._variable_averages.apply(self._variables_to_average)
                self._chief_queue_runner = QueueRunner(token_queue, [sync_op])

            for accumulator, device in self._accumulator_list:
                with graph.device(None), graph.device(device or None):
                    chief_init_ops.append(
                        accumulator.set_global_step(global_step, name="SetGlobalStep")
                    )
            self.chief_init_op = group(*chief_init_ops)

        constructors = [a.accumulator_ref.op for a, _ in self._accumulator_list]
        shared_names = [var.name + "/grad_accum" for g, var in pairs if g is not None]
        replica = local_step.op.name + (
            f" ({local_step.op.device})" if local_step.op.device else ""
        )
        if apply_ops:
            _record_applies(_as_op(apply_ops[0]), shared_names[0], replica)
        _report_waits(token.op, self._describe_token_wait(constructors, shared_names))
        # on a cluster these ops run on a ps task's host: the run reports from what the
        # host holds, and the hint when it cannot be asked
        wait_report(token.op, self._report_token_wait_on_host(token.op, constructors))
        wait_hint(
            token.op,
            "a replica waits for the chief's sync token: has the chief started the queue "
            "runner of get_chief_queue_runner() (make_session_run_hook(is_chief=True) does)"
            + (
                " and run get_init_tokens_op()"
                if self._total_num_replicas < self._replicas_to_aggregate
                else ""
            )
            + "? If it has, it waits for the gradients of other replicas, or the chief "
            "has ended (a replica still training after the chief's last step gets no token)",
        )
        for index, op in enumerate(take_ops):
            wait_hint(
                op,
                f"the chief waits for replicas_to_aggregate={self._replicas_to_aggregate} "
                f"gradients of the step from total_num_replicas={self._total_num_replicas} "
                "replicas: the missing ones have not run their training op for this step "
                "(stopped, out of data, or slower)",
            )
            wait_report(op, self._report_take_wait_on_host(op, constructors[index]))
            _report_waits(
                op,
                self._describe_take_wait(shared_names[index]),
                self._taken if index == 0 else None,
            )
        if take_ops:
            after_take(take_ops[0], self._count_stale)
        self._gradients_applied = True
        return train_op

    # --- the chief's ops --------------------------------------------------------------

    def get_chief_queue_runner(self) -> QueueRunner:
        """The queue runner the chief starts: it runs the sync op (aggregate, apply,
        add the tokens of the next step) over and over.

        Raises:
            ValueError: before ``apply_gradients``.
        """
        if not self._gradients_applied or self._chief_queue_runner is None:
            raise ValueError("Should be called after apply_gradients().")
        return self._chief_queue_runner

    def get_init_tokens_op(self, num_tokens: int = -1) -> Any:
        """The op that puts the first tokens into the sync token queue, run once by the chief.

        They let the replicas start before the first update; fewer replicas
        than ``replicas_to_aggregate`` need at least the difference.

        Args:
            num_tokens: tokens to add; -1 means ``replicas_to_aggregate``.

        Returns:
            An enqueue op, or a no-op for no tokens.

        Raises:
            ValueError: before ``apply_gradients``, or fewer than
                ``replicas_to_aggregate - total_num_replicas`` tokens.
        """
        if not self._gradients_applied:
            raise ValueError("get_init_tokens_op() should be called after apply_gradients().")
        needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens == -1:
            num_tokens = self._replicas_to_aggregate
        elif num_tokens < needed:
            raise ValueError(
                f"Too few tokens to finish the first step: {num_tokens} (given) vs "
                f"{needed} (needed)"
            )
        global_step = self._global_step
        queue = self._sync_token_queue
        assert global_step is not None and queue is not None and global_step.graph is not None
        graph = global_step.graph
        with (
            graph.as_default(),
            graph.device(global_step.op.device or None),
            graph.name_scope(""),
        ):
            if num_tokens > 0:
                tokens = fill([num_tokens], global_step)
                return queue.enqueue_many((tokens,))
            return no_op(name="no_init_tokens")

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1) -> SyncReplicasHook:
        """A hook that runs the replica's initialisation once its session exists:
        on the chief also the initial tokens, and it starts the chief's queue runner."""
        return SyncReplicasHook(self, is_chief, num_tokens)

    # --- what the wrapped optimizer has ---------------------------------------------------

    def get_slot(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped optimizer's slot (``get_slot(var, name)``)."""
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped optimizer's slot names."""
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self) -> Any:
        """The wrapped optimizer's variables (not the local step)."""
        return self._opt.variables()

    # --- counting and reporting -----------------------------------------------------------

    @property
    def stale_gradients(self) -> int:
        """Stale gradients the first variable's accumulator dropped, as the chief's
        last take saw (tf_accum's; counted in the chief's process)."""
        return self._record.stale

    @property
    def steps_aggregated(self) -> int:
        """Takes of the first variable's accumulator the chief completed (this process)."""
        return self._record.steps

    def _taken(self, context: RunContext, inputs: Sequence[Any]) -> None:
        """After the chief's take from the first accumulator: count and log stale drops."""
        stats = _stats(inputs[0])
        if stats is None:
            return
        self._count_stale(int(stats["stale"] or 0), stats["global_step"])

    def _count_stale(self, stale: int, step: Any) -> None:
        """Count a take of the chief after which the first accumulator had dropped
        ``stale`` stale gradients in all (its global step ``step``); log the new ones."""
        dropped = self._record.taken(stale)
        if dropped:
            _log.info(
                "SyncReplicasOptimizer: %d stale gradient(s) dropped before the update to step "
                "%s (%d in all); they came from replicas behind the global step",
                dropped,
                step,
                stale,
            )

    def _take_wait_text(
        self, op_name: str, waited: float, stats: dict[str, Any] | None, seen: str
    ) -> str:
        """What a waiting take of the chief says, from its accumulator's counters."""
        head = f"SyncReplicasOptimizer: the chief's take {op_name} has waited {waited:.0f} s"
        if stats is None:
            return f"{head} for {self._replicas_to_aggregate} gradients"
        return (
            f"{head} for the gradients of step {stats['global_step']}: "
            f"{stats['num_accumulated']} of replicas_to_aggregate={self._replicas_to_aggregate} "
            f"have arrived ({stats['stale']} stale dropped so far); "
            f"total_num_replicas={self._total_num_replicas} replicas should send them. "
            + (
                "With fewer replicas than replicas_to_aggregate, the chief must run "
                "get_init_tokens_op() so that replicas can send several gradients"
                if self._total_num_replicas < self._replicas_to_aggregate
                else "The missing replicas have not run their training op for this step "
                "(stopped, out of data, or slower)"
            )
            + seen
        )

    def _token_wait_text(
        self, op_name: str, waited: float, stats: dict[str, Any] | None, seen: str
    ) -> str:
        """What a replica's waiting token dequeue says, from the first accumulator's counters."""
        replicas = self._replicas_to_aggregate
        head = (
            f"SyncReplicasOptimizer: a replica's training op has waited {waited:.0f} s "
            f"for the chief's sync token ({op_name})"
        )
        if stats is None:
            return (
                f"{head}. Has the chief started the queue runner of "
                "get_chief_queue_runner() and run get_init_tokens_op()?"
            )
        if not stats["waiting"]:
            return (
                f"{head}; nobody takes the gradients: the chief has not started the queue "
                "runner of get_chief_queue_runner() (make_session_run_hook(is_chief=True) "
                "starts it in a MonitoredTrainingSession; with a Supervisor pass "
                "queue_runners or call start_queue_runners), or it has stopped. "
                f"Accumulators: {stats['num_accumulated']} gradient(s) waiting at step "
                f"{stats['global_step']}"
            )
        text = (
            f"{head}; the chief waits for gradients of step {stats['global_step']}: "
            f"{stats['num_accumulated']} of replicas_to_aggregate={replicas} have arrived"
        )
        if self._total_num_replicas < replicas:
            text += (
                f"; with total_num_replicas={self._total_num_replicas} below "
                "replicas_to_aggregate, the chief must run get_init_tokens_op() so that "
                "replicas can send several gradients"
            )
        else:
            text += "; the other replicas have not applied theirs yet"
        return text + seen

    def _describe_take_wait(
        self, shared_name: str
    ) -> Callable[[RunContext, Sequence[Any], float], str]:
        def describe(context: RunContext, inputs: Sequence[Any], waited: float) -> str:
            op = context.op
            stats = _stats(inputs[0])
            seen = (
                "" if stats is None else _replicas_seen(context, shared_name, stats["global_step"])
            )
            return self._take_wait_text(op.name if op else "", waited, stats, seen)

        return describe

    def _describe_token_wait(
        self, constructors: list[Operation], shared_names: list[str]
    ) -> Callable[[RunContext, Sequence[Any], float], str]:
        def describe(context: RunContext, inputs: Sequence[Any], waited: float) -> str:
            op = context.op
            stats = _stats(_made(context, constructors[0])) if constructors else None
            seen = ""
            if stats is not None and stats["waiting"]:
                seen = _replicas_seen(context, shared_names[0], stats["global_step"])
            return self._token_wait_text(op.name if op else "sync_token_q", waited, stats, seen)

        return describe

    def _report_take_wait_on_host(
        self, op: Operation, constructor: Operation
    ) -> Callable[[HostState, float], str | None]:
        def report(state: HostState, waited: float) -> str | None:
            stats = state.accumulator(constructor)
            if stats is None:
                return None
            seen = _replicas_on_cluster(stats.pop("replicas"), stats["global_step"], state)
            return self._take_wait_text(op.name, waited, stats, seen)

        return report

    def _report_token_wait_on_host(
        self, op: Operation, constructors: list[Operation]
    ) -> Callable[[HostState, float], str | None]:
        def report(state: HostState, waited: float) -> str | None:
            stats = state.accumulator(constructors[0]) if constructors else None
            if stats is None:
                return None
            seen = ""
            if stats["waiting"]:
                seen = _replicas_on_cluster(stats.pop("replicas"), stats["global_step"], state)
            return self._token_wait_text(op.name, waited, stats, seen)

        return report


# ``SyncReplicasOptimizerV2``: the name TensorFlow 0.12 and 1.0 gave the same optimizer.
SyncReplicasOptimizerV2 = SyncReplicasOptimizer


class SyncReplicasHook(SessionRunHook):
    """The hook of :meth:`SyncReplicasOptimizer.make_session_run_hook`.

    Once the session exists it checks that the global variables are
    initialized, runs the local step's initialisation (the chief: the
    accumulators' global step too), and on the chief the initial tokens, and
    starts the chief's queue runner with the session's coordinator.

    ``stale_gradients`` and ``steps_aggregated`` give the chief's counts
    (tf_accum's; TensorFlow's hook has no counts).
    """

    def __init__(self, sync_optimizer: SyncReplicasOptimizer, is_chief: bool, num_tokens: int):
        self._sync_optimizer = sync_optimizer
        self._is_chief = is_chief
        self._num_tokens = num_tokens
        self._local_init_op: Any = None
        self._ready_for_local_init_op: Any = None
        self._q_runner: QueueRunner | None = None
        self._init_tokens_op: Any = None

    def begin(self) -> None:
        """Build the chief's or the replica's initialisation ops.

        Raises:
            ValueError: the optimizer's ``apply_gradients`` has not been called.
        """
        optimizer = self._sync_optimizer
        if not optimizer._gradients_applied:
            raise ValueError(
                "SyncReplicasOptimizer.apply_gradient should be called before using the hook."
            )
        self._ready_for_local_init_op = optimizer.ready_for_local_init_op
        if self._is_chief:
            self._local_init_op = optimizer.chief_init_op
            self._q_runner = optimizer.get_chief_queue_runner()
            self._init_tokens_op = optimizer.get_init_tokens_op(self._num_tokens)
        else:
            self._local_init_op = optimizer.local_step_init_op
            self._q_runner = None
            self._init_tokens_op = None

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Run the initialisation; on the chief, the tokens and the queue runner.

        Raises:
            RuntimeError: global variables not initialized.
        """
        missing = session.run(self._ready_for_local_init_op)
        if len(missing):
            names = ", ".join(n.decode() if isinstance(n, bytes) else str(n) for n in missing)
            raise RuntimeError(
                "Init operations did not make model ready for SyncReplicasOptimizer local_init. "
                f"Init op: {_op_name(self._local_init_op)}, error: Variables not initialized: "
                f"{names}"
            )
        session.run(self._local_init_op)
        if self._init_tokens_op is not None:
            session.run(self._init_tokens_op)
        if self._q_runner is not None:
            self._q_runner.create_threads(session, coord=coord, daemon=True, start=True)

    @property
    def stale_gradients(self) -> int:
        """Stale gradients dropped so far, as the chief saw them (0 on other replicas)."""
        return self._sync_optimizer.stale_gradients

    @property
    def steps_aggregated(self) -> int:
        """Updates the chief made in this process (0 on other replicas)."""
        return self._sync_optimizer.steps_aggregated


class _SyncRecord:
    """The chief's counts. Guarded by ``_lock``: ``steps`` takes seen, ``stale`` the
    first accumulator's stale count at the last of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.steps = 0
        self.stale = 0

    def taken(self, stale: int) -> int:
        """Count a take that saw ``stale`` stale gradients in all; returns the new ones."""
        with self._lock:
            self.steps += 1
            new = max(0, stale - self.stale)
            self.stale = max(stale, self.stale)
            return new


def _op_name(op: Any) -> str:
    return str(getattr(op, "name", op))


def _stats(handle: Any) -> dict[str, int | None] | None:
    """An accumulator's counters, or None where they cannot be read here (another process)."""
    if handle is None:
        return None
    try:
        return accumulator_stats(handle)
    except (errors.OpError, TypeError, LookupError):
        return None


class _NotMade(LookupError):
    pass


def _made(context: RunContext, constructor: Operation) -> Any:
    """The handle ``constructor`` made in the running session, or None if it has not run."""

    def refuse() -> int:
        raise _NotMade()

    try:
        return context.session.resource_for(constructor, refuse)
    except (_NotMade, AttributeError):
        return None


class _Contributions:
    """The local step each replica of this process last applied gradients with, per
    session and accumulator (by shared name), for the wait messages.

    Guarded by ``_lock``; sessions are held weakly.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_session: weakref.WeakKeyDictionary[Any, dict[str, dict[str, int]]] = (
            weakref.WeakKeyDictionary()
        )

    def record(self, session: Any, accumulator: str, replica: str, step: int) -> None:
        with self._lock:
            self._by_session.setdefault(session, {}).setdefault(accumulator, {})[replica] = step

    def of(self, session: Any, accumulator: str) -> dict[str, int]:
        with self._lock:
            return dict(self._by_session.get(session, {}).get(accumulator, {}))


_CONTRIBUTIONS = _Contributions()


def _as_op(item: Any) -> Operation:
    found: Operation = item.op if isinstance(item, Tensor) else item
    return found


def _record_applies(op: Operation, accumulator: str, replica: str) -> None:
    """Make ``op`` (an apply of a replica) note the local step it applied with."""
    inner = op.kernel

    def kernel(context: RunContext, inputs: list[Any]) -> Sequence[Any]:
        outputs = inner(context, inputs)
        _CONTRIBUTIONS.record(context.session, accumulator, replica, int(inputs[1]))
        return outputs

    op.kernel = kernel


def _replicas_seen(context: RunContext, accumulator: str, step: Any) -> str:
    """Which replicas of this process have sent a gradient for ``step``, and which not."""
    seen = _CONTRIBUTIONS.of(context.session, accumulator)
    if not seen or step is None:
        return ""
    return _who_sent("Replicas of this process", seen, step)


def _replicas_on_cluster(seen: dict[str, int], step: Any, state: HostState) -> str:
    """Which replicas (worker tasks) have sent a gradient for ``step``, which not, and
    which tasks of the session's job never sent one."""
    if step is None:
        return ""
    never = [task for task in state.replicas() if task not in seen]
    if not seen and not never:
        return ""
    return _who_sent("Replicas", seen, step, never)


def _who_sent(label: str, seen: dict[str, int], step: Any, never: Sequence[str] = ()) -> str:
    sent = sorted(r for r, s in seen.items() if s >= step)
    behind = sorted(f"{r} (last at step {s})" for r, s in seen.items() if s < step)
    behind += [f"{task} (none yet)" for task in never]
    return (
        f". {label}: sent for step {step}: {', '.join(sent) or 'none'}; "
        f"not yet: {', '.join(behind) or 'none'}"
    )


def _report_waits(
    op: Operation,
    describe: Callable[[RunContext, Sequence[Any], float], str],
    after: Callable[[RunContext, Sequence[Any]], None] | None = None,
) -> None:
    """Make ``op``'s kernel (a take or a dequeue) log ``describe(...)`` while it waits.

    The kernel waits in slices that end at the next report: a take or a
    dequeue that stops waiting consumes nothing, so waiting again is the same
    wait. ``after`` is called once the kernel has completed.
    """
    inner = op.kernel

    def kernel(context: RunContext, inputs: list[Any]) -> Sequence[Any]:
        start = time.monotonic()
        report_at = start + WAIT_REPORT_AFTER
        while True:
            deadline = report_at
            if context.deadline is not None:
                deadline = min(deadline, context.deadline)
            sliced = RunContext(context.session, deadline, context.cancellation)
            sliced.op = context.op
            try:
                outputs = inner(sliced, inputs)
                break
            except errors.DeadlineExceededError:
                now = time.monotonic()
                if now < report_at or (context.deadline is not None and now >= context.deadline):
                    raise  # the op's own timeout, or the run's deadline
                waited = now - start
                _log.warning("%s", describe(context, inputs, waited))
                report_at = now + waited
        if after is not None:
            after(context, inputs)
        return outputs

    op.kernel = kernel
