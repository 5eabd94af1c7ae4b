"""The dense raw ops, case by case (conformance cases D*, E*, X*; departures from docs/departures.md)."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

import tf_accum as tfa
from tf_accum import errors

raw = tfa.raw_ops
F32 = tfa.float32


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def make(ops, shape=(2,), **kw):
    return ops.create(
        dtype=kw.pop("dtype", F32), shape=list(shape) if shape is not None else None, **kw
    )


def check_array(got: np.ndarray, expected, dtype) -> None:
    assert isinstance(got, np.ndarray)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.asarray(expected, dtype))


class TestMeanSumAndSteps:
    def test_fresh_accumulator_counts_zero_as_int32(self, ops) -> None:  # D01
        n = ops.num(handle=make(ops))
        assert n == 0 and isinstance(n, np.int32)

    def test_mean_of_two(self, ops) -> None:  # D02
        h = make(ops)
        ops.apply(handle=h, local_step=0, gradient=f32(1, 2))
        ops.apply(handle=h, local_step=0, gradient=f32(3, 4))
        check_array(ops.take(handle=h, num_required=2, dtype=F32), [2, 3], np.float32)
        assert ops.num(handle=h) == 0

    def test_take_consumes_all_and_divides_by_all(self, ops) -> None:  # D03
        h = make(ops)
        for g in ([1, 2], [3, 4], [5, 6]):
            ops.apply(handle=h, local_step=0, gradient=f32(*g))
        check_array(ops.take(handle=h, num_required=1, dtype=F32), [3, 4], np.float32)

    def test_sum_reduction(self, ops) -> None:  # D04
        h = make(ops, reduction_type="SUM")
        for g in ([1, 2], [10, 20], [100, 200]):
            ops.apply(handle=h, local_step=0, gradient=f32(*g))
        check_array(ops.take(handle=h, num_required=3, dtype=F32), [111, 222], np.float32)

    def test_staleness_rule_is_local_step_at_least_global_step(self, ops) -> None:  # D05
        h = make(ops)
        ops.set_step(handle=h, new_global_step=5)
        counts = []
        for step in (4, 5, 100):
            ops.apply(handle=h, local_step=step, gradient=f32(1, 1))
            counts.append(int(ops.num(handle=h)))
        assert counts == [0, 1, 2]

    def test_take_increments_global_step(self, ops) -> None:  # D06
        h = make(ops, shape=[1])
        ops.apply(handle=h, local_step=0, gradient=f32(1))
        check_array(ops.take(handle=h, num_required=1, dtype=F32), [1], np.float32)
        ops.apply(handle=h, local_step=0, gradient=f32(1))
        assert ops.num(handle=h) == 0
        ops.apply(handle=h, local_step=1, gradient=f32(1))
        assert ops.num(handle=h) == 1

    def test_negative_local_step_is_stale_on_fresh_accumulator(self, ops) -> None:  # D07
        h = make(ops, shape=[1])
        ops.apply(handle=h, local_step=-1, gradient=f32(1))
        assert ops.num(handle=h) == 0

    def test_negative_steps_accepted_when_global_step_is_lower(self, ops) -> None:  # P09
        h = make(ops, shape=[1])
        ops.set_step(handle=h, new_global_step=-10)
        ops.apply(handle=h, local_step=-3, gradient=f32(1))
        assert ops.num(handle=h) == 1

    def test_raising_global_step_keeps_accumulated(self, ops) -> None:  # D08
        h = make(ops, shape=[1])
        ops.apply(handle=h, local_step=0, gradient=f32(1))
        ops.set_step(handle=h, new_global_step=100)
        check_array(ops.take(handle=h, num_required=1, dtype=F32), [1], np.float32)
        ops.apply(handle=h, local_step=100, gradient=f32(1))
        assert ops.num(handle=h) == 0
        ops.apply(handle=h, local_step=101, gradient=f32(1))
        assert ops.num(handle=h) == 1

    def test_lower_global_step_is_applied(self, ops, caplog) -> None:  # D09
        h = make(ops, shape=[1])
        ops.set_step(handle=h, new_global_step=10)
        ops.apply(handle=h, local_step=10, gradient=f32(1))
        ops.take(handle=h, num_required=1, dtype=F32)
        with caplog.at_level("WARNING", logger="tf_accum"):
            ops.set_step(handle=h, new_global_step=3)
        assert "smaller value" in caplog.text
        ops.apply(handle=h, local_step=3, gradient=f32(1))
        assert ops.num(handle=h) == 1

    def test_global_step_wraps_around_int64(self, ops) -> None:  # D48
        h = make(ops, shape=[1])
        ops.set_step(handle=h, new_global_step=2**63 - 1)
        ops.apply(handle=h, local_step=2**63 - 1, gradient=f32(1))
        ops.take(handle=h, num_required=1, dtype=F32)
        ops.apply(handle=h, local_step=-5, gradient=f32(1))
        assert ops.num(handle=h) == 1
        assert tfa.resources.current_table().lookup(h).global_step() == -(2**63)  # type: ignore[attr-defined]


class TestShapes:
    @pytest.mark.parametrize(
        ("declared", "gradient", "message"),
        [
            ([2], np.ones(3, np.float32), "Shape mismatch: expected [2], got [3]"),  # D10
            ([2], np.float32(1), "Shape mismatch: expected [2], got []"),  # D11
            ([], f32(1), "Shape mismatch: expected [], got [1]"),  # D12
            ([None, 3], np.ones((2, 2), np.float32), "Shape mismatch: expected [?,3], got [2,2]"),
        ],
    )
    def test_declared_shape_mismatch(self, ops, declared, gradient, message) -> None:
        h = make(ops, shape=declared)
        with pytest.raises(errors.InvalidArgumentError) as info:
            ops.apply(handle=h, local_step=0, gradient=gradient)
        assert message in str(info.value)
        assert ops.num(handle=h) == 0

    def test_first_gradient_fixes_partial_shape(self, ops) -> None:  # D14
        h = make(ops, shape=[None, 3])
        ops.apply(handle=h, local_step=0, gradient=np.ones((2, 3), np.float32))
        with pytest.raises(errors.InvalidArgumentError, match=r"expected \[2,3\], got \[4,3\]"):
            ops.apply(handle=h, local_step=0, gradient=np.ones((4, 3), np.float32))
        assert ops.num(handle=h) == 1

    def test_round_shape_reported_before_declared_shape(self, ops) -> None:  # D15
        h = make(ops, shape=[None, 3])
        ops.apply(handle=h, local_step=0, gradient=np.ones((2, 3), np.float32))
        with pytest.raises(errors.InvalidArgumentError, match=r"expected \[2,3\], got \[4,4\]"):
            ops.apply(handle=h, local_step=0, gradient=np.ones((4, 4), np.float32))

    def test_take_frees_the_round_shape(self, ops) -> None:  # D16
        h = make(ops, shape=[None, 3])
        ops.apply(handle=h, local_step=0, gradient=np.ones((2, 3), np.float32))
        ops.take(handle=h, num_required=1, dtype=F32)
        ops.apply(handle=h, local_step=1, gradient=2 * np.ones((4, 3), np.float32))
        check_array(ops.take(handle=h, num_required=1, dtype=F32), 2 * np.ones((4, 3)), np.float32)

    def test_unknown_rank_fixes_shape_per_round(self, ops) -> None:  # D17, D18
        h = make(ops, shape=None)
        ops.apply(handle=h, local_step=0, gradient=np.ones((2, 2), np.float32))
        with pytest.raises(errors.InvalidArgumentError, match=r"expected \[2,2\], got \[4\]"):
            ops.apply(handle=h, local_step=0, gradient=np.ones(4, np.float32))
        ops.take(handle=h, num_required=1, dtype=F32)
        ops.apply(handle=h, local_step=1, gradient=np.float32(7))
        got = ops.take(handle=h, num_required=1, dtype=F32)
        assert got.shape == () and got.dtype == np.float32 and got == 7

    def test_stale_gradient_against_declared_shape_is_refused(
        self, ops
    ) -> None:  # D19; docs/departures.md T7
        h = make(ops, shape=[2])
        ops.set_step(handle=h, new_global_step=5)
        with pytest.raises(errors.InvalidArgumentError, match=r"expected \[2\], got \[7\]"):
            ops.apply(handle=h, local_step=4, gradient=np.ones(7, np.float32))
        assert ops.num(handle=h) == 0

    def test_stale_gradient_of_an_older_round_shape_is_dropped(
        self, ops
    ) -> None:  # docs/departures.md T7
        h = make(ops, shape=[None])
        ops.apply(handle=h, local_step=0, gradient=f32(1, 2))
        ops.take(handle=h, num_required=1, dtype=F32)
        ops.apply(handle=h, local_step=1, gradient=f32(1, 2, 3))
        ops.apply(handle=h, local_step=0, gradient=f32(5, 5))  # stale, last round's shape
        assert ops.num(handle=h) == 1
        check_array(ops.take(handle=h, num_required=1, dtype=F32), [1, 2, 3], np.float32)

    def test_empty_gradients_count(self, ops) -> None:  # D20
        h = make(ops, shape=None)
        ops.apply(handle=h, local_step=0, gradient=np.zeros(0, np.float32))
        ops.apply(handle=h, local_step=0, gradient=np.zeros(0, np.float32))
        assert ops.num(handle=h) == 2
        got = ops.take(handle=h, num_required=2, dtype=F32)
        assert got.shape == (0,) and got.dtype == np.float32


class TestArgumentChecks:
    @pytest.mark.parametrize("num_required", [0, -1])
    def test_num_required_must_be_positive(self, ops, num_required) -> None:  # D21, D22
        h = make(ops, shape=[1])
        ops.apply(handle=h, local_step=0, gradient=f32(1))
        with pytest.raises(
            errors.InvalidArgumentError,
            match=f"Argument num_required must be positive, but was {num_required}",
        ):
            ops.take(handle=h, num_required=num_required, dtype=F32)
        assert ops.num(handle=h) == 1

    def test_one_element_local_step_is_refused_and_not_applied(self, ops) -> None:  # D38, E12
        h = make(ops, shape=[1])
        with pytest.raises(
            errors.InvalidArgumentError,
            match=r"Argument local_step must be scalar, but had bad shape \[1\]",
        ):
            ops.apply(handle=h, local_step=[0], gradient=f32(1))
        assert ops.num(handle=h) == 0

    @pytest.mark.parametrize(
        ("step", "text"), [([0, 1], "[2]"), (np.zeros((2, 3), int), "[2,3]"), ([], "[0]")]
    )
    def test_other_non_scalar_local_steps(self, ops, step, text) -> None:  # X03, D49
        h = make(ops, shape=[1])
        with pytest.raises(errors.InvalidArgumentError) as info:
            ops.apply(handle=h, local_step=step, gradient=f32(1))
        assert f"Argument local_step must be scalar, but had bad shape {text}" in str(info.value)
        assert ops.num(handle=h) == 0

    def test_non_scalar_global_step_names_its_argument(
        self, ops
    ) -> None:  # D39; docs/departures.md T9
        h = make(ops, shape=[1])
        with pytest.raises(
            errors.InvalidArgumentError,
            match=r"Argument new_global_step must be scalar, but had bad shape \[1\]",
        ):
            ops.set_step(handle=h, new_global_step=[3])
        ops.apply(handle=h, local_step=2, gradient=f32(1))
        assert ops.num(handle=h) == 1  # the step is still 0

    def test_non_scalar_num_required_is_refused_and_not_queued(self, ops) -> None:  # X04, X08
        h = make(ops, shape=[1])
        with pytest.raises(
            errors.InvalidArgumentError,
            match=r"Argument num_required must be scalar, but had bad shape \[1\]",
        ):
            ops.take(handle=h, num_required=np.array([1], np.int32), dtype=F32)
        ops.apply(handle=h, local_step=0, gradient=f32(1))
        assert ops.num(handle=h) == 1

    def test_wrong_gradient_dtype(self, ops) -> None:  # D40, X01
        kind = "string_ref" if ops.name == "ref" else "resource"
        h = make(ops)
        for stale in (True, False):
            ops.set_step(handle=h, new_global_step=5 if stale else 0)
            with pytest.raises(errors.InvalidArgumentError) as info:
                ops.apply(handle=h, local_step=0, gradient=np.array([1.0, 2.0], np.float64))
            assert (
                f"Signature mismatch, have: {kind}, int64, double-> expected: {kind}, int64, float->"
                in str(info.value)
            )
            assert "float64" in str(info.value) and "float32" in str(info.value)
        assert ops.num(handle=h) == 0

    def test_python_floats_are_float32(self, ops) -> None:  # E14
        h = make(ops, dtype=tfa.float64)
        with pytest.raises(errors.InvalidArgumentError) as info:
            ops.apply(handle=h, local_step=0, gradient=[1.0, 2.0])
        assert "have: " in str(info.value) and "int64, float-> expected: " in str(info.value)
        assert "int64, double->" in str(info.value)

    def test_python_ints_are_int32(self, ops) -> None:
        h = make(ops, dtype=tfa.int32)
        ops.apply(handle=h, local_step=0, gradient=[1, 2])
        check_array(ops.take(handle=h, num_required=1, dtype=tfa.int32), [1, 2], np.int32)

    def test_wrong_take_dtype(self, ops) -> None:  # X02
        h = make(ops)
        ops.apply(handle=h, local_step=0, gradient=f32(1, 2))
        with pytest.raises(errors.InvalidArgumentError) as info:
            ops.take(handle=h, num_required=1, dtype=tfa.float64)
        assert "Signature mismatch" in str(info.value) and "int32->double" in str(info.value)
        assert ops.num(handle=h) == 1

    def test_numpy_scalars_convert(self, ops) -> None:  # E20
        h = make(ops)
        ops.apply(handle=h, local_step=np.int32(0), gradient=f32(1, 2))
        check_array(ops.take(handle=h, num_required=np.int64(1), dtype=F32), [1, 2], np.float32)

    def test_float_steps_are_type_errors(self, ops) -> None:  # E21
        h = make(ops)
        with pytest.raises(TypeError, match="Cannot convert 0.5 to EagerTensor of dtype int64"):
            ops.apply(handle=h, local_step=0.5, gradient=f32(1, 2))
        with pytest.raises(TypeError, match="Cannot convert 1.5 to EagerTensor of dtype int32"):
            ops.take(handle=h, num_required=1.5, dtype=F32)
        assert ops.num(handle=h) == 0

    def test_ragged_gradient(self, ops) -> None:
        h = make(ops, shape=None)
        with pytest.raises(ValueError, match="non-rectangular"):
            ops.apply(handle=h, local_step=0, gradient=[[1.0, 2.0], [3.0]])

    def test_string_gradient_is_a_signature_mismatch(self, ops) -> None:
        h = make(ops)
        with pytest.raises(errors.InvalidArgumentError, match="have: .*string->"):
            ops.apply(handle=h, local_step=0, gradient=["a", "b"])

    def test_positional_call_is_a_type_error(self, ops) -> None:  # E17
        h = make(ops)
        with pytest.raises(TypeError) as info:
            raw.ResourceAccumulatorApplyGradient(h, 0, [1.0, 2.0])  # type: ignore[call-arg]
        assert str(info.value) == (
            "resource_accumulator_apply_gradient only takes keyword args (possible keys: "
            "['handle', 'local_step', 'gradient', 'name']). Please pass these args as kwargs "
            "instead."
        )

    def test_missing_shape_is_a_type_error(self, ops) -> None:
        with pytest.raises(TypeError, match="shape"):
            ops.create(dtype=F32)

    def test_negative_timeout(self, ops) -> None:
        h = make(ops)
        with pytest.raises(ValueError, match="timeout"):
            ops.take(handle=h, num_required=1, dtype=F32, timeout=-1)
        assert tfa.resources.current_table().lookup(h).num_waiting() == 0


class TestConstructorAttributes:
    def test_minus_one_is_an_unknown_dimension(self, ops) -> None:  # E11
        h = make(ops, shape=[-1, 2])
        with pytest.raises(errors.InvalidArgumentError, match=r"expected \[\?,2\], got \[5,3\]"):
            ops.apply(handle=h, local_step=0, gradient=np.ones((5, 3), np.float32))
        ops.apply(handle=h, local_step=0, gradient=np.ones((5, 2), np.float32))
        assert ops.num(handle=h) == 1

    def test_dimension_below_minus_one(self, ops) -> None:  # E11
        with pytest.raises(
            errors.InvalidArgumentError,
            match=r"Shape \[-5\] has dimensions with values below -1 \(where -1 means unknown\)",
        ):
            make(ops, shape=[-5])

    def test_reduction_type_is_case_sensitive(self, ops) -> None:  # E10
        with pytest.raises(errors.InvalidArgumentError) as info:
            make(ops, reduction_type="mean")
        assert (
            "Value for attr 'reduction_type' of \"mean\" is not in the list of allowed values"
            in str(info.value)
        )

    def test_an_empty_reduction_type_is_refused_and_none_is_mean(self, ops) -> None:  # A01, A02
        with pytest.raises(errors.InvalidArgumentError, match='reduction_type\' of "" is not'):
            make(ops, reduction_type="")
        h = make(ops, shape=[1], reduction_type=None)
        ops.apply(handle=h, local_step=0, gradient=np.array([1.0], np.float32))
        ops.apply(handle=h, local_step=0, gradient=np.array([3.0], np.float32))
        np.testing.assert_array_equal(ops.take(handle=h, num_required=2, dtype=tfa.float32), [2.0])

    def test_string_attributes_may_be_bytes(self, ops) -> None:  # A06
        name = f"bytes-name-{uuid.uuid4().hex}"
        h = make(ops, shape=[1], reduction_type=b"SUM", shared_name=name.encode())
        assert make(ops, shape=[1], reduction_type="SUM", shared_name=name) == h
        ops.apply(handle=h, local_step=0, gradient=np.array([1.0], np.float32))
        ops.apply(handle=h, local_step=0, gradient=np.array([3.0], np.float32))
        taken = ops.take(handle=h, num_required=2, dtype=tfa.float32, timeout=30)
        np.testing.assert_array_equal(taken, [4.0])
        tfa.raw_ops.DestroyResourceOp(resource=h)

    def test_dtype_as_tensorflow_enum_number(self, ops) -> None:  # A13
        h = make(ops, dtype=2, shape=[1])
        ops.apply(handle=h, local_step=0, gradient=np.array([1.5]))
        assert ops.take(handle=h, num_required=1, dtype=tfa.float64).dtype == np.float64

    @pytest.mark.parametrize("dtype", [tfa.bool, "string", np.bool_])
    def test_dtype_outside_the_op_list(self, ops, dtype) -> None:  # D37
        with pytest.raises(TypeError) as info:
            make(ops, dtype=dtype)
        assert "not in list of allowed values: float32, float64, int32, uint8, int16, int8" in str(
            info.value
        )

    def test_not_a_dtype(self, ops) -> None:
        with pytest.raises(TypeError, match="Expected DataType for argument 'dtype' not 'floaty'"):
            make(ops, dtype="floaty")
