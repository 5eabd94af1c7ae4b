"""``Session`` and ``InteractiveSession``: where a graph's ops run.

Each session has its own resource table (its own accumulators, as each TF1
local session has its own resource manager) and its own variable values. A
session on a ``tf.train.Server``'s target runs the ops placed on other tasks
on their hosts (tf_accum.graph.remote_run), shared by the cluster.
Many threads may call ``run`` on one session at once. ``close()`` cancels
every take still waiting in it with CancelledError and frees its accumulators.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.accumulators.attempts import Cancellation
from tf_accum.accumulators.interrupts import delivered
from tf_accum.dtypes import string
from tf_accum.graph import mode
from tf_accum.graph.executor import Plan, execute, make_plan
from tf_accum.graph.fetches import fetched_value, flatten
from tf_accum.graph.graph import Graph, Operation, Tensor, is_symbolic
from tf_accum.graph.variable_store import VariableStore
from tf_accum.resources.local import LocalResourceTable

_local = threading.local()
PLAN_CACHE_SIZE = 256
_NOTHING_FED: frozenset[int] = frozenset()
# The cancellation of runs with no blocking op: no take ever joins it.
_NEVER_CANCELLED = Cancellation()


def _session_stack() -> list[Session]:
    stack: list[Session] | None = getattr(_local, "sessions", None)
    if stack is None:
        stack = _local.sessions = []
    return stack


def get_default_session() -> Session | None:
    """This thread's default session (innermost ``as_default()`` or ``with``), or None."""
    stack = _session_stack()
    return stack[-1] if stack else None


def session_for(graph: Graph, session: Session | None, what: str, verb: str) -> Session:
    """The session a Tensor.eval() or Operation.run() uses.

    Raises:
        ValueError: none given and no default session, or a session of another graph.
    """
    acting = "evaluate tensor" if what == "tensor" else "execute operation"
    if session is None:
        session = get_default_session()
        if session is None:
            raise ValueError(
                f"Cannot {acting} using `{verb}()`: No default session is registered. Use "
                f"`with sess.as_default()` or pass an explicit session to `{verb}(session=sess)`"
            )
    if session.graph is not graph:
        raise ValueError(
            f"Cannot use the given session to {acting}: the {what}'s graph is different from "
            "the session's graph."
        )
    return session


class Session:
    """Runs ops of one graph.

    Args:
        target: "" (everything in this process), or the ``target`` of a
            ``tf.train.Server`` made in this process: state placed on other
            tasks (ps tasks) is then shared with every session of the cluster.
        graph: the graph to run (default: the default graph).
        config: a ``ConfigProto``; accepted, and its settings are ignored.

    Raises:
        errors.UnimplementedError: a ``target`` no Server of this process has.
    """

    def __init__(self, target: str = "", graph: Graph | None = None, config: Any = None) -> None:
        self._target = target
        self._cluster: Any = None
        if graph is not None and not isinstance(graph, Graph):
            raise TypeError(
                f'Argument `graph` must be a tf.Graph, but got "{type(graph).__name__}"'
            )
        if target:
            from tf_accum.graph.cluster import server_for_target

            self._cluster = server_for_target(target).runtime.new_session()
        self._graph = graph if graph is not None else mode.get_default_graph()
        self.table = LocalResourceTable()
        self.variables = VariableStore()
        self._lock = threading.Lock()
        self._resources: dict[Operation, int] = {}
        # the runs in progress that can wait, and the thread of each
        self._runs: dict[Cancellation, int] = {}
        self._plans: dict[tuple[Any, ...], Plan] = {}
        self._closed = False
        self._entered: list[contextlib.ExitStack] = []
        self._finalizer = weakref.finalize(self, _release, self.table)

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def sess_str(self) -> str:
        return self._target

    # --- running ---------------------------------------------------------------

    def run(
        self, fetches: Any, feed_dict: Any = None, options: Any = None, run_metadata: Any = None
    ) -> Any:
        """Run the ops needed for ``fetches`` once and return their values.

        Args:
            fetches: a Tensor, Operation, Variable or name, or any nesting of
                lists, tuples, dicts and named tuples of them. Operations fetch
                as None; a tensor fetched twice is computed once.
            feed_dict: a mapping of values for tensors (placeholders or any
                other), keyed by the tensor or its name; converted to the
                tensor's dtype and checked against its static shape. As in
                TensorFlow, a Python int that the dtype cannot hold is a
                TypeError; integers in lists and numpy values wrap around.
            options: a ``RunOptions``; ``timeout_in_ms`` bounds the run.
            run_metadata: accepted and left empty.

        Returns:
            ``fetches`` with each element replaced by its value (numpy arrays,
            numpy scalars for scalars, None for operations, an
            ``IndexedSlicesValue`` of arrays for an IndexedSlices).

        Raises:
            RuntimeError: the session is closed.
            TypeError: a bad fetch, a ``feed_dict`` that is no mapping, a
                Python int the fed tensor's dtype cannot hold.
            ValueError: a bad fetch or feed.
            DeadlineExceededError: the run took longer than ``timeout_in_ms``; a
                take it was waiting in is withdrawn and consumes nothing.
            CancelledError: the session was closed during the run (a waiting
                take: "TakeGrad operation was cancelled"; anything else the
                close took away: "Session has been closed.").
            The error of a failing op (InvalidArgumentError, ...).
        """
        self._check_open()
        elements, rebuild = flatten(self._graph, fetches)
        fed = self._feeds(feed_dict) if feed_dict else {}
        key = (tuple(map(id, elements)), frozenset(map(id, fed)) if fed else _NOTHING_FED)
        plan = self._plans.get(key)
        if plan is None:
            plan = make_plan(elements, frozenset(fed))
            if len(self._plans) >= PLAN_CACHE_SIZE:
                self._plans.clear()
            self._plans[key] = plan
        runner = execute if self._cluster is None else self._cluster.execute
        if plan.takes_go_back:
            # a round its takes took goes back unless this call returns it
            return delivered(self._run_plan, runner, plan, fed, options, elements, rebuild)
        return self._run_plan(runner, plan, fed, options, elements, rebuild)

    def _run_plan(
        self,
        runner: Any,
        plan: Plan,
        fed: dict[Tensor, Any],
        options: Any,
        elements: Any,
        rebuild: Any,
    ) -> Any:
        try:
            if not plan.blocking and self._cluster is None:
                # Nothing in it can wait, so there is nothing for a deadline or
                # close() to cancel (a cluster run may wait for a ps task to start).
                values = runner(self, plan, fed, None, _NEVER_CANCELLED)
            else:
                timeout_ms = getattr(options, "timeout_in_ms", 0) or 0
                deadline = time.monotonic() + timeout_ms / 1000.0 if timeout_ms > 0 else None
                cancellation = Cancellation()
                with self._lock:
                    self._check_open()
                    self._runs[cancellation] = threading.get_ident()
                try:
                    values = runner(self, plan, fed, deadline, cancellation)
                finally:
                    with self._lock:
                        self._runs.pop(cancellation, None)
        except (errors.NotFoundError, errors.FailedPreconditionError):
            # close() on another thread freed what this run was using (an
            # accumulator, a variable's value): as in TensorFlow, the run was
            # cancelled by the close, whatever op noticed it first
            if self._closed:
                raise errors.CancelledError(None, None, "Session has been closed.") from None
            raise
        # As in TensorFlow, a fed tensor fetches as the value fed (after conversion).
        return rebuild([_result(e, values, fed) for e in elements])

    def _feeds(self, feed_dict: Any) -> dict[Tensor, Any]:
        if not feed_dict:
            return {}
        if not isinstance(feed_dict, Mapping):
            raise TypeError(
                "FlattenDictItems: 'dict' must be a dictionary or collection.Mapping type "
                f"object, instead of '{type(feed_dict).__name__}'."
            )
        fed: dict[Tensor, Any] = {}
        graph = self._graph
        for key, value in feed_dict.items():
            if type(key) is Tensor and key.graph is graph:
                fed[key] = _feed_value(key, value)
                continue
            try:
                element = graph.as_graph_element(key)
            except (TypeError, KeyError, ValueError) as error:
                raise TypeError(f"Cannot interpret feed_dict key as Tensor: {error}") from None
            if not isinstance(element, Tensor):
                raise TypeError(
                    f"Cannot interpret feed_dict key as Tensor: Can not convert a Operation "
                    f"{element.name!r} into a Tensor."
                )
            fed[element] = _feed_value(element, value)
        return fed

    def resource_for(self, op: Operation, create: Any) -> int:
        """The handle a constructor op made in this session, made at its first run.

        As in TensorFlow, a constructor op creates its accumulator once per
        session and then keeps returning that handle, also after the
        accumulator was destroyed (its later use is then NotFoundError).
        """
        with self._lock:
            handle = self._resources.get(op)
            if handle is None:
                handle = self._resources[op] = int(create())
            return handle

    # --- lifetime --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")

    def close(self) -> None:
        """Cancel the session's waiting takes (CancelledError) and free its accumulators.

        Later runs raise RuntimeError. Closing twice is harmless.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            runs = list(self._runs)
        for cancellation in runs:
            cancellation.cancel(
                errors.CancelledError(None, None, "TakeGrad operation was cancelled")
            )
        self._finalizer()
        self.variables.clear()
        if self._cluster is not None:
            self._cluster.close()

    def _cancel_runs_of_threads(self, threads: Collection[int], error: errors.OpError) -> int:
        """Cancel the runs in progress on these threads (by ident) with ``error``: a
        queue runner's, once its coordinator was asked to stop. Returns how many."""
        with self._lock:
            runs = [run for run, thread in self._runs.items() if thread in threads]
        return sum(run.cancel(error) for run in runs)

    @contextlib.contextmanager
    def as_default(self) -> Iterator[Session]:
        """Make this the default session (for eval() and run()) on this thread, in the block."""
        stack = _session_stack()
        stack.append(self)
        try:
            yield self
        finally:
            if stack and stack[-1] is self:
                stack.pop()
            else:
                stack.remove(self)

    def __enter__(self) -> Session:
        # As TensorFlow: the session's graph becomes the default graph too.
        entered = contextlib.ExitStack()
        entered.enter_context(self._graph.as_default())
        entered.enter_context(self.as_default())
        self._entered.append(entered)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._entered:
            self._entered.pop().close()
        self.close()

    @staticmethod
    def reset(target: str, containers: Any = None, config: Any = None) -> None:
        """Empty the state every other task of ``target``'s cluster holds (a ps task's
        accumulators, waiting takes cancelled, and variables), for every session.

        Raises:
            UnimplementedError: no Server of this process has ``target``.
        """
        from tf_accum.graph.cluster import server_for_target

        server_for_target(target).runtime.reset()

    def list_devices(self) -> list[Any]:
        return []


def _result(element: Tensor | Operation, values: dict[Tensor, Any], fed: dict[Tensor, Any]) -> Any:
    if isinstance(element, Operation):
        return None
    if element in fed:
        return fed[element]
    value = values[element]
    if fed and any(value is given for given in fed.values()):
        # passed through (identity, placeholder_with_default): TensorFlow hands
        # back a new array, never the caller's own
        value = np.array(value)
    return fetched_value(value)


def _release(table: LocalResourceTable) -> None:
    table.close()


class InteractiveSession(Session):
    """A session that makes itself (and its graph) this thread's default at once,
    for shells and notebooks: ``t.eval()`` and ``op.run()`` need no ``with``."""

    def __init__(self, target: str = "", graph: Graph | None = None, config: Any = None) -> None:
        super().__init__(target, graph, config)
        self._creator = threading.get_ident()
        self._interactive = contextlib.ExitStack()
        self._interactive.enter_context(self._graph.as_default())
        self._interactive.enter_context(self.as_default())

    def close(self) -> None:
        """As ``Session.close``; on the thread that made it, it stops being the default.

        Closed on another thread, it stays the default session (and its graph
        the default graph) of the thread that made it, as in TensorFlow 2.21:
        that thread's ``eval()`` then raises RuntimeError (a closed session).
        """
        super().close()
        if threading.get_ident() == self._creator:
            with contextlib.suppress(AssertionError, ValueError):
                self._interactive.close()


def _numeric_feed(value: Any, dtype: np.dtype[Any]) -> Any:
    """``value`` as an array of ``dtype``, with TensorFlow's rules for integers.

    Raises:
        TypeError: a Python int that an integer or bool ``dtype`` does not hold
            (into a float dtype it rounds).
        OverflowError: a Python int beyond 64 bits.
    """
    if isinstance(value, int) and dtype.kind in "iub":
        if not -(2**63) <= value < 2**64:
            raise OverflowError("Python int too large to convert to C long")
        held = np.array(value).astype(dtype)
        if held.item() != value:
            raise TypeError(
                f"Type of feed value {value} with type {type(value)} is not compatible with "
                f"Tensor type {dtype.type}. Try explicitly setting the type of the feed tensor to "
                "a larger type (e.g. int64)."
            )
        return held
    try:
        return np.asarray(value, dtype=dtype)
    except (OverflowError, DeprecationWarning):
        # Python ints in a list wrap around, as TensorFlow converts them (numpy before 2.0
        # warns instead of refusing, which is an error where warnings are)
        return np.asarray(value).astype(dtype)


def _feed_value(tensor: Tensor, value: Any) -> Any:
    """A fed value, converted to the tensor's dtype and checked against its static shape.

    Raises:
        TypeError: a Tensor as a value.
        ValueError: values that do not convert, or a shape that does not fit.
    """
    if type(value) is np.ndarray:
        # an array of the tensor's own dtype and exact static shape is fed as it is
        # (the conversion below would hand back the same array): skip its checks.
        # The attribute, not the property: it is None for a type without a numpy
        # dtype (string, resource), which then takes the general path below.
        numpy_dtype = tensor.dtype._numpy_dtype
        if value.dtype is numpy_dtype and value.shape == tensor.shape.as_tuple():
            return value
    if is_symbolic(value):
        raise TypeError(
            "The value of a feed cannot be a tf.Tensor object. Acceptable feed values include "
            "Python scalars, strings, lists, numpy ndarrays, or TensorHandles. For reference, "
            f"the tensor object was {value!r} which was passed to the argument `feed_dict` with "
            f"key {tensor!r}."
        )
    dtype = tensor.dtype
    if dtype == string:
        array = np.asarray(value, dtype=object)
    elif dtype.name in ("resource", "string_ref"):
        return value
    else:
        array = _numeric_feed(value, dtype.numpy_dtype)
    dims = tensor.shape.as_tuple()
    if dims != array.shape and not tensor.shape.is_compatible_with(array.shape):
        raise ValueError(
            f"Cannot feed value of shape {array.shape} for Tensor {tensor.name}, which has shape "
            f"{tensor.shape}"
        )
    return array
