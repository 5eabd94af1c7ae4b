"""The steps a task's host runs for a session: a training op on the host's variables
(TRAIN) and a graph op's own kernel (KERNEL), each run many times as a host runs
the same request every step."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tf_accum.graph.host_steps import KERNEL, TRAIN, VariableKey, kernel_step, training_step
from tf_accum.graph.variable_store import VariableStore
from tf_accum.raw_ops.training import updated_values

ADAM_INPUTS = ("beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad")


def _adam_step(dtype_name: str) -> tuple[object, ...]:
    variables = tuple((name, dtype_name) for name in ("w", "w/Adam", "w/Adam_1"))
    flags = {"use_locking": False, "use_nesterov": False}
    return (TRAIN, "ResourceApplyAdam", variables, (ADAM_INPUTS, flags), ())


def test_an_adam_step_run_again_updates_the_hosts_variables_each_time() -> None:
    rng = np.random.default_rng(0)
    store: Any = VariableStore()  # a host keys its variables by name (VariableKey)
    start = [rng.random((3, 4), dtype=np.float32) for _ in range(3)]
    keys = [VariableKey(name, "float32") for name in ("w", "w/Adam", "w/Adam_1")]
    for key, value in zip(keys, start, strict=True):
        store.assign(key, value)
    scalars = [np.float32(v) for v in (0.9, 0.999, 1e-3, 0.9, 0.999, 1e-7)]
    step = _adam_step("float32")
    expected = start
    for _ in range(3):
        grad = rng.standard_normal((3, 4)).astype(np.float32)
        assert training_step(store, step, [*scalars, grad]) == ()
        given = dict(zip(ADAM_INPUTS, [np.asarray(v) for v in [*scalars, grad]], strict=True))
        flags = {"use_locking": False, "use_nesterov": False}
        expected = updated_values("ResourceApplyAdam", expected, given, flags)
        for key, value in zip(keys, expected, strict=True):
            assert store.read(key).tobytes() == value.tobytes()


def test_a_training_step_of_a_dtype_without_kernels_is_refused_every_time() -> None:
    store: Any = VariableStore()  # a host keys its variables by name (VariableKey)
    for name in ("w", "w/Adam", "w/Adam_1"):
        store.assign(VariableKey(name, "int32"), np.zeros(2, np.int32))
    values = [np.int32(1)] * 6 + [np.ones(2, np.int32)]
    for _ in range(2):
        with pytest.raises(tf.errors.InvalidArgumentError, match="T=DT_INT32"):
            training_step(store, _adam_step("int32"), values)
    assert store.read(VariableKey("w", "int32")).tolist() == [0, 0]


def test_a_kernel_step_runs_its_kernel_on_the_values_of_each_run() -> None:
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [])
        product = (x * x).op
    step = (KERNEL, product.type, product.name, product.kernel, ())
    for value in (2.0, 3.0):
        (found,) = kernel_step(step, [np.float32(value), np.float32(value)])
        assert found == np.float32(value * value) and found.dtype == np.float32
