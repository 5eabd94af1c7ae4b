"""The sparse raw ops, case by case (conformance cases S*, X05-X07; departures from docs/departures.md)."""

from __future__ import annotations

import numpy as np
import pytest

import tf_accum as tfa
from tests.helpers import wait_until
from tf_accum import errors

raw = tfa.raw_ops
F32 = tfa.float32


def make(shape, **kw):
    return raw.SparseConditionalAccumulator(dtype=kw.pop("dtype", F32), shape=shape, **kw)


def apply(h, indices, values, shape=None, step=0, dtype=np.float32):
    raw.SparseAccumulatorApplyGradient(
        handle=h,
        local_step=step,
        gradient_indices=np.asarray(indices, np.int64).reshape(np.shape(indices)),
        gradient_values=np.asarray(values, dtype),
        gradient_shape=np.asarray(shape if shape is not None else [], np.int64),
        has_known_shape=shape is not None,
    )


def take(h, n, dtype=F32):
    return raw.SparseAccumulatorTakeGradient(handle=h, num_required=n, dtype=dtype)


def num(h) -> int:
    return int(raw.AccumulatorNumAccumulated(handle=h))


def check(result, indices, values, shape, dtype=np.float32) -> None:
    assert result.indices.dtype == np.int64 and result.shape.dtype == np.int64
    assert result.values.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result.indices, indices)
    np.testing.assert_array_equal(result.values, np.asarray(values, dtype))
    assert result.values.shape == np.asarray(values, dtype).shape
    np.testing.assert_array_equal(result.shape, shape)


class TestMerge:
    def test_mean_of_sorted_gradients(self) -> None:  # S01
        h = make([3, 2])
        apply(h, [0, 2], [[1, 1], [2, 2]], [3, 2])
        apply(h, [1, 2], [[3, 3], [4, 4]], [3, 2])
        check(take(h, 2), [0, 1, 2], [[1, 1], [3, 3], [3, 3]], [3, 2])

    def test_mean_divides_each_row_by_its_own_count(self) -> None:  # S02
        h = make([4, 1])
        apply(h, [0, 1, 2], [[3], [3], [3]])
        apply(h, [1, 2], [[6], [6]])
        apply(h, [2], [[9]])
        check(take(h, 3), [0, 1, 2], [[3], [4.5], [6]], [4, 1])

    @pytest.mark.parametrize(
        ("dtype", "signalling", "quiet_bit"),
        [(np.float16, 0x7C01, 0x0200), (np.float32, 0x7FA12345, 1 << 22),
         (np.float64, 0x7FF4000000012345, 1 << 51)],
    )  # fmt: skip
    def test_mean_leaves_a_row_touched_once_undivided_nan_bits_and_all(
        self, dtype: type, signalling: int, quiet_bit: int
    ) -> None:
        # docs/departures.md T20: TensorFlow divides it by 1, which quiets a
        # signalling NaN; the row counted twice is divided, and quieted
        bits = np.dtype(f"uint{np.dtype(dtype).itemsize * 8}")
        nan: np.ndarray = np.array([[signalling]], bits).view(dtype)
        h = make([3, 1], dtype=tfa.as_dtype(dtype))
        apply(h, [0, 2], np.concatenate([nan, nan]), dtype=dtype)
        apply(h, [2], nan, dtype=dtype)
        got = take(h, 2, dtype=tfa.as_dtype(dtype)).values.view(bits)
        assert got[0, 0] == signalling
        assert np.isnan(got[1].view(dtype)).all() and int(got[1, 0]) & quiet_bit

    def test_sum(self) -> None:  # S03
        h = make([3, 2], reduction_type="SUM")
        apply(h, [0, 2], [[1, 1], [2, 2]], [3, 2])
        apply(h, [1, 2], [[3, 3], [4, 4]], [3, 2])
        check(take(h, 2), [0, 1, 2], [[1, 1], [3, 3], [6, 6]], [3, 2])

    def test_rank_zero_declared_shape(self) -> None:  # S04
        h = make([])
        apply(h, [0, 1], [[1, 0], [0, 2]])
        apply(h, [0, 2], [[0, 1], [3, 0]], [3, 2])
        check(take(h, 1), [0, 1, 2], [[0.5, 0.5], [0, 2], [3, 0]], [-1, 2])

    def test_unsorted_indices_are_sorted(self) -> None:  # S05; docs/departures.md T5
        h = make([5, 1])
        apply(h, [3, 0, 2], [[30], [0], [20]])
        check(take(h, 1), [0, 2, 3], [[0], [20], [30]], [5, 1])

    def test_unsorted_later_gradients_merge(self) -> None:  # S06, S07; docs/departures.md T5
        h = make([5, 1])
        apply(h, [2, 0], [[20], [1]])
        apply(h, [0, 1], [[100], [10]])
        check(take(h, 2), [0, 1, 2], [[50.5], [10], [20]], [5, 1])
        apply(h, [0, 2], [[1], [20]], step=1)
        apply(h, [2, 0], [[200], [100]], step=1)
        check(take(h, 2), [0, 2], [[50.5], [110]], [5, 1])

    def test_duplicates_within_a_gradient_sum_and_count_once(
        self,
    ) -> None:  # S08, S09; docs/departures.md T5
        h = make([5, 1])
        apply(h, [1, 1], [[1], [2]])
        check(take(h, 1), [1], [[3]], [5, 1])
        apply(h, [1, 1], [[1], [2]], step=1)
        apply(h, [1], [[10]], step=1)
        check(take(h, 2), [1], [[6.5]], [5, 1])

    def test_duplicates_overflowing_sum_to_infinity_quietly(self) -> None:
        # as every other sum of the accumulator: no RuntimeWarning (an error here)
        h = make([5, 2], reduction_type="SUM")
        apply(h, [1, 1, 1], [[3e38, np.inf], [3e38, -np.inf], [0.0, 0.0]])
        result = take(h, 1)
        assert result.indices.tolist() == [1]
        assert result.values[0, 0] == np.inf and np.isnan(result.values[0, 1])

    def test_unknown_dim_zero_has_no_range_check(self) -> None:  # S12
        h = make([None, 1])
        apply(h, [100], [[5]])
        check(take(h, 1), [100], [[5]], [-1, 1])

    def test_values_with_more_dims_than_declared(self) -> None:  # S24
        h = make([3, 2])
        apply(h, [0], np.ones((1, 2, 4)))
        check(take(h, 1), [0], np.ones((1, 2, 4)), [3, 2, 4])

    def test_returned_shape_comes_from_the_values(self) -> None:  # S21, S29
        h = make(None)
        apply(h, [0], np.ones((1, 3, 4)))
        check(take(h, 1), [0], np.ones((1, 3, 4)), [-1, 3, 4])
        h = make([2, 2, None])
        apply(h, [0], np.ones((1, 2, 2, 2)))
        assert list(take(h, 1).shape) == [2, 2, 2, 2]
        apply(h, [0], np.ones((1, 2, 2, 3)), step=1)
        with pytest.raises(
            errors.InvalidArgumentError,
            match="Shape mismatch: expected values dim 3 to be 3, got 2",
        ):
            apply(h, [0], np.ones((1, 2, 2, 2)), step=1)

    def test_gradient_shape_is_never_compared_with_values(self) -> None:  # S22
        h = make(None)
        apply(h, [0], [[1, 2]], [7, 9, 9])
        apply(h, [5], [[1, 2]], [1])
        check(take(h, 2), [0, 5], [[1, 2], [1, 2]], [-1, 2])

    def test_empty_gradients(self) -> None:  # S25
        h = make([3, 2])
        apply(h, [], np.zeros((0, 2)), [3, 2])
        assert num(h) == 1
        result = take(h, 1)
        assert result.indices.shape == (0,) and result.values.shape == (0, 2)
        np.testing.assert_array_equal(result.shape, [3, 2])

    def test_empty_gradients_fix_the_values_shape(self) -> None:  # S26
        h = make(None)
        apply(h, [], np.zeros((0, 2)))
        with pytest.raises(
            errors.InvalidArgumentError,
            match="Shape mismatch: expected values dim 1 to be 2, got 3",
        ):
            apply(h, [], np.zeros((0, 3)))
        with pytest.raises(
            errors.InvalidArgumentError, match="Shape mismatch: expected values rank 2, got 1"
        ):
            apply(h, [], np.zeros((0,)))
        assert num(h) == 1

    def test_scalar_rows(self) -> None:  # S27
        h = make([5])
        apply(h, [1, 3], [10, 30], [5])
        apply(h, [3], [50])
        check(take(h, 2), [1, 3], [10, 40], [5])

    def test_float16_is_bit_identical_to_sequential_adds(self) -> None:  # S30
        h = make([3, 1], dtype=tfa.float16)
        apply(h, [0, 1], [[0.1], [1.0]], dtype=np.float16)
        apply(h, [0], [[0.2]], dtype=np.float16)
        apply(h, [0], [[0.3]], dtype=np.float16)
        result = take(h, 3, dtype=tfa.float16)
        expected = (np.float16(0.1) + np.float16(0.2) + np.float16(0.3)) / np.float16(3)
        assert result.values.dtype == np.float16
        assert result.values[0, 0] == expected == np.float16(0.1998291015625)
        assert result.values[1, 0] == 1.0

    @pytest.mark.parametrize("twice", [1, 3])  # rows touched twice: few, or most
    def test_mean_leaves_rows_touched_once_bit_for_bit(self, twice) -> None:
        """Dividing by 1 is not always the identity (a complex -0 real part
        becomes +0, an infinite imaginary part makes NaN; a signaling NaN gets
        quieted): rows touched once keep their exact bits, whichever way the
        take divides the others."""
        once = [complex(-0.0, np.inf), complex(np.nan, -0.0)]
        h = make([5, 2], dtype=tfa.complex128)
        apply(h, [0, 1, 2, 3], [once, once, once, once], dtype=np.complex128)
        apply(h, list(range(twice)), [[2 + 4j, 6j]] * twice, dtype=np.complex128)
        result = take(h, 2, dtype=tfa.complex128)
        np.testing.assert_array_equal(result.indices, [0, 1, 2, 3])
        kept = np.array([once] * (4 - twice), np.complex128)
        assert result.values[twice:].tobytes() == kept.tobytes()
        with np.errstate(all="ignore"):
            summed = np.array([once], np.complex128) + np.array([[2 + 4j, 6j]])
            divided = summed / np.complex128(2)
        assert result.values[:twice].tobytes() == np.repeat(divided, twice, axis=0).tobytes()

    def test_take_result_does_not_alias_input_or_state(self) -> None:
        h = make([3, 1])
        values = np.array([[1.0], [2.0]], np.float32)
        indices = np.array([0, 1], np.int64)
        apply(h, indices, values)
        values[:] = 99
        result = take(h, 1)
        np.testing.assert_array_equal(result.values, [[1], [2]])
        result.values[:] = -1
        apply(h, [0], [[5.0]], step=1)
        check(take(h, 1), [0], [[5]], [3, 1])


class TestValidation:
    @pytest.mark.parametrize(
        ("shape", "indices", "values", "gshape", "message"),
        [
            ([3, 1], [0, 1, 7], [[5], [5], [5]], None,
             "Shape mismatch: index of slice 2 exceeded limits of shape; index is 7 exceeded 3"),  # S11
            ([3, 3], [[0, 1], [1, 0]], [1, 2], None,
             "Input indices should be vector but received shape: [2,2]"),  # S13
            ([3, 3], 0, [1.0], None, "Input indices should be vector but received shape: []"),
            ([3, 3], [0], 1.0, None, "Values cannot be 0-dimensional."),  # S14
            ([3, 3], [0, 1], [[0, 1, 1]], None, "Expected 2 non-empty input values, got 1"),  # S15
            ([2, 2, None], [0], [[1, 2]], [2, 2],
             "Shape mismatch: expected shape rank at least 3, got 2"),  # S16
            ([2, 2, None], [0], np.ones((1, 3, 2)), [2, 3, 2],
             "Shape mismatch: expected shape dim 1 to be 2, got 3"),  # S17
            ([2, 2, None], [0, 1], [[1, 2], [3, 4]], None,
             "Shape mismatch: expected values rank at least 3, got 2"),  # S18
            ([2, 2, None], [0], np.ones((1, 3, 2)), None,
             "Shape mismatch: expected values dim 1 to be 2, got 3"),  # S19
            ([3, 2], [0], [[1, 2]], [4, 2], "Shape mismatch: expected shape dim 0 to be 3, got 4"),
            ([3, 2], [0], [[1, 2]], [3], "Shape mismatch: expected shape rank at least 2, got 1"),
            ([3, 2], [0], [[1, 2]], [], "Shape mismatch: expected shape rank at least 2, got 0"),
            ([3, 1], [0, -1], [[5], [5]], None, "index of slice 1 is -1, which is negative"),  # docs/departures.md T6
            ([None, 1], [-3], [[5]], None, "index of slice 0 is -3, which is negative"),  # docs/departures.md T6
            # increasing indices are range-checked at their ends, others by reductions
            ([3, 1], [-2, 0, 1], [[5], [5], [5]], None, "index of slice 0 is -2, which is negative"),
            ([3, 1], [7, 0], [[5], [5]], None,
             "index of slice 0 exceeded limits of shape; index is 7 exceeded 3"),
        ],
    )  # fmt: skip
    @pytest.mark.parametrize("stale", [False, True])
    def test_malformed_gradients_are_refused_stale_or_not(
        self, shape, indices, values, gshape, message, stale
    ) -> None:  # S11-S23, S28; docs/departures.md T6, T7
        h = make(shape)
        if stale:
            raw.AccumulatorSetGlobalStep(handle=h, new_global_step=5)
        with pytest.raises(errors.InvalidArgumentError) as info:
            apply(h, indices, values, gshape, step=4 if stale else 0)
        assert message in str(info.value)
        assert num(h) == 0

    def test_longer_gradient_shape_is_accepted(self) -> None:  # S23
        h = make([3, 2])
        apply(h, [0], [[1, 2]], [3, 2, 5])
        assert num(h) == 1

    def test_stale_gradient_of_an_older_round_shape_is_dropped(
        self,
    ) -> None:  # S28; docs/departures.md T7
        h = make(None)
        apply(h, [0], [[1.0, 1.0]])
        take(h, 1)
        apply(h, [0], [[1.0, 1.0, 1.0]], step=1)
        apply(h, [0], [[9.0, 9.0]], step=0)  # stale: last round's values shape
        assert num(h) == 1
        check(take(h, 1), [0], [[1, 1, 1]], [-1, 3])

    def test_stale_valid_gradient_dropped_then_valid_accepted(self) -> None:  # S28
        h = make([3, 2])
        raw.AccumulatorSetGlobalStep(handle=h, new_global_step=5)
        apply(h, [0], [[7.0, 7.0]], step=4)
        apply(h, [0], [[1.0, 1.0]], step=5)
        assert num(h) == 1
        check(take(h, 1), [0], [[1, 1]], [3, 2])

    def test_round_values_rank_and_dims(self) -> None:  # S20
        h = make([2, 2, None])
        apply(h, [0], np.ones((1, 2, 2, 2)))
        with pytest.raises(
            errors.InvalidArgumentError, match="Shape mismatch: expected values rank 4, got 3"
        ):
            apply(h, [0], np.ones((1, 2, 2)))
        with pytest.raises(
            errors.InvalidArgumentError,
            match="Shape mismatch: expected values dim 3 to be 2, got 3",
        ):
            apply(h, [0], np.ones((1, 2, 2, 3)))
        assert num(h) == 1

    def test_wrong_values_dtype(self) -> None:  # X05
        h = make([3, 2])
        for step in (0, -1):
            with pytest.raises(errors.InvalidArgumentError) as info:
                apply(h, [0], [[1, 2]], step=step, dtype=np.int32)
            assert (
                "Signature mismatch, have: string_ref, int64, int64, int32, int64-> expected: "
                "string_ref, int64, int64, float, int64->" in str(info.value)
            )
        assert num(h) == 0

    def test_wrong_take_dtype(self) -> None:  # X07
        h = make([3, 2])
        apply(h, [0], [[1, 2]])
        with pytest.raises(errors.InvalidArgumentError, match="Signature mismatch"):
            take(h, 1, dtype=tfa.float64)
        assert num(h) == 1

    def test_num_required_must_be_positive(self) -> None:  # S33
        h = make([3, 1])
        apply(h, [0], [[1]])
        with pytest.raises(
            errors.InvalidArgumentError, match="Argument num_required must be positive, but was 0"
        ):
            take(h, 0)
        assert num(h) == 1

    def test_non_scalar_local_step(self) -> None:
        h = make([3, 1])
        with pytest.raises(errors.InvalidArgumentError, match="local_step must be scalar"):
            raw.SparseAccumulatorApplyGradient(
                handle=h, local_step=[0], gradient_indices=[0], gradient_values=[[1.0]],
                gradient_shape=[], has_known_shape=False,
            )  # fmt: skip
        assert num(h) == 0

    def test_has_known_shape_is_required(self) -> None:
        h = make([3, 1])
        with pytest.raises(TypeError, match="has_known_shape"):
            raw.SparseAccumulatorApplyGradient(  # type: ignore[call-arg]
                handle=h, local_step=0, gradient_indices=[0], gradient_values=[[1.0]],
                gradient_shape=[],
            )  # fmt: skip

    def test_python_numbers_infer_tensorflow_dtypes(self) -> None:
        h = make([3, 1])
        raw.SparseAccumulatorApplyGradient(
            handle=h, local_step=0, gradient_indices=[2, 0], gradient_values=[[1.5], [2.5]],
            gradient_shape=[3, 1], has_known_shape=True,
        )  # fmt: skip
        check(take(h, 1), [0, 2], [[2.5], [1.5]], [3, 1])


class TestKindsDoNotMix:
    def test_dense_ops_on_a_sparse_accumulator(self) -> None:  # X06; docs/departures.md T8, T14
        h = make([3, 1])
        apply(h, [0], [[1]])
        with pytest.raises(errors.InvalidArgumentError, match="needs a dense accumulator"):
            raw.AccumulatorTakeGradient(handle=h, num_required=1, dtype=F32)
        with pytest.raises(errors.InvalidArgumentError, match="needs a dense accumulator"):
            raw.ResourceAccumulatorApplyGradient(
                handle=h, local_step=0, gradient=np.ones((1, 1), np.float32)
            )
        assert num(h) == 1
        assert int(raw.ResourceAccumulatorNumAccumulated(handle=h)) == 1

    def test_sparse_ops_on_a_dense_accumulator(self) -> None:  # docs/departures.md T8
        h = raw.ConditionalAccumulator(dtype=F32, shape=[3, 1])
        raw.AccumulatorApplyGradient(handle=h, local_step=0, gradient=np.ones((3, 1), np.float32))
        with pytest.raises(errors.InvalidArgumentError, match="needs a sparse accumulator"):
            apply(h, [0], [[1]])
        with pytest.raises(errors.InvalidArgumentError, match="needs a sparse accumulator"):
            take(h, 1)
        assert num(h) == 1
        raw.AccumulatorApplyGradient(handle=h, local_step=0, gradient=np.ones((3, 1), np.float32))
        assert num(h) == 2  # the failed take neither consumed nor bumped the step

    def test_dense_and_sparse_cannot_share_a_name(self) -> None:  # S34; docs/departures.md T10
        raw.ConditionalAccumulator(dtype=F32, shape=[3, 1], shared_name="sparse-vs-dense")
        with pytest.raises(errors.InvalidArgumentError, match="already exists as a dense"):
            make([3, 1], shared_name="sparse-vs-dense")

    def test_destroy_works_on_sparse_handles(self) -> None:  # docs/departures.md T14
        h = make([3, 1])
        raw.DestroyResourceOp(resource=h, ignore_lookup_error=False)
        with pytest.raises(errors.NotFoundError):
            num(h)

    def test_sparse_constructors_share_by_name(self) -> None:
        a = make([3, 1], shared_name="sparse-shared")
        b = make([3, 1], shared_name="sparse-shared")
        apply(a, [0], [[1]])
        assert num(b) == 1


def _given_back_after(h, served, started, values):
    """Apply ``served``, take them, apply ``started``, then give the take back
    as a failing public call would (values[n]: the n-th gradient's, in the
    order served + started)."""
    from tf_accum.accumulators import interrupts

    for n, indices in enumerate(served):
        apply(h, indices, values[n], step=2**40)
    taken = interrupts.open_delivery()
    try:
        take(h, len(served))
        for n, indices in enumerate(started, start=len(served)):
            apply(h, indices, values[n], step=2**40)
    finally:
        interrupts.give_back(taken)


def _row_sums(gradients, values, groups, reduction):
    """{row: the sum of each group's sums (each group's gradients in order),
    divided by the count for a MEAN}."""
    out = {}
    for row in sorted({i for g in gradients for i in g}):
        sums, count = [], 0
        for group in groups:
            parts = [values[n][gradients[n].index(row)] for n in group if row in gradients[n]]
            count += len(parts)
            if parts:
                total = parts[0]
                for part in parts[1:]:
                    total = total + part
                sums.append(total)
        total = sums[0]
        for part in sums[1:]:
            total = total + part
        out[row] = total / np.float32(count) if reduction == "MEAN" and count > 1 else total
    return out


@pytest.mark.parametrize("reduction", ["MEAN", "SUM"])
@pytest.mark.parametrize(
    "shape", [[64, 3], [10**9, 3], [None, 3]], ids=["map", "no map", "unknown"]
)
def test_a_round_given_back_into_a_started_round_is_summed_with_it_row_by_row(
    reduction: str, shape: list[int | None], row_adds: str
) -> None:
    """A take's round given back (its call failed) after applies started a new
    round: each row is the new round's sum plus the given-back one's, in that
    order, counted over both, whatever order the rows arrived in."""
    h = make(shape, reduction_type=reduction)
    rng = np.random.default_rng(5)
    # rows in index order filling the buffer: the take hands the buffer itself
    # over, so the new round starts in a buffer of its own
    served = [[2, 7], [9, 11, 40]]
    started = [[40, 3, 2], [5, 3, 63, 9]]
    gradients = served + started
    values = [rng.standard_normal((len(g), 3)).astype(np.float32) for g in gradients]
    _given_back_after(h, served, started, values)
    # over Ray the give-back is a message to the host that its call does not wait for
    wait_until(lambda: num(h) == 4)
    result = take(h, 4)
    raw.DestroyResourceOp(resource=h)
    expected = _row_sums(gradients, values, [range(2, 4), range(2)], reduction)
    assert result.indices.tolist() == sorted(expected)
    np.testing.assert_array_equal(result.values, np.stack([expected[r] for r in sorted(expected)]))


@pytest.mark.parametrize("shape", [[64, 3], [None, 3]], ids=["map", "unknown"])
def test_a_round_whose_buffers_a_new_round_took_over_does_not_go_back(
    shape: list[int | None], row_adds: str
) -> None:
    """A take's round whose rows are gathered into its result leaves its
    buffers to the next round; once that round has started in them, the
    served rows are overwritten, and the round cannot go back: it is lost,
    and the new round's rows are its own."""
    h = make(shape, reduction_type="SUM")
    rng = np.random.default_rng(6)
    served = [[9, 2, 40, 7], [2, 11, 7]]  # out of index order: gathered
    started = [[40, 3, 2], [5, 3, 63, 9]]
    gradients = served + started
    values = [rng.standard_normal((len(g), 3)).astype(np.float32) for g in gradients]
    _given_back_after(h, served, started, values)
    assert num(h) == 2
    result = take(h, 2)
    raw.DestroyResourceOp(resource=h)
    expected = _row_sums(started, values[2:], [range(2)], "SUM")
    assert result.indices.tolist() == sorted(expected)
    np.testing.assert_array_equal(result.values, np.stack([expected[r] for r in sorted(expected)]))
