"""Gradients from the ecosystem's arrays: numpy (and subclasses), ``__array__``,
``__dlpack__``, PyTorch and JAX when installed; nothing copied twice on the way in."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tf_accum as tfa
from tf_accum.accumulators import sparse_kernel
from tf_accum.raw_ops.arguments import tensor_array
from tf_accum.tensor_conversion import convert_to_dtype

raw = tfa.raw_ops
CA = tfa.compat.v1.ConditionalAccumulator
SCA = tfa.compat.v1.SparseConditionalAccumulator
ROOT = Path(__file__).resolve().parent.parent


class ArrayObject:
    """A foreign tensor with ``__array__`` only (like a PyTorch CPU tensor)."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.data if dtype is None else self.data.astype(dtype)


class DLPackObject:
    """An array-API object with only ``__dlpack__`` / ``__dlpack_device__``."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data
        self.dtype = data.dtype  # a numpy dtype, as array-API libraries on numpy have

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self.data.__dlpack_device__()


class Hostile(np.ndarray):
    """A subclass whose every override fails: none may ever run inside tf_accum."""

    calls: list[str] = []

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        Hostile.calls.append(f"{ufunc.__name__}.{method} out={kwargs.get('out')!r}")
        raise AssertionError("a subclass's __array_ufunc__ was called")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        Hostile.calls.append(func.__name__)
        raise AssertionError("a subclass's __array_function__ was called")

    def __array_finalize__(self, obj: Any) -> None:
        if obj is not None and not Hostile.constructing:
            Hostile.calls.append("__array_finalize__")

    def view(self, *args: Any, **kwargs: Any) -> Any:
        Hostile.calls.append("view")
        raise AssertionError("the subclass's view was called")

    constructing = False


def hostile(values: Any, dtype: Any = np.float32) -> Hostile:
    Hostile.constructing = True
    try:
        return np.ndarray.view(np.asarray(values, dtype), Hostile)
    finally:
        Hostile.constructing = False


# --- dense: every kind of array, dtype kept, no copy ------------------------------------------

MAKERS = {
    "ndarray": lambda a: a,
    "subclass": lambda a: hostile(a, a.dtype),
    "__array__": ArrayObject,
    "__dlpack__": DLPackObject,
}


@pytest.mark.parametrize("kind", MAKERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.complex64])
def test_raw_dense_apply_keeps_the_dtype_of_every_array_kind(kind, dtype) -> None:
    Hostile.calls = []
    source = np.arange(6, dtype=dtype).reshape(2, 3)
    converted = tensor_array(MAKERS[kind](source))
    assert type(converted) is np.ndarray and converted.dtype == dtype
    assert np.shares_memory(converted, source)  # not even one copy
    h = raw.ResourceConditionalAccumulator(dtype=tfa.as_dtype(dtype), shape=[2, 3])
    for _ in range(2):  # the second one is added into the sum buffer
        raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=MAKERS[kind](source))
    got = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=tfa.as_dtype(dtype))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, source)
    np.testing.assert_array_equal(source, np.arange(6, dtype=dtype).reshape(2, 3))  # untouched
    assert Hostile.calls == []


@pytest.mark.parametrize("kind", MAKERS)
def test_raw_dense_apply_refuses_another_dtype_from_any_array_kind(kind) -> None:
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[2])
    with pytest.raises(tfa.errors.InvalidArgumentError, match="gradient has dtype float64"):
        raw.ResourceAccumulatorApplyGradient(
            handle=h, local_step=0, gradient=MAKERS[kind](np.ones(2, np.float64))
        )
    assert raw.ResourceAccumulatorNumAccumulated(handle=h) == 0


@pytest.mark.parametrize("kind", MAKERS)
def test_class_converts_every_array_kind_by_numpy_rules(kind) -> None:
    Hostile.calls = []
    acc = CA(tfa.float32, shape=[3])
    acc.apply_grad(MAKERS[kind](np.array([1.0, 2.0, 3.0])))  # float64: converted
    acc.apply_grad(MAKERS[kind](np.array([1, 2, 3], np.int64)))
    acc.apply_grad(MAKERS[kind](np.array([1.0, 2.0, 3.0], np.float32)))
    got = acc.take_grad(3)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [1.0, 2.0, 3.0])
    ints = CA(tfa.int32, shape=[2])
    with pytest.raises(TypeError, match=r"^Expected int32, but got 1.5 of type 'float'\.$"):
        ints.apply_grad(MAKERS[kind](np.array([1.5, 2.0])))
    with pytest.raises(TypeError, match="Expected float32, but got"):
        acc.apply_grad(MAKERS[kind](np.array([1j, 2, 3])))
    assert ints.num_accumulated() == 0 and acc.num_accumulated() == 0
    assert Hostile.calls == []


def test_same_dtype_is_not_copied_and_another_is_copied_once() -> None:
    source = np.arange(4.0, dtype=np.float32)
    for kind, make in MAKERS.items():
        assert np.shares_memory(convert_to_dtype(make(source), tfa.float32), source), kind
        converted = convert_to_dtype(make(source), tfa.float64)
        assert converted.dtype == np.float64 and not np.shares_memory(converted, source), kind


def test_a_tensorflow_style_tensor_keeps_tensorflow_s_rule_and_numpy_dtypes_do_not() -> None:
    class TorchLikeDtype:
        name = "float64"

    TorchLikeDtype.__module__ = "torch"

    class TensorLike(ArrayObject):
        def __init__(self, data: np.ndarray, dtype: Any) -> None:
            super().__init__(data)
            self.dtype = dtype

    acc = CA(tfa.float32, shape=[2])
    data = np.array([1.0, 2.0])
    acc.apply_grad(TensorLike(data, data.dtype))  # a JAX array's dtype is numpy's
    acc.apply_grad(TensorLike(data, TorchLikeDtype()))  # PyTorch's is told by its module
    with pytest.raises(ValueError, match="requested dtype float32 for Tensor with dtype float64"):
        acc.apply_grad(TensorLike(data, tfa.float64))  # a TensorFlow DType
    assert acc.num_accumulated() == 2


@pytest.mark.parametrize("kind", MAKERS)
def test_indices_steps_and_counts_from_every_array_kind(kind) -> None:
    make = MAKERS[kind]
    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=[4, 2])
    raw.SparseAccumulatorApplyGradient(
        handle=h, local_step=make(np.array(0)), gradient_indices=make(np.array([3, 1])),
        gradient_values=make(np.ones((2, 2), np.float32)), gradient_shape=make(np.array([4, 2])),
        has_known_shape=True,
    )  # fmt: skip
    got = raw.SparseAccumulatorTakeGradient(
        handle=h, num_required=make(np.array(1, np.int32)), dtype=tfa.float32
    )
    np.testing.assert_array_equal(got.indices, [1, 3])
    acc = SCA(tfa.float32, shape=[4, 2])
    acc.apply_grad(make(np.array([2])), make(np.ones((1, 2))), local_step=make(np.array(0)))
    acc.set_global_step(make(np.array(1)))
    acc.apply_grad(make(np.array([1])), make(np.ones((1, 2))), local_step=make(np.array(0.5)))
    assert acc.num_accumulated() == 1  # the second was stale: 0.5 truncates to 0


# --- a subclass never meets the accumulator's buffers ------------------------------------------


def test_hostile_subclass_through_every_apply() -> None:
    Hostile.calls = []
    dense = CA(tfa.float32, shape=[2])
    dense.apply_grad(hostile([1.0, 2.0]))
    dense.apply_grad(hostile([3.0, 4.0], np.float64))  # converted: a plain array then
    np.testing.assert_array_equal(dense.take_grad(2), [2.0, 3.0])

    sparse = SCA(tfa.float32, shape=[4, 2])
    for rows, at in [([[1.0, 1.0]], [1]), ([[2.0, 2.0], [3.0, 3.0]], [3, 1])]:
        sparse.apply_grad(hostile(at, np.int64), hostile(rows), local_step=0)
    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=[4, 2])
    for rows, at in [([[1.0, 1.0]], [1]), ([[2.0, 2.0], [3.0, 3.0]], [3, 1])]:
        raw.SparseAccumulatorApplyGradient(
            handle=h, local_step=0, gradient_indices=hostile(at, np.int64),
            gradient_values=hostile(rows), gradient_shape=hostile([4, 2], np.int64),
            has_known_shape=True,
        )  # fmt: skip
    for indices, values, _ in [
        sparse.take_grad(2),
        raw.SparseAccumulatorTakeGradient(handle=h, num_required=2, dtype=tfa.float32),
    ]:
        np.testing.assert_array_equal(indices, [1, 3])
        np.testing.assert_array_equal(values, [[2.0, 2.0], [2.0, 2.0]])
        assert type(values) is np.ndarray
    assert Hostile.calls == []


# --- memory: at most one copy on the way in ------------------------------------------------------


def peak_bytes(fn: Any) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


N = 1 << 18


@pytest.mark.usefixtures("quiet_background")  # tracemalloc sees every thread
@pytest.mark.parametrize("kind", MAKERS)
def test_dense_apply_copies_a_gradient_at_most_once(kind) -> None:
    acc = CA(tfa.float32, shape=[N])
    wide = np.ones(N, np.float64)  # converted to float32: one copy, kept as the sum
    first = peak_bytes(lambda: acc.apply_grad(MAKERS[kind](wide)))
    later = peak_bytes(lambda: acc.apply_grad(MAKERS[kind](wide)))
    assert first < 1.1 * N * 4 and later < 1.1 * N * 4, (first, later)
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[N])
    same = np.ones(N, np.float32)  # no conversion: copied only into the sum
    apply = lambda: raw.ResourceAccumulatorApplyGradient(  # noqa: E731
        handle=h, local_step=0, gradient=MAKERS[kind](same)
    )
    first, later = peak_bytes(apply), peak_bytes(apply)
    assert first < 1.1 * N * 4 and later < 16 * 1024, (first, later)
    assert acc.take_grad(2)[0] == 1 and acc.num_accumulated() == 0


@pytest.mark.usefixtures("quiet_background")  # tracemalloc sees every thread
def test_sparse_apply_copies_values_at_most_once() -> None:
    rows, width = 1 << 11, 256
    # gradients this large load the compiled row adds (once per process): not
    # what is measured here
    assert rows * width >= sparse_kernel.MIN_ELEMENTS
    sparse_kernel.load()
    acc = SCA(tfa.float32, shape=[10 * rows, width])
    wide = np.ones((rows, width), np.float64)
    row_bytes = rows * width * 4
    index_bytes = rows * 8 * 12  # index, slot, counts, positions and their merges
    # a fresh round's first gradient: converted once, and that copy is kept as the
    # round's rows (a second copy would add row_bytes)
    first = peak_bytes(lambda: acc.apply_grad(np.arange(rows), wide, local_step=0))
    assert first < 1.1 * row_bytes + index_bytes, first
    indices, values, _ = acc.take_grad(1)
    assert indices.size == rows and values.dtype == np.float32
    # a gradient of the accumulator's dtype is read where it is and copied once,
    # into the round's rows
    same = np.ones((rows, width), np.float32)
    again = peak_bytes(lambda: acc.apply_grad(np.arange(rows), same, local_step=1))
    assert again < 1.1 * row_bytes + index_bytes, again
    np.testing.assert_array_equal(acc.take_grad(1).values, same)


# --- PyTorch and JAX, when installed --------------------------------------------------------


def test_pytorch_cpu_tensors() -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    tensor = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    converted = tensor_array(tensor)
    assert converted.dtype == np.float64 and np.shares_memory(converted, tensor.numpy())
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float64, shape=[2, 3])
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=tensor)
    got = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float64)
    np.testing.assert_array_equal(got, tensor.numpy())
    acc = CA(tfa.float32, shape=[2, 3])
    acc.apply_grad(tensor)  # float64 converts, by numpy's rule
    assert acc.take_grad(1).dtype == np.float32
    sparse = SCA(tfa.float32, shape=[5, 3])
    sparse.apply_grad(torch.tensor([4, 0]), tensor.float())
    np.testing.assert_array_equal(sparse.take_grad(1).indices, [0, 4])


def test_jax_arrays() -> None:
    jnp = pytest.importorskip("jax.numpy", reason="JAX is not installed")
    array = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    converted = tensor_array(array)
    assert converted.dtype == np.float32
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[2, 3])
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=array)
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=array)
    got = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=2, dtype=tfa.float32)
    np.testing.assert_array_equal(got, np.asarray(array))
    acc = CA(tfa.int32, shape=[2, 3])
    acc.apply_grad(array)  # whole floats convert to an integer dtype, by numpy's rule
    assert acc.take_grad(1).dtype == np.int32


TF_EAGER = """
import numpy as np, tensorflow as tf, tf_accum as tfa
raw = tfa.raw_ops
h = raw.ResourceConditionalAccumulator(dtype=tfa.float64, shape=[2])
raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=tf.constant([1.0, 2.0], tf.float64))
print(raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float64).dtype)
acc = tfa.compat.v1.ConditionalAccumulator(tfa.float32, shape=[2])
acc.apply_grad(tf.constant([1, 2], tf.float32))
try:
    acc.apply_grad(tf.constant([1.0, 2.0], tf.float64))
except ValueError as error:
    print(str(error).split(":")[0])
sparse = tfa.compat.v1.SparseConditionalAccumulator(tf.float32, shape=[4, 2])
sparse.apply_indexed_slices_grad(tf.IndexedSlices(tf.ones([1, 2]), tf.constant([3], tf.int64), tf.constant([4, 2], tf.int64)))
print(acc.num_accumulated(), sparse.take_grad(1).indices)
"""


def test_tensorflow_eager_tensors() -> None:
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed (the oracle extra)")
    if os.environ.get("TF_ACCUM_BACKEND") == "tf_accum":
        pytest.skip("TF_ACCUM_BACKEND=tf_accum: no live TensorFlow")
    done = subprocess.run(
        [sys.executable, "-c", TF_EAGER],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "float64",  # a TensorFlow tensor keeps its dtype in the raw op
        "Tensor conversion requested dtype float32 for Tensor with dtype float64",
        "1 [3]",
    ]


def test_import_loads_neither_torch_nor_jax_nor_scipy() -> None:
    code = (
        "import sys, numpy as np, tf_accum as tfa;"
        "acc = tfa.compat.v1.SparseConditionalAccumulator(tfa.float32, shape=[4, 2]);"
        "acc.apply_indexed_slices_grad(tfa.IndexedSlices(np.ones((1, 2)), [1], [4, 2]));"
        "acc.take_indexed_slices_grad(1);"
        "d = tfa.compat.v1.ConditionalAccumulator(tfa.float32, shape=[2]); d.apply_grad([1, 2]);"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('scipy', 'torch', 'jax')];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
