"""The graph machinery accumulator programs use (issue 7): Graph, Tensor,
Operation, the plumbing ops, shapes, dtypes, errors, and eager mode outside graphs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tf_accum as tfa
import tf_accum.compat.v1 as tf
from tests.helpers import Background
from tf_accum import errors

ROOT = Path(__file__).resolve().parents[2]


def test_graph_defaults_nest_per_thread() -> None:
    outer, inner = tf.Graph(), tf.Graph()
    assert tf.executing_eagerly()
    with outer.as_default() as entered:
        assert entered is outer and tf.get_default_graph() is outer
        assert not tf.executing_eagerly()
        with inner.as_default():
            assert tf.get_default_graph() is inner
            # another thread is not inside this block: eager there
            assert Background(tf.executing_eagerly).result() is True
            assert Background(tf.get_default_graph).result() is not inner
        assert tf.get_default_graph() is outer
    assert tf.executing_eagerly()


def test_reset_default_graph() -> None:
    before = tf.get_default_graph()
    tf.reset_default_graph()
    after = tf.get_default_graph()
    assert after is not before and after.get_operations() == []
    with tf.Graph().as_default(), pytest.raises(AssertionError, match="nested graphs"):
        tf.reset_default_graph()


def test_finding_ops_and_tensors(graph) -> None:
    c = tf.constant([1.0, 2.0], name="c")
    assert graph.get_operation_by_name("c") is c.op
    assert graph.get_tensor_by_name("c:0") is c
    assert c.op in graph.get_operations()
    with pytest.raises(KeyError, match="The name 'nope' refers to an Operation not in the graph."):
        graph.get_operation_by_name("nope")
    with pytest.raises(KeyError, match="exists but only has 1 outputs"):
        graph.get_tensor_by_name("c:5")
    with pytest.raises(ValueError, match="refers to an Operation, not a Tensor"):
        graph.get_tensor_by_name("c")
    with pytest.raises(KeyError, match="The operation, 'x', does not exist in the graph."):
        graph.get_tensor_by_name("x:0")
    with pytest.raises(TypeError, match="Tensor names are strings"):
        graph.get_tensor_by_name(3)


def test_tensor_and_operation_attributes(graph) -> None:
    c = tf.constant([[1, 2, 3]], tf.float64, name="c")
    op = c.op
    assert (op.name, op.type, op.inputs, op.outputs, op.graph) == ("c", "Const", (), (c,), graph)
    assert (c.name, c.op, c.dtype, c.graph, c.value_index) == ("c:0", op, tf.float64, graph, 0)
    assert c.shape == (1, 3) and c.get_shape().as_list() == [1, 3]
    assert isinstance(c.shape, tf.TensorShape)
    assert repr(c) == "<tf.Tensor 'c:0' shape=(1, 3) dtype=float64>"
    assert str(c) == 'Tensor("c:0", shape=(1, 3), dtype=float64)'
    assert repr(op) == "<tf.Operation 'c' type=Const>"
    i = tf.identity(c, name="i")
    assert i.op.inputs == (c,) and i.op.type == "Identity" and i.shape == (1, 3)
    assert {c: 1}[c] == 1  # tensors are hashable by identity
    with pytest.raises(TypeError, match="as a Python `bool` is not allowed"):
        bool(c)
    with pytest.raises(NotImplementedError, match="Cannot convert a symbolic tf.Tensor"):
        np.asarray(c)


def test_name_scopes(graph) -> None:
    c = tf.constant(1.0, name="c")
    with tf.name_scope("outer"):
        i = tf.identity(c)
        with tf.name_scope("inner") as scope:
            assert scope == "outer/inner/"
            n = tf.no_op()
    with tf.name_scope("outer"):
        j = tf.identity(c, name="j")
    assert (i.name, n.name, j.name) == ("outer/Identity:0", "outer/inner/NoOp", "outer_1/j:0")
    assert tf.identity(c).name == "Identity:0"  # scopes do not share names with the top
    with pytest.raises(ValueError, match="is not a valid node name"):
        tf.no_op(name="bad name!")


def test_unique_names(graph) -> None:
    names = [tf.constant(1.0, name="x").op.name for _ in range(3)]
    assert names == ["x", "x_1", "x_2"]


def test_control_dependencies_and_group(graph) -> None:
    c = tf.constant(1.0)
    a = tf.no_op(name="a")
    n = tf.no_op(name="n")
    with tf.control_dependencies([a]):
        b = tf.identity(c)
        with tf.control_dependencies(None):
            d = tf.identity(c)
        with tf.control_dependencies([n]):
            e = tf.identity(c)
    assert b.op.control_inputs == (a,)
    assert d.op.control_inputs == ()
    assert e.op.control_inputs == (a, n)
    grp = tf.group(a, [n, b], name="together")
    assert (grp.name, grp.type, grp.outputs) == ("together", "NoOp", ())
    assert grp.control_inputs == (a, n, b.op)
    assert tf.group().control_inputs == ()


def test_control_dependencies_order_a_run(graph) -> None:
    v = tf.Variable(0, name="v")
    first = v.assign(10)
    with tf.control_dependencies([first]):
        second = v.assign_add(5)
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(second) == 15
        assert sess.run(v) == 15


def test_constant_and_convert_to_tensor(graph) -> None:
    assert tf.constant(1.5).dtype == tf.float32
    assert tf.constant(1).dtype == tf.int32
    assert tf.constant([1, 2], tf.int64).dtype == tf.int64
    filled = tf.constant(7.0, shape=[2, 2])
    t = tf.convert_to_tensor([1, 2])
    assert (t.dtype, t.op.type) == (tf.int32, "Const")
    assert tf.convert_to_tensor(1.5, dtype=tf.float64).dtype == tf.float64
    assert tf.convert_to_tensor(t) is t
    with pytest.raises(ValueError, match="requested dtype int64 for Tensor with dtype int32"):
        tf.convert_to_tensor(t, dtype=tf.int64)
    with pytest.raises(TypeError):
        tf.constant([1.5, 2.5], tf.int32)
    with tf.Session() as sess:
        assert sess.run(filled).tolist() == [[7, 7], [7, 7]]
        value = sess.run(t)
        value[0] = 99  # a fetched array is the caller's own
        assert sess.run(t).tolist() == [1, 2]


def test_add_and_cast(graph) -> None:
    c = tf.constant([1.5, -2.5])
    total = tf.add(c, 1.0)
    both = c + c
    ints = tf.cast(c, tf.int64)
    assert total.dtype == tf.float32 and total.shape == (2,)
    # TensorFlow's names: tf.add builds "Add", the + operator "add" (unique regardless of case)
    assert (total.op.name, both.op.name, total.op.type) == ("Add", "add_1", "AddV2")
    assert ints.dtype == tf.int64 and ints.op.type == "Cast"
    with pytest.raises(TypeError, match="does not match type float32"):
        tf.add(c, tf.constant([1, 2]))
    with tf.Session() as sess:
        assert sess.run(total).tolist() == [2.5, -1.5]
        assert sess.run(both).tolist() == [3, -5]
        assert sess.run(ints).tolist() == [1, -2]


def test_placeholder_builds_only_in_graphs() -> None:
    with pytest.raises(RuntimeError, match="not compatible with eager execution"):
        tf.placeholder(tf.float32)
    with tf.Graph().as_default():
        p = tf.placeholder(tf.float32, [None, 3], name="p")
        assert (p.op.type, p.dtype, p.shape.as_list()) == ("Placeholder", tf.float32, [None, 3])
        assert p.op.get_attr("dtype") == tf.float32


def test_finalize(graph) -> None:
    c = tf.constant(1.0)
    graph.finalize()
    assert graph.finalized
    with pytest.raises(RuntimeError, match="Graph is finalized and cannot be modified."):
        tf.constant(2.0)
    with pytest.raises(RuntimeError, match="finalized"):
        tf.ConditionalAccumulator(tf.float32)
    with tf.Session() as sess:  # running is still fine
        assert sess.run(c) == 1.0
    graph.switch_to_thread_local()  # accepted


def test_ops_from_another_graph_are_refused(graph) -> None:
    with tf.Graph().as_default():
        foreign = tf.constant(1.0)
    with pytest.raises(ValueError, match="must be from the same graph"):
        tf.identity(foreign)


def test_building_in_many_threads_gives_unique_names(graph) -> None:
    def build() -> list[str]:
        with graph.as_default():
            return [tf.no_op(name="w").name for _ in range(50)]

    names = [n for task in [Background(build) for _ in range(4)] for n in task.result()]
    assert len(set(names)) == 200


def test_tensor_shape_and_dimension() -> None:
    s = tf.TensorShape([None, 3])
    assert s.as_list() == [None, 3] and s.rank == 2 and s[1] == 3 and s[0] is None
    assert repr(s) == "TensorShape([None, 3])" and str(s) == "(None, 3)"
    assert s.is_compatible_with([4, 3]) and not s.is_compatible_with([4, 4])
    assert tf.TensorShape(None).rank is None
    assert tf.TensorShape([2, 3]).num_elements() == 6
    assert tf.TensorShape([2]).merge_with([None]) == tf.TensorShape([2])
    with pytest.raises(ValueError, match=r"Shapes \(2,\) and \(3,\) are not compatible"):
        tf.TensorShape([2]).merge_with([3])
    assert tf.Dimension(3).value == 3 and tf.Dimension(None).value is None
    assert tf.Dimension(3) == 3 and (tf.Dimension(None) == 3) is None
    with pytest.raises(ValueError, match="Dimension -1 must be >= 0"):
        tf.Dimension(-1)


def test_dtypes_errors_and_indexed_slices_are_exported() -> None:
    assert tf.float32 is tfa.float32 and tf.dtypes.float16 is tfa.float16
    assert tf.as_dtype("float64") == tf.float64 and tf.float32.as_numpy_dtype == np.float32
    assert tf.errors is errors and tf.errors.OpError is errors.OpError
    assert issubclass(tf.errors.DeadlineExceededError, tf.errors.OpError)
    slices = tf.IndexedSlices(values=[[1.0]], indices=[0], dense_shape=[2, 1])
    assert slices.dense_shape == [2, 1] and slices.indices == [0]
    assert tf.sparse.SparseConditionalAccumulator is tf.SparseConditionalAccumulator


def test_eager_mode_is_untouched_after_a_graph_block() -> None:
    with tf.Graph().as_default():
        built = tfa.raw_ops.ResourceConditionalAccumulator(dtype=tf.float32, shape=[1])
        assert isinstance(built, tf.Tensor)
    assert tf.executing_eagerly()
    handle = tfa.raw_ops.ResourceConditionalAccumulator(dtype=tf.float32, shape=[1])
    assert isinstance(handle, int)
    assert (
        tfa.raw_ops.ResourceAccumulatorApplyGradient(
            handle=handle, local_step=0, gradient=np.float32([2])
        )
        is None
    )
    assert tfa.raw_ops.ResourceAccumulatorNumAccumulated(handle=handle) == 1
    q = tf.ConditionalAccumulator(tf.float32, shape=[1])
    assert q.apply_grad([3.0]) is None
    assert q.take_grad(1).tolist() == [3.0]
    assert tf.constant(1.5) == np.float32(1.5)
    assert tf.group() is None and tf.no_op() is None
    v = tf.Variable(2.0)
    assert v.assign_add(1.0) == 3.0 and v.numpy() == 3.0
    tfa.raw_ops.DestroyResourceOp(resource=handle)


SCRIPT = """
import numpy as np
import tf_accum.compat.v1 as tf

tf.disable_eager_execution()
assert not tf.executing_eagerly()
q = tf.ConditionalAccumulator(tf.float32, shape=[2], name="Q")
grad = tf.placeholder(tf.float32, [2])
apply = q.apply_grad(grad, local_step=tf.train.get_or_create_global_step())
take = q.take_grad(2)
assert tf.get_default_graph().get_operation_by_name("Q") is q.accumulator_ref.op
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    apply.run({grad: [1, 2]})
    sess.run(apply, feed_dict={grad: [3, 4]})
    print(q.num_accumulated().eval(), take.eval().tolist())
tf.enable_eager_execution()
assert tf.executing_eagerly()
print(tf.ConditionalAccumulator(tf.float32, shape=[1]).apply_grad([1.0]))
"""


def test_disable_eager_execution_in_a_process_of_its_own() -> None:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["2 [2.0, 3.0]", "None"]
