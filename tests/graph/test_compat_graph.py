"""The compat classes in graph mode (cases P01-P15): methods
build ops, arguments may be Tensors, Python-level checks fail at build time."""

from __future__ import annotations

import numpy as np
import pytest

import tf_accum as tfa
import tf_accum.compat.v1 as tf
from tests.graph.support import BOUNDED
from tf_accum import errors
from tf_accum.graph.fetches import IndexedSlicesValue

pytestmark = pytest.mark.usefixtures("graph")


def test_names_attributes_and_static_shapes() -> None:  # P01
    q = tf.ConditionalAccumulator(tf.float32, shape=[2], name="Q")
    q2 = tf.ConditionalAccumulator(tf.float32, shape=[2], name="Q")
    with tf.name_scope("outer"):
        q3 = tf.ConditionalAccumulator(tf.float32, shape=[2], name="Q")
    assert (q.name, q2.name, q3.name) == ("Q", "Q_1", "Q")
    assert q3.accumulator_ref.name == "outer/Q:0"
    assert isinstance(q.accumulator_ref, tf.Tensor) and q.accumulator_ref.dtype == tf.resource
    assert q.dtype == tf.float32
    assert q.num_accumulated().name == "Q_NumAccumulated:0"
    assert q2.num_accumulated().name == "Q_1_NumAccumulated:0"
    take = q.take_grad(1)
    assert take.shape == (2,) and take.get_shape().as_list() == [2]
    assert take.op.type == "ResourceAccumulatorTakeGradient"
    assert tf.ConditionalAccumulator(tf.float32).take_grad(1).shape.rank is None
    apply = q.apply_grad([1.0, 2.0])
    assert isinstance(apply, tf.Operation) and apply.name == "ResourceAccumulatorApplyGradient"
    step = q.set_global_step(1)
    assert isinstance(step, tf.Operation) and step.type == "ResourceAccumulatorSetGlobalStep"


def test_placeholders_everywhere_feed_dict_and_eval() -> None:  # 11.2 in the kernel-test style
    q = tf.ConditionalAccumulator(tf.float32, shape=[None, 3])
    grad = tf.placeholder(tf.float32, [None, 3])
    step = tf.placeholder(tf.int64, [])
    n = tf.placeholder(tf.int32, [])
    apply = q.apply_grad(grad, local_step=step)
    take = q.take_grad(n)
    num = q.num_accumulated()
    with tf.Session() as sess:
        apply.run(feed_dict={grad: np.ones((2, 3)), step: 0})
        sess.run(apply, {grad: 3 * np.ones((2, 3)), step: 0})
        assert num.eval() == 2
        got = sess.run(take, {n: 2}, options=BOUNDED)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, 2 * np.ones((2, 3)))
        assert num.eval() == 0


def test_static_shape_contradicting_the_declared_one_fails_at_build(graph) -> None:  # P02
    q = tf.ConditionalAccumulator(tf.float32, shape=[2])
    with pytest.raises(ValueError, match=r"^Shapes \(3,\) and \(2,\) are incompatible$"):
        q.apply_grad([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"^Shapes \(3,\) and \(2,\) are incompatible$"):
        q.apply_grad(tf.placeholder(tf.float32, [3]))
    with pytest.raises(ValueError, match=r"Shapes \(4, 2\) and \(None, 3\) are incompatible"):
        tf.ConditionalAccumulator(tf.float32, shape=[None, 3]).apply_grad(np.ones((4, 2)))
    # compatible partial and unknown static shapes build
    tf.ConditionalAccumulator(tf.float32, shape=[3, 2]).apply_grad(
        tf.placeholder(tf.float32, [None, 2])
    )
    loose = q.apply_grad(tf.placeholder(tf.float32))
    with (
        tf.Session() as sess,
        pytest.raises(
            errors.InvalidArgumentError, match=r"Shape mismatch: expected \[2\], got \[3\]"
        ),
    ):
        sess.run(loose, {loose.inputs[2]: [1, 2, 3]})


def test_a_gradient_tensor_of_another_dtype_fails_at_build() -> None:  # P03
    q = tf.ConditionalAccumulator(tf.float32, shape=[2])
    wrong = tf.constant([1.0, 2.0], tf.float64)
    with pytest.raises(ValueError) as caught:
        q.apply_grad(wrong)
    assert str(caught.value) == (
        "Tensor conversion requested dtype float32 for Tensor with dtype float64: "
        f"<tf.Tensor '{wrong.name}' shape=(2,) dtype=float64>"
    )


def test_python_and_numpy_gradients_are_converted() -> None:  # P04
    q = tf.ConditionalAccumulator(tf.float32)
    first = q.apply_grad(np.array([1, 2], np.int64))
    second = q.apply_grad([1, 2])
    assert first.inputs[2].dtype == second.inputs[2].dtype == tf.float32
    take = q.take_grad(2)
    with tf.Session() as sess:
        sess.run([first, second])
        got = sess.run(take, options=BOUNDED)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, [1, 2])


def test_strings_are_a_type_error() -> None:  # P05
    with pytest.raises(TypeError, match="Expected float32, but got a of type 'str'."):
        tf.ConditionalAccumulator(tf.float32).apply_grad(["a", "b"])


def test_invalid_reduction_type_is_a_value_error(graph) -> None:  # P06
    with pytest.raises(
        ValueError,
        match="Attr 'reduction_type' of 'ResourceConditionalAccumulator' Op passed string "
        '\'Invalid\' not in: "MEAN", "SUM".',
    ):
        tf.ConditionalAccumulator(tf.float32, reduction_type="Invalid")
    with pytest.raises(ValueError, match="'mean'"):
        tf.SparseConditionalAccumulator(tf.float32, reduction_type="mean")
    # the graph is still usable
    q = tf.ConditionalAccumulator(tf.float32, shape=[1])
    apply = q.apply_grad([1.0])
    with tf.Session() as sess:
        sess.run(apply)
        assert sess.run(q.num_accumulated()) == 1


def test_num_required_must_be_an_int32(graph) -> None:  # P07
    q = tf.ConditionalAccumulator(tf.float32, shape=[2])
    with pytest.raises(
        TypeError,
        match=r"^Expected int32 passed to parameter 'num_required' of op "
        r"'ResourceAccumulatorTakeGradient', got 1.0 of type 'float' instead. Error: Expected "
        r"int32, but got 1.0 of type 'float'.$",
    ):
        q.take_grad(1.0)
    with pytest.raises(
        TypeError,
        match="Input 'num_required' of 'ResourceAccumulatorTakeGradient' Op has type int64 that "
        "does not match expected type of int32.",
    ):
        q.take_grad(tf.constant(1, tf.int64))
    with pytest.raises(TypeError, match="'SparseAccumulatorTakeGradient'"):
        tf.SparseConditionalAccumulator(tf.float32).take_grad(2.0)


def test_static_rank_of_step_and_count(graph) -> None:  # shape functions
    q = tf.ConditionalAccumulator(tf.float32, shape=[2])
    with pytest.raises(ValueError, match="^Shape must be rank 0 but is rank 1 for '{{node "):
        q.apply_grad([1.0, 2.0], local_step=tf.placeholder(tf.int64, [1]))
    with pytest.raises(ValueError, match="Shape must be rank 0 but is rank 1"):
        q.take_grad(tf.placeholder(tf.int32, [2]))
    with pytest.raises(ValueError, match="Shape must be rank 0 but is rank 2"):
        q.set_global_step(tf.placeholder(tf.int64, [1, 1]))
    with pytest.raises(ValueError, match="Shape must be rank 0 but is rank 1"):
        tf.SparseConditionalAccumulator(tf.float32).apply_grad(
            [0], [[1.0]], local_step=tf.constant([0], tf.int64)
        )


def test_negative_dimension_is_refused() -> None:  # P08
    with pytest.raises(
        ValueError, match="Error converting shape to a TensorShape: Dimension -1 must be >= 0."
    ):
        tf.ConditionalAccumulator(tf.float32, shape=[-1, 2])


def test_steps_truncate_toward_zero() -> None:  # P09
    q = tf.ConditionalAccumulator(tf.float32, shape=[2])
    step = tf.placeholder(tf.float32, [])
    set_step = q.set_global_step(step)
    apply = q.apply_grad([1, 1], local_step=step)
    assert set_step.inputs[1].op.type == "Cast" and set_step.inputs[1].dtype == tf.int64
    num = q.num_accumulated()
    with tf.Session() as sess:
        sess.run(set_step, {step: 1.9})
        sess.run(apply, {step: 1.7})
        assert sess.run(num) == 1
        sess.run(set_step, {step: -1.0})
        sess.run(apply, {step: -1.7})
        assert sess.run(num) == 2


def test_string_step_fails_when_run() -> None:  # E15
    q = tf.ConditionalAccumulator(tf.float32, shape=[2])
    apply = q.apply_grad([1, 1], local_step=tf.constant("1"))
    with tf.Session() as sess:
        with pytest.raises(
            errors.UnimplementedError, match="Cast string to int64 is not supported"
        ):
            sess.run(apply)
        assert sess.run(q.num_accumulated()) == 0


def test_dtype_given_as_a_string_compares_equal() -> None:  # P10; docs/departures.md T13
    q = tf.ConditionalAccumulator("float32")
    assert q.dtype == "float32" and q.dtype == tf.float32


def test_integer_class_accumulator_runs() -> None:  # docs/departures.md T1
    q = tf.ConditionalAccumulator(tf.int64, shape=[2], reduction_type="SUM")
    apply = q.apply_grad([2**40, -1])
    take = q.take_grad(2)
    with tf.Session() as sess:
        sess.run(apply)
        sess.run(apply)
        got = sess.run(take, options=BOUNDED)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, [2**41, -2])


def test_sparse_class_take_returns_the_named_tuple() -> None:  # P11
    q = tf.SparseConditionalAccumulator(tf.float32, shape=[3, 2], name="S")
    assert q.name == "S" and q.num_accumulated().name == "S_NumAccumulated:0"
    # the sparse class counts and sets the step through the ref ops (11.3)
    assert q.num_accumulated().op.type == "AccumulatorNumAccumulated"
    assert q.set_global_step(1).type == "AccumulatorSetGlobalStep"
    first = q.apply_grad([0, 2], [[1, 1], [2, 2]], [3, 2])
    second = q.apply_indexed_slices_grad(tf.IndexedSlices(values=[[3.0, 3.0]], indices=[1]))
    take = q.take_grad(1)
    assert take._fields == ("indices", "values", "shape")
    assert all(isinstance(t, tf.Tensor) for t in take)
    with tf.Session() as sess:
        sess.run([first, second])
        result = sess.run(take, options=BOUNDED)
        assert type(result) is type(take)
        np.testing.assert_array_equal(result.indices, [0, 1, 2])
        np.testing.assert_array_equal(result.values, [[1, 1], [3, 3], [2, 2]])
        np.testing.assert_array_equal(result.shape, [3, 2])


def test_take_indexed_slices_grad_runs_to_values() -> None:  # P12
    q = tf.SparseConditionalAccumulator(tf.float32, shape=[3, 2])
    apply = q.apply_grad([1], [[3, 3]], [3, 2])
    slices = q.take_indexed_slices_grad(1)
    assert isinstance(slices, tf.IndexedSlices)
    assert all(isinstance(t, tf.Tensor) for t in slices)
    with tf.Session() as sess:
        sess.run(apply)
        value = sess.run(slices, options=BOUNDED)
        assert type(value) is IndexedSlicesValue  # as TensorFlow, not an IndexedSlices
        np.testing.assert_array_equal(value.values, [[3, 3]])
        np.testing.assert_array_equal(value.indices, [1])
        np.testing.assert_array_equal(value.dense_shape, [3, 2])


def test_has_known_shape_follows_grad_shape() -> None:  # P13, P14
    q = tf.SparseConditionalAccumulator(tf.float32, shape=[3, 2])
    unknown = q.apply_grad([0], [[1.0, 1.0]])
    empty = q.apply_grad([0], [[1.0, 1.0]], grad_shape=[])
    slices = q.apply_indexed_slices_grad(tf.IndexedSlices(values=[[1.0, 1.0]], indices=[0]))
    assert unknown.name == "SparseAccumulatorApplyGradient"
    assert [op.get_attr("has_known_shape") for op in (unknown, empty, slices)] == [
        False,
        True,
        False,
    ]
    with tf.Session() as sess:
        with pytest.raises(
            errors.InvalidArgumentError, match="expected shape rank at least 2, got 0"
        ):
            sess.run(empty)
        sess.run(unknown)
        assert sess.run(q.num_accumulated()) == 1


def test_sparse_arguments_may_be_tensors_of_other_integer_types() -> None:  # P15
    q = tf.SparseConditionalAccumulator(tf.float32, shape=[3, 2])
    indices = tf.placeholder(tf.int32, [None])
    shape = tf.placeholder(tf.int32, [2])
    values = tf.placeholder(tf.float32, [None, 2])
    from_tensors = q.apply_grad(indices, values, shape)
    from_floats = q.apply_grad([1.7], [[4.0, 4.0]], [3, 2])
    take = q.take_grad(2)
    with tf.Session() as sess:
        sess.run(
            from_tensors, {indices: [0, 1, 2], values: [[1, 1], [6, 6], [2, 2]], shape: [3, 2]}
        )
        sess.run(from_floats)
        result = sess.run(take, options=BOUNDED)
        np.testing.assert_array_equal(result.indices, [0, 1, 2])
        np.testing.assert_array_equal(result.values, [[1, 1], [5, 5], [2, 2]])
        np.testing.assert_array_equal(result.shape, [3, 2])


def test_sparse_values_are_converted_to_the_dtype() -> None:  # X05; docs/departures.md T12
    q = tf.SparseConditionalAccumulator(tf.float32, shape=[3, 2])
    apply = q.apply_grad([0], [[1, 2]])
    assert apply.inputs[3].dtype == tf.float32
    with pytest.raises(ValueError, match="requested dtype float32 for Tensor with dtype int32"):
        q.apply_grad([0], tf.constant([[1, 2]]))


def test_class_close_builds_a_destroy_op() -> None:  # docs/departures.md T3
    q = tf.ConditionalAccumulator(tf.float32, shape=[1], shared_name="closing")
    close = q.close()
    assert isinstance(close, tf.Operation) and close.type == "DestroyResourceOp"
    apply = q.apply_grad([1.0])
    with tf.Session() as sess:
        sess.run(apply)
        sess.run(close)
        with pytest.raises(errors.NotFoundError):
            sess.run(apply)
        sess.run(close)  # harmless twice


def test_base_class_wraps_a_handle_tensor() -> None:
    handle = tfa.raw_ops.ResourceConditionalAccumulator(dtype=tf.float32, shape=[2], name="raw")
    base = tf.ConditionalAccumulatorBase(tf.float32, [2], handle)
    assert base.accumulator_ref is handle and base.name == "raw"
    apply = tfa.raw_ops.ResourceAccumulatorApplyGradient(
        handle=handle, local_step=3, gradient=[1.0, 1.0]
    )
    with tf.Session() as sess:
        sess.run(base.set_global_step(4))
        sess.run(apply)  # stale
        assert sess.run(base.num_accumulated()) == 0
