"""The dense accumulator in graph mode (behaviour.md 1-9; cases D01-D52):
raw ops built with placeholders, run by a Session, in TensorFlow's kernel-test style."""

from __future__ import annotations

import numpy as np
import pytest

import tf_accum.compat.v1 as tf
from tests.graph.support import BOUNDED, DenseOps, raw
from tf_accum import errors
from tf_accum.dtypes import ACCUMULATOR_DTYPES

pytestmark = pytest.mark.usefixtures("graph")


@pytest.fixture(params=["Resource", ""], ids=["resource", "ref"])
def prefix(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_fresh_accumulator_counts_zero_as_int32(prefix: str) -> None:  # D01
    acc = DenseOps(prefix)
    with tf.Session() as sess:
        n = acc.count(sess)
        assert n == 0 and n.dtype == np.int32 and np.ndim(n) == 0


def test_mean_of_two_then_counter_resets(prefix: str) -> None:  # D02
    acc = DenseOps(prefix)
    with tf.Session() as sess:
        acc.put(sess, [1, 2])
        acc.put(sess, [3, 4])
        assert acc.count(sess) == 2
        got = acc.get(sess, 2)
        assert got.dtype == np.float32 and got.shape == (2,)
        np.testing.assert_array_equal(got, [2, 3])
        assert acc.count(sess) == 0


def test_take_takes_everything_accumulated() -> None:  # D03
    acc = DenseOps()
    with tf.Session() as sess:
        for value in ([1, 2], [3, 4], [5, 6]):
            acc.put(sess, value)
        np.testing.assert_array_equal(acc.get(sess, 1), [3, 4])


def test_sum_reduction() -> None:  # D04
    acc = DenseOps(reduction_type="SUM")
    with tf.Session() as sess:
        for value in ([1, 2], [10, 20], [100, 200]):
            acc.put(sess, value)
        np.testing.assert_array_equal(acc.get(sess, 3), [111, 222])


def test_staleness_rule_is_local_step_at_least_global_step() -> None:  # D05
    acc = DenseOps()
    with tf.Session() as sess:
        acc.set(sess, 5)
        counts = []
        for step in (4, 5, 100):
            acc.put(sess, [1, 1], step)
            counts.append(int(acc.count(sess)))
        assert counts == [0, 1, 2]


def test_take_increments_global_step() -> None:  # D06
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        acc.put(sess, [1], 0)
        np.testing.assert_array_equal(acc.get(sess, 1), [1])
        acc.put(sess, [1], 0)
        assert acc.count(sess) == 0
        acc.put(sess, [1], 1)
        assert acc.count(sess) == 1


def test_negative_step_on_fresh_accumulator_is_dropped() -> None:  # D07
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        acc.put(sess, [1], -1)
        assert acc.count(sess) == 0


def test_raising_the_step_keeps_accumulated_gradients() -> None:  # D08
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        acc.put(sess, [1], 0)
        acc.set(sess, 100)
        np.testing.assert_array_equal(acc.get(sess, 1), [1])
        acc.put(sess, [1], 100)
        assert acc.count(sess) == 0
        acc.put(sess, [1], 101)
        assert acc.count(sess) == 1


def test_lowering_the_step_is_applied() -> None:  # D09
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        acc.set(sess, 10)
        acc.put(sess, [1], 10)
        acc.get(sess, 1)
        acc.set(sess, 3)
        acc.put(sess, [1], 3)
        assert acc.count(sess) == 1


@pytest.mark.parametrize(
    ("declared", "value", "message"),
    [
        ([2], np.ones(3), "Shape mismatch: expected [2], got [3]"),  # D10
        ([2], 1.0, "Shape mismatch: expected [2], got []"),  # D11
        ([], [1.0], "Shape mismatch: expected [], got [1]"),  # D12
        ([None, 3], np.ones((2, 2)), "Shape mismatch: expected [?,3], got [2,2]"),  # D13
    ],
)
def test_gradient_against_declared_shape(declared, value, message) -> None:
    acc = DenseOps(shape=declared)
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError) as caught:
            acc.put(sess, value)
        assert message in caught.value.message
        assert caught.value.op is acc.apply
        assert acc.count(sess) == 0


@pytest.mark.parametrize(
    ("declared", "first", "second", "message"),
    [
        ([None, 3], (2, 3), (4, 3), "Shape mismatch: expected [2,3], got [4,3]"),  # D14
        ([None, 3], (2, 3), (4, 4), "Shape mismatch: expected [2,3], got [4,4]"),  # D15
        (None, (2, 2), (4,), "Shape mismatch: expected [2,2], got [4]"),  # D17
    ],
)
def test_gradient_against_the_rounds_first(declared, first, second, message) -> None:
    acc = DenseOps(shape=declared)
    with tf.Session() as sess:
        acc.put(sess, np.ones(first))
        with pytest.raises(errors.InvalidArgumentError, match=message.replace("[", r"\[")):
            acc.put(sess, np.ones(second))
        assert acc.count(sess) == 1
        np.testing.assert_array_equal(acc.get(sess, 1), np.ones(first))


def test_a_take_frees_the_partial_dimension() -> None:  # D16
    acc = DenseOps(shape=[None, 3])
    with tf.Session() as sess:
        acc.put(sess, np.ones((2, 3)))
        acc.get(sess, 1)
        acc.put(sess, 2 * np.ones((4, 3)), 1)
        np.testing.assert_array_equal(acc.get(sess, 1), 2 * np.ones((4, 3)))


def test_unknown_rank_takes_any_shape_after_a_take() -> None:  # D18
    acc = DenseOps(shape=None)
    with tf.Session() as sess:
        acc.put(sess, np.ones((2, 2)))
        acc.get(sess, 1)
        acc.put(sess, 7.0, 1)
        got = acc.get(sess, 1)
        assert got == 7.0 and got.dtype == np.float32 and np.ndim(got) == 0


def test_stale_gradient_is_still_checked_against_the_declared_shape() -> None:  # D19, T7
    acc = DenseOps()
    with tf.Session() as sess:
        acc.set(sess, 5)
        with pytest.raises(errors.InvalidArgumentError, match=r"expected \[2\], got \[7\]"):
            acc.put(sess, np.ones(7), 4)
        acc.put(sess, [1, 1], 4)  # stale and well-formed: dropped silently
        assert acc.count(sess) == 0


def test_empty_gradients_count() -> None:  # D20
    acc = DenseOps(shape=None)
    with tf.Session() as sess:
        acc.put(sess, np.zeros(0))
        acc.put(sess, np.zeros(0))
        assert acc.count(sess) == 2
        got = acc.get(sess, 2)
        assert got.shape == (0,) and got.dtype == np.float32


@pytest.mark.parametrize("n", [0, -1])
def test_num_required_must_be_positive(n: int) -> None:  # D21, D22
    acc = DenseOps(shape=[1])
    with tf.Session() as sess:
        acc.put(sess, [1])
        with pytest.raises(
            errors.InvalidArgumentError,
            match=f"Argument num_required must be positive, but was {n}",
        ):
            acc.get(sess, n)
        assert acc.count(sess) == 1


@pytest.mark.parametrize(
    ("dtype", "values", "expected"),
    [
        (tf.float16, [[0.1, 60000, 1e-7]] * 3, [0.09991455078125, np.inf, 1.1920928955078125e-07]),
        (tf.float64, [[1], [1], [2]], [4 / 3]),  # D33
        (tf.float32, [[1], [0], [0]], [np.float32(1) / np.float32(3)]),  # D34
        (tf.float32, [[np.nan, np.inf], [1, -np.inf]], [np.nan, np.nan]),  # D35
        (tf.int32, [[7], [0]], [3]),  # T1: integer MEAN truncates
    ],
)
def test_mean_arithmetic_stays_in_the_dtype(dtype, values, expected) -> None:  # D31-D35
    acc = DenseOps(dtype=dtype, shape=None)
    with tf.Session() as sess:
        for value in values:
            acc.put(sess, np.asarray(value, dtype.as_numpy_dtype))
        got = acc.get(sess, len(values))
        assert got.dtype == dtype.as_numpy_dtype
        np.testing.assert_array_equal(got, np.asarray(expected, dtype.as_numpy_dtype))


def test_float16_sum_overflows_to_inf() -> None:  # D32
    acc = DenseOps(dtype=tf.float16, shape=[1], reduction_type="SUM")
    with tf.Session() as sess:
        acc.put(sess, np.float16([60000]))
        acc.put(sess, np.float16([60000]))
        got = acc.get(sess, 2)
        assert got.dtype == np.float16 and np.isposinf(got[0])


def test_integer_accumulator_runs_in_a_session() -> None:  # D36, D51, T1
    with tf.Graph().as_default():
        bad = DenseOps(dtype=tf.int32)
        good = DenseOps()
        with tf.Session() as sess:
            assert good.count(sess) == 0
            bad.put(sess, np.int32([7, -7]))
            bad.put(sess, np.int32([0, 0]))
            got = bad.get(sess, 2)
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, [3, -3])


@pytest.mark.parametrize("dtype", [tf.bool, tf.string])
def test_dtype_outside_the_list_fails_at_build(graph, dtype) -> None:  # D37
    before = len(graph.get_operations())
    with pytest.raises(TypeError, match=f"has DataType {dtype.name} not in list of allowed values"):
        raw.ResourceConditionalAccumulator(dtype=dtype, shape=[2])
    assert len(graph.get_operations()) == before


def test_non_scalar_local_step_is_refused_and_nothing_applied() -> None:  # D38, T8
    acc = DenseOps()
    with tf.Session() as sess:
        with pytest.raises(
            errors.InvalidArgumentError,
            match=r"Argument local_step must be scalar, but had bad shape \[1\]",
        ):
            acc.put(sess, [1, 1], [0])
        assert acc.count(sess) == 0


def test_non_scalar_new_global_step_is_refused_and_nothing_set() -> None:  # D39, T9
    acc = DenseOps()
    with tf.Session() as sess:
        with pytest.raises(
            errors.InvalidArgumentError,
            match=r"Argument new_global_step must be scalar, but had bad shape \[1\]",
        ):
            acc.set(sess, [3])
        acc.put(sess, [1, 1], 2)
        assert acc.count(sess) == 1


def test_non_scalar_num_required_is_refused() -> None:  # X04, X08, T8
    acc = DenseOps()
    with tf.Session() as sess:
        with pytest.raises(
            errors.InvalidArgumentError,
            match=r"Argument num_required must be scalar, but had bad shape \[1\]",
        ):
            acc.get(sess, [1])
        acc.put(sess, [1, 1])  # the failed take is not left queued
        assert acc.count(sess) == 1


@pytest.mark.parametrize("stale", [True, False])
def test_gradient_of_another_dtype_is_a_signature_mismatch(stale: bool) -> None:  # D40, X01
    acc = DenseOps()
    grad = tf.placeholder(tf.float64)
    step = tf.placeholder(tf.int64)
    apply = raw.ResourceAccumulatorApplyGradient(handle=acc.handle, local_step=step, gradient=grad)
    with tf.Session() as sess:
        if stale:
            acc.set(sess, 5)
        with pytest.raises(
            errors.InvalidArgumentError,
            match=r"Signature mismatch, have: resource, int64, double-> expected: resource, "
            r"int64, float->",
        ):
            sess.run(apply, {grad: [1.0, 2.0], step: 0 if stale else 5})
        assert acc.count(sess) == 0


def test_take_of_another_dtype_is_refused_and_consumes_nothing() -> None:  # X02, T8
    acc = DenseOps()
    wrong = raw.ResourceAccumulatorTakeGradient(handle=acc.handle, num_required=1, dtype=tf.float64)
    with tf.Session() as sess:
        acc.put(sess, [1, 1])
        with pytest.raises(errors.InvalidArgumentError, match="Signature mismatch"):
            sess.run(wrong, options=BOUNDED)
        assert acc.count(sess) == 1


def test_shared_name_shares_within_a_session() -> None:  # D41 (same attributes)
    a = DenseOps(shared_name="x")
    b = DenseOps(shared_name="x")
    with tf.Session() as sess:
        a.put(sess, [1, 1])
        b.put(sess, [3, 3])
        assert b.count(sess) == 2
        np.testing.assert_array_equal(b.get(sess, 1), [2, 2])
        assert a.count(sess) == 0


def test_shared_name_with_other_attributes_is_an_error_at_run() -> None:  # D41, D52, T10
    a = DenseOps(shared_name="x")
    b = DenseOps(shared_name="x", shape=[3], reduction_type="SUM")
    c = DenseOps(shared_name="x", dtype=tf.float64)
    with tf.Session() as sess:
        a.put(sess, [1, 1])
        for other in (b, c):
            with pytest.raises(errors.InvalidArgumentError, match="x"):
                other.count(sess)
        assert a.count(sess) == 1


def test_ref_and_resource_constructors_share_a_name() -> None:  # D42
    ref = DenseOps("", shared_name="x")
    res = DenseOps("Resource", shared_name="x")
    with tf.Session() as sess:
        ref.put(sess, [1, 1])
        assert res.count(sess) == 1


def test_container_scopes_the_shared_name() -> None:  # D43
    a = DenseOps(shared_name="x", container="c1")
    b = DenseOps(shared_name="x", container="c2")
    with tf.Session() as sess:
        a.put(sess, [1, 1])
        assert (a.count(sess), b.count(sess)) == (1, 0)


def test_unshared_accumulators_are_distinct() -> None:  # D44
    a = DenseOps()
    b = DenseOps()
    with tf.Session() as sess:
        a.put(sess, [1, 1])
        assert (a.count(sess), b.count(sess)) == (1, 0)


def test_a_constructor_op_makes_its_accumulator_once_per_session() -> None:  # 4.1
    acc = DenseOps()
    with tf.Session() as sess:
        first = sess.run(acc.handle)
        acc.put(sess, [1, 1])
        assert sess.run(acc.handle) == first
        assert acc.count(sess) == 1


def test_destroy_then_use_is_not_found() -> None:  # D47, D50
    acc = DenseOps(shared_name="x")
    destroy = raw.DestroyResourceOp(resource=acc.handle, ignore_lookup_error=False)
    destroy_quietly = raw.DestroyResourceOp(resource=acc.handle, ignore_lookup_error=True)
    assert destroy.type == "DestroyResourceOp" and destroy.outputs == ()
    with tf.Session() as sess:
        acc.put(sess, [1, 1])
        assert sess.run(destroy) is None
        with pytest.raises(errors.NotFoundError, match="Resource localhost/x/"):
            acc.count(sess)
        with pytest.raises(errors.NotFoundError, match="does not exist"):
            sess.run(destroy)
        sess.run(destroy_quietly)
        # D50: running the same constructor op again does not make a new one
        sess.run(acc.handle)
        with pytest.raises(errors.NotFoundError):
            acc.count(sess)


def test_global_step_wraps_around() -> None:  # D48
    acc = DenseOps(shape=[1])
    top = np.iinfo(np.int64).max
    with tf.Session() as sess:
        acc.set(sess, top)
        acc.put(sess, [1], top)
        acc.get(sess, 1)
        acc.put(sess, [1], -5)
        assert acc.count(sess) == 1


def test_static_rank_of_local_step_is_checked_at_build(graph) -> None:  # D49
    handle = raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[2])
    before = len(graph.get_operations())
    with pytest.raises(ValueError) as caught:
        raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=[0, 1], gradient=[1.0, 2.0])
    assert str(caught.value).startswith(
        "Shape must be rank 0 but is rank 1 for '{{node ResourceAccumulatorApplyGradient}} = "
        "ResourceAccumulatorApplyGradient"
    )
    assert "ResourceAccumulatorApplyGradient/local_step" in str(caught.value)
    # as in TensorFlow, the failed node's input constants stay and its name is used up;
    # the graph is still usable
    assert [op.name for op in graph.get_operations()][before:] == [
        "ResourceAccumulatorApplyGradient/local_step",
        "ResourceAccumulatorApplyGradient/gradient",
    ]
    apply = raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=0, gradient=[1.0, 2.0])
    assert apply.name == "ResourceAccumulatorApplyGradient_1"
    num = raw.ResourceAccumulatorNumAccumulated(handle=handle)
    with tf.Session() as sess:
        sess.run(apply)
        assert sess.run(num) == 1


@pytest.mark.parametrize("arg", ["new_global_step", "num_required"])
def test_static_rank_of_step_and_count_is_checked_at_build(arg: str) -> None:  # 2: shape fns
    handle = raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[2])
    vector = tf.placeholder(tf.int64 if arg == "new_global_step" else tf.int32, [1])
    with pytest.raises(ValueError, match="Shape must be rank 0 but is rank 1"):
        if arg == "new_global_step":
            raw.ResourceAccumulatorSetGlobalStep(handle=handle, new_global_step=vector)
        else:
            raw.ResourceAccumulatorTakeGradient(
                handle=handle, num_required=vector, dtype=tf.float32
            )


def test_integer_inputs_have_fixed_dtypes_at_build() -> None:  # 2: op-level dtypes
    handle = raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[2])
    with pytest.raises(
        TypeError,
        match="Input 'num_required' of 'ResourceAccumulatorTakeGradient' Op has type int64 that "
        "does not match expected type of int32.",
    ):
        raw.ResourceAccumulatorTakeGradient(
            handle=handle, num_required=tf.constant(1, tf.int64), dtype=tf.float32
        )
    with pytest.raises(TypeError, match="Expected int64 passed to parameter 'local_step'"):
        raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=0.5, gradient=[1.0, 2.0])


def test_raw_ops_stay_keyword_only_in_graph_mode() -> None:  # E17
    handle = raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[2])
    with pytest.raises(TypeError, match="only takes keyword args"):
        raw.ResourceAccumulatorApplyGradient(handle, 0, [1.0, 2.0])
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'shape'"):
        raw.ResourceConditionalAccumulator(dtype=tf.float32)


def test_raw_ops_build_nodes_with_constants() -> None:  # 11.4
    handle = raw.ResourceConditionalAccumulator(dtype=tf.float32, shape=[2], name="acc")
    apply = raw.ResourceAccumulatorApplyGradient(handle=handle, local_step=0, gradient=[1.0, 3.0])
    take = raw.ResourceAccumulatorTakeGradient(handle=handle, num_required=1, dtype=tf.float32)
    num = raw.ResourceAccumulatorNumAccumulated(handle=handle)
    assert isinstance(apply, tf.Operation) and apply.type == "ResourceAccumulatorApplyGradient"
    assert [t.dtype for t in apply.inputs] == [tf.resource, tf.int64, tf.float32]
    assert apply.inputs[0] is handle and handle.op.name == "acc"
    assert isinstance(take, tf.Tensor) and take.dtype == tf.float32
    assert num.dtype == tf.int32 and num.shape.rank == 0
    with tf.Session() as sess:
        assert sess.run(num) == 0  # nothing ran at build time
        apply.run()  # op.run() in the session made default by `with`
        assert num.eval() == 1
        np.testing.assert_array_equal(sess.run(take, options=BOUNDED), [1, 3])


@pytest.mark.parametrize("dtype", ACCUMULATOR_DTYPES, ids=lambda t: t.name)
def test_every_documented_dtype_runs_in_a_session(dtype) -> None:  # 3, T1
    dense = tf.ConditionalAccumulator(dtype, shape=[2], reduction_type="SUM")
    sparse = tf.SparseConditionalAccumulator(dtype, shape=[3, 2])
    grad = tf.placeholder(dtype, [2])
    apply_dense = dense.apply_grad(grad)
    apply_sparse = sparse.apply_grad([1], [[1, 2]])
    take_dense = dense.take_grad(2)
    take_sparse = sparse.take_grad(1)
    with tf.Session() as sess:
        sess.run(apply_dense, {grad: [1, 2]})
        sess.run(apply_dense, {grad: [3, 4]})
        sess.run(apply_sparse)
        got, result = sess.run([take_dense, take_sparse], options=BOUNDED)
        assert got.dtype == dtype.numpy_dtype and result.values.dtype == dtype.numpy_dtype
        assert got.tolist() == [4, 6]
        assert result.indices.tolist() == [1] and result.values.tolist() == [[1, 2]]


def test_signature_is_checked_before_the_step_and_count() -> None:  # 5.1.2, 8.1
    acc = DenseOps()
    grad = tf.placeholder(tf.float64)
    step = tf.placeholder(tf.int64)
    apply = raw.ResourceAccumulatorApplyGradient(handle=acc.handle, local_step=step, gradient=grad)
    n = tf.placeholder(tf.int32)
    take = raw.ResourceAccumulatorTakeGradient(handle=acc.handle, num_required=n, dtype=tf.float64)
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="Signature mismatch"):
            sess.run(apply, {grad: [1.0, 2.0], step: [0]})
        with pytest.raises(errors.InvalidArgumentError, match="Signature mismatch"):
            sess.run(take, {n: 0}, options=BOUNDED)
