"""Another runtime as a backend: the plug-in point of the conformance suite.

A runtime that exposes TensorFlow's accumulator raw ops by name can run every
case against itself. It is named as ``module:attribute`` (or just ``module``),
(``module:`` for the module itself), in ``--backend`` or ``TF_ACCUM_BACKEND``, or by a name registered under the
entry-point group ``tf_accum.conformance_backends``. The object so named (a
module, a class instance, a ``SimpleNamespace``) is the runtime:

- required: the raw ops, as attributes with TensorFlow's names
  (``ResourceConditionalAccumulator``, ``AccumulatorApplyGradient``, ...),
  called with TensorFlow's keyword arguments; ``DestroyResourceOp`` is also
  what the suite calls to clean up after each case;
- optional ``compat``: an object holding the ``tf.compat.v1`` classes
  (``ConditionalAccumulator``, ``SparseConditionalAccumulator``); without it
  the cases that use them are reported as not applicable;
- optional ``as_dtype(name)``: a dtype name (``"float32"``) as the runtime
  wants it; without it the name itself is passed;
- optional ``IndexedSlices(values=, indices=, dense_shape=)``: how a sparse
  gradient is given to the compat class; without it a named tuple is passed;
- optional ``num_waiting(handle)``: how many takes wait on an accumulator, so
  that a background take is known to be queued; without it the suite gives
  it a fixed time, as it does TensorFlow.

Errors are compared by their class's name (``InvalidArgumentError``,
``NotFoundError``, ...: TensorFlow's); values by dtype, shape and contents,
read with ``numpy.asarray`` (anything with ``__array__`` will do); a sparse
take may return a named tuple with ``indices``, ``values`` and ``shape`` or
a plain ``(indices, values, shape)`` tuple; a queue's raw dequeue, a list or
tuple of one array per component.
"""

from __future__ import annotations

import importlib
from collections import namedtuple
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import numpy as np

from conformance.backends.common import (
    CONSTRUCTORS,
    convert_argument,
    wait_until_queued,
)
from conformance.case_format import Call, Case

ENTRY_POINT_GROUP = "tf_accum.conformance_backends"

SliceArgs = namedtuple("SliceArgs", ["values", "indices", "dense_shape"])
SparseTake = namedtuple("SparseTake", ["indices", "values", "shape"])
SPARSE_TAKES = {"SparseAccumulatorTakeGradient"}


def registered() -> dict[str, str]:
    """Plug-in names registered by installed packages, and their ``module:attribute``."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def is_plugin(name: str) -> bool:
    return ":" in name or name in registered()


def load_runtime(spec: str) -> Any:
    """The object ``spec`` names: ``module:attribute``, ``module:``, or a registered name.

    ValueError when it cannot be imported or is not a runtime."""
    spec = registered().get(spec, spec)
    module_name, _, attribute = spec.partition(":")
    try:
        runtime: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"backend {spec!r}: cannot import module {module_name!r}: {error}"
        ) from None
    for part in filter(None, attribute.split(".")):
        try:
            runtime = getattr(runtime, part)
        except AttributeError:
            raise ValueError(
                f"backend {spec!r}: {module_name} has no attribute {attribute!r}"
            ) from None
    if not callable(getattr(runtime, "ResourceConditionalAccumulator", None)):
        raise ValueError(
            f"backend {spec!r} is not a runtime: it has no ResourceConditionalAccumulator "
            "(a runtime exposes TensorFlow's raw ops by name)"
        )
    return runtime


class PluginBackend:
    """The suite's backend interface (see conformance/backends/__init__.py) on a runtime."""

    def __init__(self, spec: str, runtime: Any | None = None) -> None:
        self.name = spec
        self.runtime = load_runtime(spec) if runtime is None else runtime

    def supports(self, case: Case) -> bool:
        """False when the case needs graph mode, or the compat classes and the
        runtime has none."""
        if case.graph_only:
            return False
        if getattr(self.runtime, "compat", None) is not None:
            return True
        return not any(
            s.call is not None and s.call.target.startswith("compat.") for s in case.statements
        )

    def open(self) -> PluginSession:
        return PluginSession(self.runtime)


class PluginSession:
    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.probe_seconds = 0.05 if hasattr(runtime, "num_waiting") else 0.5
        self._handles: list[Any] = []
        self._queued: tuple[Any, int] | None = None

    def _convert(self, value: Any, env: dict[str, Any]) -> Any:
        as_dtype = getattr(self.runtime, "as_dtype", None)
        dtype = (lambda name: name) if as_dtype is None else as_dtype
        make = getattr(self.runtime, "IndexedSlices", SliceArgs)
        return convert_argument(value, env, dtype, make)

    def _target(self, call: Call, env: dict[str, Any]) -> Callable[..., Any]:
        if call.target.startswith("compat."):
            compat = getattr(self.runtime, "compat", None)
            if compat is None:
                raise NotImplementedError("the runtime has no compat classes")
            return getattr(compat, call.target.split(".", 1)[1])  # type: ignore[no-any-return]
        if "." in call.target:
            name, method = call.target.split(".", 1)
            return getattr(env[name], method)  # type: ignore[no-any-return]
        return getattr(self.runtime, call.target)  # type: ignore[no-any-return]

    def _arguments(self, call: Call, env: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        args = [self._convert(a, env) for a in call.args]
        kwargs = {k: self._convert(v, env) for k, v in call.kwargs.items()}
        return args, kwargs

    def _waiting(self, handle: Any) -> int | None:
        num_waiting = getattr(self.runtime, "num_waiting", None)
        if num_waiting is None or handle is None:
            return None
        try:
            return int(num_waiting(handle))
        except Exception:
            return None

    def prepare(self, call: Call, env: dict[str, Any]) -> Callable[[], Any]:
        fn = self._target(call, env)
        args, kwargs = self._arguments(call, env)
        handle = kwargs.get("handle")
        if handle is None and "." in call.target and not call.target.startswith("compat."):
            handle = getattr(env[call.target.split(".", 1)[0]], "accumulator_ref", None)
        before = self._waiting(handle)
        self._queued = None if before is None else (handle, before)
        return lambda: _result(call.target, fn(*args, **kwargs))

    def settle(self, task: Any) -> None:
        """Wait until the background take is queued (or has returned)."""
        if self._queued is None:
            task.finished.wait(0.3)
            return
        handle, before = self._queued
        wait_until_queued(task, before, lambda: self._waiting(handle))

    def call(self, call: Call, env: dict[str, Any]) -> tuple[Any, Any]:
        fn = self._target(call, env)
        args, kwargs = self._arguments(call, env)
        result = fn(*args, **kwargs)
        if call.target in CONSTRUCTORS:
            self._handles.append(result)
            return result, None
        if call.target.startswith("compat."):
            handle = getattr(result, "accumulator_ref", None)
            if handle is None:
                handle = getattr(result, "queue_ref", None)
            if handle is not None:
                self._handles.append(handle)
            return result, None
        return result, _result(call.target, result)

    def close(self) -> None:
        """Destroy what the case made (the counterpart of closing a TensorFlow session)."""
        destroy = getattr(self.runtime, "DestroyResourceOp", None)
        handles, self._handles = self._handles, []
        if destroy is None:
            return
        for handle in handles:
            try:
                destroy(resource=handle, ignore_lookup_error=True)
            except Exception:
                continue  # the case's own statements report the runtime's errors

    def finish(self) -> None:
        self.close()

    def clean_message(self, message: str) -> str:
        return message


QUEUE_DEQUEUES = {"QueueDequeueV2", "QueueDequeueManyV2", "QueueDequeueUpToV2"}


def _result(target: str, result: Any) -> Any:
    """A runtime's result in the forms conformance/outcomes.py records."""
    sparse_take = target.split(".")[-1] in SPARSE_TAKES | {"take_grad"}
    if sparse_take and type(result) is tuple and len(result) == 3:
        return SparseTake(*(np.asarray(part) for part in result))
    if getattr(result, "_fields", None) is not None:
        return result
    if target in QUEUE_DEQUEUES and isinstance(result, (list, tuple)):
        return [np.asarray(part) for part in result]  # one array per component
    if isinstance(result, (np.ndarray, np.generic, str, bool, int, float)) or result is None:
        return result
    if hasattr(result, "__array__"):
        return np.asarray(result)
    return result
