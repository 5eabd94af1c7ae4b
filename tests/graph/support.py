"""Graph-mode test helpers: accumulators built from raw ops with placeholders,
and bounded waits for takes queued inside a Session."""

from __future__ import annotations

import contextlib
from typing import Any

import tf_accum as tfa
import tf_accum.compat.v1 as tf
from tests.helpers import WAIT, wait_until
from tf_accum import errors

raw = tfa.raw_ops
# for runs that would block forever if tf_accum were broken: fail instead of hanging
BOUNDED = tf.RunOptions(timeout_in_ms=int(WAIT * 1000))


def waiting(sess: tf.Session) -> int:
    """How many takes are queued, over every accumulator of ``sess``."""
    total = 0
    for handle in sess.table.live_handles():
        with contextlib.suppress(errors.NotFoundError):
            total += sess.table.lookup(handle).num_waiting()
    return total


def wait_for_waiting(sess: tf.Session, count: int) -> None:
    """Block (boundedly) until exactly ``count`` takes wait in ``sess``."""
    wait_until(lambda: waiting(sess) == count)


class _Driven:
    """Running the ops every accumulator has: take, count, set the step."""

    take: Any
    num: Any
    set_step: Any
    n: Any
    new_step: Any

    def get(self, sess: tf.Session, n: Any, **run: Any) -> Any:
        run.setdefault("options", BOUNDED)
        return sess.run(self.take, {self.n: n}, **run)

    def count(self, sess: tf.Session) -> Any:
        return sess.run(self.num)

    def set(self, sess: tf.Session, step: Any) -> None:
        sess.run(self.set_step, {self.new_step: step})


class DenseOps(_Driven):
    """A dense accumulator and its ops, every input a placeholder of unknown
    shape, so that only the kernels check them (the cases' convention)."""

    def __init__(self, prefix: str = "Resource", dtype: Any = tf.float32, **attrs: Any) -> None:
        attrs.setdefault("shape", [2])
        constructor = getattr(raw, f"{prefix}ConditionalAccumulator")
        self.dtype = dtype
        self.handle = constructor(dtype=dtype, **attrs)
        self.grad = tf.placeholder(dtype, name="grad")
        self.step = tf.placeholder(tf.int64, name="step")
        self.new_step = tf.placeholder(tf.int64, name="new_step")
        self.n = tf.placeholder(tf.int32, name="n")
        self.apply = getattr(raw, f"{prefix}AccumulatorApplyGradient")(
            handle=self.handle, local_step=self.step, gradient=self.grad
        )
        self.take = getattr(raw, f"{prefix}AccumulatorTakeGradient")(
            handle=self.handle, num_required=self.n, dtype=dtype
        )
        self.num = getattr(raw, f"{prefix}AccumulatorNumAccumulated")(handle=self.handle)
        self.set_step = getattr(raw, f"{prefix}AccumulatorSetGlobalStep")(
            handle=self.handle, new_global_step=self.new_step
        )

    def put(self, sess: tf.Session, value: Any, step: Any = 0) -> None:
        sess.run(self.apply, {self.grad: value, self.step: step})


class SparseOps(_Driven):
    """A sparse accumulator and its (ref) ops, inputs fed through placeholders."""

    def __init__(self, dtype: Any = tf.float32, known_shape: bool = True, **attrs: Any) -> None:
        attrs.setdefault("shape", [3, 2])
        self.dtype = dtype
        self.handle = raw.SparseConditionalAccumulator(dtype=dtype, **attrs)
        self.indices = tf.placeholder(tf.int64, name="indices")
        self.values = tf.placeholder(dtype, name="values")
        self.shape = tf.placeholder(tf.int64, name="dense_shape")
        self.step = tf.placeholder(tf.int64, name="step")
        self.new_step = tf.placeholder(tf.int64, name="new_step")
        self.n = tf.placeholder(tf.int32, name="n")
        self.apply = raw.SparseAccumulatorApplyGradient(
            handle=self.handle,
            local_step=self.step,
            gradient_indices=self.indices,
            gradient_values=self.values,
            gradient_shape=self.shape,
            has_known_shape=True,
        )
        self.apply_unknown = raw.SparseAccumulatorApplyGradient(
            handle=self.handle,
            local_step=self.step,
            gradient_indices=self.indices,
            gradient_values=self.values,
            gradient_shape=tf.constant([], tf.int64),
            has_known_shape=False,
        )
        self.take = raw.SparseAccumulatorTakeGradient(
            handle=self.handle, num_required=self.n, dtype=dtype
        )
        self.num = raw.AccumulatorNumAccumulated(handle=self.handle)
        self.set_step = raw.AccumulatorSetGlobalStep(
            handle=self.handle, new_global_step=self.new_step
        )

    def put(
        self, sess: tf.Session, indices: Any, values: Any, shape: Any = None, step: Any = 0
    ) -> None:
        feed = {self.indices: indices, self.values: values, self.step: step}
        if shape is None:
            sess.run(self.apply_unknown, feed)
        else:
            feed[self.shape] = shape
            sess.run(self.apply, feed)
