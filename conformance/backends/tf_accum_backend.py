"""The tf_accum backend: statements call tf_accum directly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tf_accum as tfa
from conformance.backends.common import CONSTRUCTORS, convert_argument, wait_until_queued
from conformance.case_format import Call
from tf_accum.resources import current_table


class TfAccumBackend:
    name = "tf_accum"

    def open(self) -> TfAccumSession:
        return TfAccumSession()


class TfAccumSession:
    probe_seconds = 0.05  # the take is known to be queued (settle); this only adds margin

    def __init__(self) -> None:
        self._handles: list[int] = []
        self._queued: tuple[int, int] | None = None

    def _convert(self, value: Any, env: dict[str, Any]) -> Any:
        return convert_argument(value, env, tfa.as_dtype, tfa.IndexedSlices)

    def _target(self, call: Call, env: dict[str, Any]) -> tuple[Callable[..., Any], Any]:
        if call.target.startswith("compat."):
            return getattr(tfa.compat.v1, call.target.split(".", 1)[1]), None
        if "." in call.target:
            name, method = call.target.split(".", 1)
            obj = env[name]
            return getattr(obj, method), obj
        return getattr(tfa.raw_ops, call.target), None

    def prepare(self, call: Call, env: dict[str, Any]) -> Callable[[], Any]:
        fn, owner = self._target(call, env)
        args = [self._convert(a, env) for a in call.args]
        kwargs = {k: self._convert(v, env) for k, v in call.kwargs.items()}
        handle = kwargs.get("handle")
        if owner is not None:  # an accumulator's or a queue's method
            handle = getattr(owner, "accumulator_ref", None)
            handle = getattr(owner, "queue_ref", None) if handle is None else handle
        if isinstance(handle, int):
            before = _waiting(handle)
            self._queued = None if before is None else (handle, before)
        return lambda: fn(*args, **kwargs)

    def settle(self, task: Any) -> None:
        """Wait until the background take is queued (or has returned)."""
        if self._queued is None:
            task.finished.wait(0.3)
            return
        handle, before = self._queued
        wait_until_queued(task, before, lambda: _waiting(handle))

    def call(self, call: Call, env: dict[str, Any]) -> tuple[Any, Any]:
        fn, _ = self._target(call, env)
        args = [self._convert(a, env) for a in call.args]
        kwargs = {k: self._convert(v, env) for k, v in call.kwargs.items()}
        result = fn(*args, **kwargs)
        if call.target in CONSTRUCTORS:
            self._handles.append(result)
            return result, None
        if call.target.startswith("compat."):
            handle = getattr(result, "accumulator_ref", None)  # a Variable has none
            if handle is None:
                handle = getattr(result, "queue_ref", None)  # so a shared name starts afresh
            if handle is not None:
                self._handles.append(handle)
            return result, None
        return result, result

    def close(self) -> None:
        """The counterpart of closing a TensorFlow session: destroy what the case made."""
        for handle in self._handles:
            tfa.raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=True)

    def finish(self) -> None:
        self.close()

    def clean_message(self, message: str) -> str:
        return message


def _waiting(handle: int) -> int | None:
    """How many takes wait on the accumulator ``handle`` (enqueues and
    dequeues on the queue ``handle``); None once it is gone."""
    try:
        return current_table().lookup(handle).num_waiting()
    except tfa.errors.NotFoundError:
        return None
