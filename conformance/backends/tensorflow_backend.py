"""The TensorFlow backend: graph mode, one Graph and Session per case (TF1 semantics).

Raw-op inputs are fed through placeholders of unknown shape, so that, as in
the spec's cases, nothing is checked when the graph is built and every check
happens when the op runs. A Python float given for an integer input is passed
to the op builder instead, which refuses it as TensorFlow's eager mode does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from conformance.backends.common import (
    CONSTRUCTORS,
    HANDLE_ARGS,
    INT32_INPUTS,
    INT64_INPUTS,
    VALUE_INPUTS,
    inferred_array,
    typed_array,
)
from conformance.case_format import Call, DType, Ref, Slices, Typed

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


class TensorFlowBackend:
    name = "tensorflow"

    def __init__(self) -> None:
        import tensorflow as tf

        self.tf = tf

    def open(self) -> TensorFlowSession:
        return TensorFlowSession(self.tf)


class TensorFlowSession:
    probe_seconds = 0.5

    def __init__(self, tf: Any) -> None:
        self.tf = tf
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph)
        self.closed = False

    def _convert(self, value: Any, env: dict[str, Any]) -> Any:
        tf = self.tf
        if isinstance(value, Typed):
            return typed_array(value)
        if isinstance(value, DType):
            return tf.as_dtype(value.name)
        if isinstance(value, Ref):
            return value.resolve(env)
        if isinstance(value, Slices):
            with self.graph.as_default():
                return tf.IndexedSlices(
                    values=tf.constant(inferred_array(value.values)),
                    indices=tf.constant(np.asarray(value.indices)),
                    dense_shape=None
                    if value.dense_shape is None
                    else tf.constant(np.asarray(value.dense_shape, np.int64)),
                )
        if isinstance(value, list):
            return [self._convert(v, env) for v in value]
        return value

    def _build(self, call: Call, env: dict[str, Any]) -> tuple[Any, dict[Any, Any], Any, bool]:
        """Build the call's ops: (fetch, feeds, run options, is a constructor)."""
        tf = self.tf
        kwargs = dict(call.kwargs)
        timeout = kwargs.pop("timeout", None)
        options = None
        if timeout is not None:
            options = tf.compat.v1.RunOptions(timeout_in_ms=max(1, int(timeout * 1000)))
        feeds: dict[Any, Any] = {}
        with self.graph.as_default():
            if call.target.startswith("compat."):
                cls = getattr(tf.compat.v1, call.target.split(".", 1)[1])
                args = [self._convert(a, env) for a in call.args]
                built = cls(*args, **{k: self._convert(v, env) for k, v in kwargs.items()})
                return built, feeds, options, True
            if "." in call.target:
                name, method = call.target.split(".", 1)
                args = [self._convert(a, env) for a in call.args]
                out = getattr(env[name], method)(
                    *args, **{k: self._convert(v, env) for k, v in kwargs.items()}
                )
                return out, feeds, options, False
            op = getattr(tf.raw_ops, call.target)
            built_kwargs: dict[str, Any] = {}
            for key, value in kwargs.items():
                if key in HANDLE_ARGS:
                    built_kwargs[key] = self._convert(value, env)
                elif key in INT64_INPUTS or key in INT32_INPUTS:
                    if isinstance(value, float):
                        built_kwargs[key] = value
                        continue
                    dtype = tf.int64 if key in INT64_INPUTS else tf.int32
                    holder = tf.compat.v1.placeholder(dtype, shape=None)
                    raw = typed_array(value) if isinstance(value, Typed) else np.asarray(value)
                    feeds[holder] = (
                        raw.astype(dtype.as_numpy_dtype)
                        if raw.size
                        else np.zeros(raw.shape, dtype.as_numpy_dtype)
                    )
                    built_kwargs[key] = holder
                elif key in VALUE_INPUTS:
                    array = inferred_array(value)
                    dtype = tf.string if array.dtype.kind in "US" else tf.as_dtype(array.dtype)
                    holder = tf.compat.v1.placeholder(dtype, shape=None)
                    feeds[holder] = array
                    built_kwargs[key] = holder
                else:
                    built_kwargs[key] = self._convert(value, env)
            out = op(**built_kwargs)
            return out, feeds, options, call.target in CONSTRUCTORS

    def _is_graph_value(self, out: Any) -> bool:
        tf = self.tf
        if isinstance(out, (tf.Operation, tf.Tensor, tf.IndexedSlices)):
            return True
        # a tuple (a sparse take) or a list (a queue's dequeue raw ops) of tensors
        return isinstance(out, (tuple, list)) and any(isinstance(o, tf.Tensor) for o in out)

    def call(self, call: Call, env: dict[str, Any]) -> tuple[Any, Any]:
        out, feeds, options, constructor = self._build(call, env)
        if constructor:
            if isinstance(out, self.tf.Tensor):
                self.session.run(out.op, options=options)  # create it now
            elif getattr(out, "initializer", None) is not None:
                self.session.run(out.initializer, options=options)  # a Variable
            return out, None
        if hasattr(out, "read_value") and not self._is_graph_value(out):
            # a variable update's result (TensorFlow's is an unread variable): its new value
            with self.graph.as_default():
                read = out.read_value()
            return out, self.session.run(read, feed_dict=feeds, options=options)
        if not self._is_graph_value(out):
            return out, out
        return out, self.session.run(out, feed_dict=feeds, options=options)

    def prepare(self, call: Call, env: dict[str, Any]) -> Callable[[], Any]:
        out, feeds, options, _ = self._build(call, env)
        return lambda: self.session.run(out, feed_dict=feeds, options=options)

    def settle(self, task: Any) -> None:
        task.finished.wait(0.3)  # no way to see TensorFlow's queue: give the take time

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.session.close()

    def finish(self) -> None:
        self.close()

    def clean_message(self, message: str) -> str:
        return kernel_message(message)


def kernel_message(message: str) -> str:
    """The kernel's own message, without graph mode's decoration and stack traces.

    ``Graph execution error: ... Node: 'X'\\n<message>\\n\\t [[{{node X}}]] ...``
    becomes ``<message>``; the stack traces name the recording machine's files.
    """
    if not message.startswith("Graph execution error"):
        return message
    lines = message.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("Node: '")]
    if not starts:
        return message
    kept = []
    for line in lines[starts[-1] + 1 :]:
        if line.startswith("\t [[") or line.startswith("Original stack trace"):
            break
        kept.append(line)
    return "\n".join(kept).strip()
