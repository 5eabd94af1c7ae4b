"""compat.v1.ConditionalAccumulator and its base (conformance cases P*, E*)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import Background, wait_for_waiting
from tf_accum import errors

v1 = tfa.compat.v1
CA = v1.ConditionalAccumulator


def test_attributes() -> None:  # P01; docs/departures.md T13
    acc = CA(tfa.float32, shape=[2], name="Q")
    assert acc.name == "Q"
    assert acc.dtype == tfa.float32 and acc.dtype == "float32" and acc.dtype == np.float32
    assert isinstance(acc.accumulator_ref, int)
    acc.apply_grad([1.0, 2.0])
    assert acc.take_grad(1).shape == (2,)


@pytest.mark.parametrize(
    "given",
    ["float32", np.float32, np.dtype("float32"), tfa.float32, SimpleNamespace(name="float32")],
)
def test_dtype_equals_what_it_was_made_from(given) -> None:  # P10; docs/departures.md T13
    acc = CA(given, shape=[2])
    assert acc.dtype == given
    assert acc.dtype is tfa.float32


def test_eager_return_values() -> None:  # E01
    acc = CA(tfa.float32, shape=[2], shared_name="compat-e01")
    assert acc.apply_grad([1, 2]) is None
    assert acc.apply_grad([3, 4]) is None
    assert acc.set_global_step(0) is None
    n = acc.num_accumulated()
    assert n == 2 and isinstance(n, np.int32)
    got = acc.take_grad(2)
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    np.testing.assert_array_equal(got, [2.0, 3.0])
    acc.close()


def test_declared_shape_is_checked_in_python() -> None:  # P02
    acc = CA(tfa.float32, shape=[2])
    with pytest.raises(ValueError, match=r"^Shapes \(3,\) and \(2,\) are incompatible$"):
        acc.apply_grad([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"Shapes \(\) and \(2,\) are incompatible"):
        acc.apply_grad(1.0)
    partial = CA(tfa.float32, shape=[None, 3])
    with pytest.raises(ValueError, match=r"Shapes \(4, 2\) and \(None, 3\) are incompatible"):
        partial.apply_grad(np.ones((4, 2)))
    assert acc.num_accumulated() == 0 and partial.num_accumulated() == 0


def test_tensor_of_other_dtype_is_refused() -> None:  # P03, E16
    class FakeTensor:  # a tensor object that is not numpy, like tf.Tensor
        dtype = SimpleNamespace(name="float64")

        def __array__(self, dtype=None, copy=None):
            return np.array([1.0, 2.0])

        def __repr__(self) -> str:
            return "<FakeTensor float64>"

    acc = CA(tfa.float32, shape=[2])
    with pytest.raises(ValueError) as info:
        acc.apply_grad(FakeTensor())
    assert str(info.value) == (
        "Tensor conversion requested dtype float32 for Tensor with dtype float64: <FakeTensor float64>"
    )
    acc.apply_grad(np.array([1.0, 2.0]))  # a float64 ndarray converts
    assert acc.num_accumulated() == 1


def test_numbers_and_integer_arrays_convert() -> None:  # P04
    acc = CA(tfa.float32, shape=[2])
    acc.apply_grad(np.array([1, 2], np.int64))
    acc.apply_grad([1, 2])
    got = acc.take_grad(2)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [1.0, 2.0])


def test_strings_are_refused() -> None:  # P05
    acc = CA(tfa.float32, shape=[2])
    with pytest.raises(TypeError, match=r"^Expected float32, but got a of type 'str'\.$"):
        acc.apply_grad(["a", "b"])


def test_fractions_into_an_integer_accumulator_are_refused() -> None:
    acc = CA(tfa.int32, shape=[2])
    with pytest.raises(TypeError, match="Expected int32, but got 1.5 of type 'float'"):
        acc.apply_grad([1.5, 2.0])
    acc.apply_grad([1.0, 2.0])
    assert acc.num_accumulated() == 1


def test_bad_reduction_type() -> None:  # P06
    with pytest.raises(ValueError) as info:
        CA(tfa.float32, shape=[2], reduction_type="Invalid")
    assert str(info.value) == (
        "Attr 'reduction_type' of 'ResourceConditionalAccumulator' Op passed string 'Invalid' "
        'not in: "MEAN", "SUM".'
    )


def test_take_grad_num_required_must_be_int32() -> None:  # P07
    acc = CA(tfa.float32, shape=[2])
    with pytest.raises(TypeError) as info:
        acc.take_grad(1.0)
    assert str(info.value) == (
        "Expected int32 passed to parameter 'num_required' of op "
        "'ResourceAccumulatorTakeGradient', got 1.0 of type 'float' instead. Error: Expected "
        "int32, but got 1.0 of type 'float'."
    )

    class Int64Tensor:
        dtype = SimpleNamespace(name="int64")

    with pytest.raises(
        TypeError, match="has type int64 that does not match expected type of int32"
    ):
        acc.take_grad(Int64Tensor())


@pytest.mark.parametrize(
    ("shape", "error", "message"),
    [
        ([-1, 2], ValueError, "Dimension -1 must be >= 0."),  # P08
        (["a"], TypeError, "got value ''a'' with type '<class 'str'>'."),
    ],
)
def test_bad_shapes(shape, error, message) -> None:
    with pytest.raises(error) as info:
        CA(tfa.float32, shape=shape)
    assert str(info.value).startswith("Error converting shape to a TensorShape: ")
    assert str(info.value).endswith(message)


def test_float_steps_truncate() -> None:  # P09
    acc = CA(tfa.float32, shape=[2])
    acc.set_global_step(1.9)
    acc.apply_grad([1, 1], local_step=1.7)
    assert acc.num_accumulated() == 1
    acc.set_global_step(-1)
    acc.apply_grad([1, 1], local_step=-1.7)
    assert acc.num_accumulated() == 2


def test_string_step_is_unimplemented() -> None:  # E15
    acc = CA(tfa.float32, shape=[2])
    with pytest.raises(errors.UnimplementedError, match="Cast string to int64 is not supported"):
        acc.apply_grad([1, 1], local_step="1")
    assert acc.num_accumulated() == 0


def test_vector_step_reaches_the_scalar_check() -> None:
    acc = CA(tfa.float32, shape=[2])
    with pytest.raises(errors.InvalidArgumentError, match="local_step must be scalar"):
        acc.apply_grad([1, 1], local_step=[1])
    assert acc.num_accumulated() == 0


def test_two_private_accumulators_do_not_alias() -> None:  # E02; docs/departures.md T4
    q1, q2 = CA(tfa.float32, shape=[2]), CA(tfa.float32, shape=[2])
    q1.apply_grad([1, 1])
    assert q2.num_accumulated() == 0
    del q1
    q3 = CA(tfa.float32, shape=[2])
    assert q2.num_accumulated() == 0 and q3.num_accumulated() == 0


def test_shared_name_shares() -> None:  # E06
    a = CA(tfa.float32, shape=[2], shared_name="compat-e06")
    b = CA(tfa.float32, shape=[2], shared_name="compat-e06")
    a.apply_grad([1, 1])
    assert b.num_accumulated() == 1
    a.close()


def test_take_grad_blocks_until_released() -> None:  # E19
    acc = CA(tfa.float32, shape=[2])
    acc.apply_grad([1, 1])
    bg = Background(acc.take_grad, 2)
    wait_for_waiting(acc.accumulator_ref, 1)
    assert not bg.done()
    acc.apply_grad([3, 3])
    np.testing.assert_array_equal(bg.result(), [2.0, 2.0])


def test_take_grad_timeout_and_close_cancels() -> None:  # docs/departures.md T2, T3
    acc = CA(tfa.float32, shape=[2])
    with pytest.raises(errors.DeadlineExceededError):
        acc.take_grad(1, timeout=0.01)
    bg = Background(acc.take_grad, 1)
    wait_for_waiting(acc.accumulator_ref, 1)
    acc.close()
    assert isinstance(bg.error(), errors.CancelledError)
    with pytest.raises(errors.NotFoundError):
        acc.num_accumulated()


def test_base_class_works_on_a_raw_handle() -> None:
    h = tfa.raw_ops.ResourceConditionalAccumulator(dtype=tfa.float64, shape=[1], name="raw")
    base = v1.ConditionalAccumulatorBase(tfa.float64, [1], h)
    assert base.accumulator_ref == h and base.dtype == "float64"
    assert base.name.endswith("_raw")
    tfa.raw_ops.ResourceAccumulatorApplyGradient(handle=h, local_step=0, gradient=np.ones(1))
    assert base.num_accumulated() == 1
    base.set_global_step(3)
    tfa.raw_ops.ResourceAccumulatorApplyGradient(handle=h, local_step=2, gradient=np.ones(1))
    assert base.num_accumulated() == 1
    assert not hasattr(base, "apply_grad") and not hasattr(base, "take_grad")


def test_unsupported_dtype_for_the_class() -> None:
    with pytest.raises(TypeError, match="DataType bool not in list of allowed values"):
        CA(tfa.bool, shape=[2])
