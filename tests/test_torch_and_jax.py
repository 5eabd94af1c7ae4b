"""PyTorch tensors and JAX arrays as gradients (the ``frameworks`` extra): dense,
sparse as index and value tensors, through DLPack, and read without a copy
where the dtype already matches."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tf_accum as tfa
from tf_accum.raw_ops.arguments import tensor_array

torch = pytest.importorskip("torch", reason="PyTorch is not installed (the frameworks extra)")
jnp = pytest.importorskip("jax.numpy", reason="JAX is not installed (the frameworks extra)")

raw = tfa.raw_ops
CA = tfa.compat.v1.ConditionalAccumulator
SCA = tfa.compat.v1.SparseConditionalAccumulator


class DLPackOnly:
    """Another library's array seen through ``__dlpack__`` alone."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self.array.__dlpack_device__()


def sparse_apply(handle: int, step: Any, indices: Any, values: Any, shape: Any) -> None:
    raw.SparseAccumulatorApplyGradient(
        handle=handle, local_step=step, gradient_indices=indices, gradient_values=values,
        gradient_shape=shape, has_known_shape=True,
    )  # fmt: skip


def test_torch_dense_gradients_are_read_where_they_are() -> None:
    tensor = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert np.shares_memory(tensor_array(tensor), tensor.numpy())  # no copy on the way in
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[2, 3])
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=tensor)
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=torch.tensor(0), gradient=3 * tensor)
    got = raw.ResourceAccumulatorTakeGradient(
        handle=h, num_required=torch.tensor(2), dtype=tfa.float32
    )
    np.testing.assert_array_equal(got, 2 * tensor.numpy())
    assert type(got) is np.ndarray and not np.shares_memory(got, tensor.numpy())
    half = CA(tfa.float16, shape=[3])
    half.apply_grad(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16))
    half.apply_grad(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))  # converted, numpy's rule
    np.testing.assert_array_equal(half.take_grad(2), np.array([1, 2, 3], np.float16))
    strided = torch.arange(8, dtype=torch.float32)[::2]  # not contiguous
    acc = CA(tfa.float32, shape=[4])
    acc.apply_grad(strided)
    np.testing.assert_array_equal(acc.take_grad(1), [0, 2, 4, 6])


def test_torch_sparse_gradients_as_index_and_value_tensors() -> None:
    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=[6, 2])
    sparse_apply(h, torch.tensor(0), torch.tensor([4, 1]), torch.ones(2, 2), torch.tensor([6, 2]))
    sparse_apply(h, 0, torch.tensor([1]), 3 * torch.ones(1, 2), torch.tensor([6, 2]))
    indices, values, shape = raw.SparseAccumulatorTakeGradient(
        handle=h, num_required=2, dtype=tfa.float32
    )
    np.testing.assert_array_equal(indices, [1, 4])
    np.testing.assert_array_equal(values, [[2, 2], [1, 1]])  # each row's mean over its gradients
    np.testing.assert_array_equal(shape, [6, 2])
    acc = SCA(tfa.float32, shape=[6, 2])
    acc.apply_grad(torch.tensor([5, 0]), torch.ones(2, 2, dtype=torch.float64), local_step=0)
    acc.apply_indexed_slices_grad(
        tfa.IndexedSlices(values=torch.ones(1, 2), indices=torch.tensor([5]), dense_shape=None)
    )
    take = acc.take_grad(2)
    np.testing.assert_array_equal(take.indices, [0, 5])
    assert take.values.dtype == np.float32


def test_torch_and_jax_through_dlpack_alone() -> None:
    tensor = torch.arange(4, dtype=torch.float32)
    assert np.shares_memory(tensor_array(DLPackOnly(tensor)), tensor.numpy())
    array = jnp.arange(4, dtype=jnp.float32)
    acc = CA(tfa.float32, shape=[4])
    acc.apply_grad(DLPackOnly(tensor))
    acc.apply_grad(DLPackOnly(3 * array))
    np.testing.assert_array_equal(acc.take_grad(2), [0, 2, 4, 6])
    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=[4, 2])
    sparse_apply(h, 0, DLPackOnly(torch.tensor([2])), DLPackOnly(jnp.ones((1, 2))), [4, 2])
    np.testing.assert_array_equal(
        raw.SparseAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float32).indices, [2]
    )


def test_jax_arrays_dense_sparse_and_bfloat16() -> None:
    array = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    assert np.shares_memory(tensor_array(array), np.asarray(array))  # read where it is
    h = raw.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[2, 3])
    raw.ResourceAccumulatorApplyGradient(handle=h, local_step=jnp.array(0), gradient=array)
    got = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float32)
    np.testing.assert_array_equal(got, np.asarray(array))
    h = raw.ResourceConditionalAccumulator(dtype=tfa.bfloat16, shape=[3])
    raw.ResourceAccumulatorApplyGradient(
        handle=h, local_step=0, gradient=jnp.array([1.0, 2.0, 3.0], jnp.bfloat16)
    )
    got = raw.ResourceAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.bfloat16)
    assert got.dtype == ml_dtypes.bfloat16 and got.tolist() == [1.0, 2.0, 3.0]
    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=[6, 2])
    sparse_apply(h, jnp.array(0), jnp.array([3, 0]), jnp.ones((2, 2)), jnp.array([6, 2]))
    indices, values, _ = raw.SparseAccumulatorTakeGradient(
        handle=h, num_required=1, dtype=tfa.float32
    )
    np.testing.assert_array_equal(indices, [0, 3])
    np.testing.assert_array_equal(values, np.ones((2, 2)))


def test_what_pytorch_itself_refuses_changes_nothing() -> None:
    """A tensor that requires grad (pass ``.grad`` or ``.detach()``) and a
    bfloat16 tensor (numpy has no bfloat16: pass ``.float()``) cannot be read
    as arrays; PyTorch's error comes through and nothing is applied."""
    acc = CA(tfa.float32, shape=[3])
    with pytest.raises(RuntimeError, match="requires grad"):
        acc.apply_grad(torch.ones(3, requires_grad=True))
    h = raw.ResourceConditionalAccumulator(dtype=tfa.bfloat16, shape=[3])
    with pytest.raises(TypeError, match="BFloat16"):
        raw.ResourceAccumulatorApplyGradient(
            handle=h, local_step=0, gradient=torch.ones(3, dtype=torch.bfloat16)
        )
    assert acc.num_accumulated() == 0
    assert raw.ResourceAccumulatorNumAccumulated(handle=h) == 0
    acc.apply_grad(torch.ones(3, requires_grad=True).detach())
    assert acc.num_accumulated() == 1
    narrow = CA(tfa.bfloat16, shape=[3])  # the compat class converts float32 to bfloat16
    narrow.apply_grad(torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16).float())
    assert narrow.take_grad(1).tolist() == [1.0, 2.0, 3.0]
