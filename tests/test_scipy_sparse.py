"""SciPy sparse matrices in (raw apply, apply_grad, apply_indexed_slices_grad) and out."""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import tf_accum as tfa
from tf_accum.accumulators import sparse_kernel

raw = tfa.raw_ops
SCA = tfa.compat.v1.SparseConditionalAccumulator

# rows 1 and 5 stored (row 5 twice at (5, 0): duplicates add up), row 7 an explicit zero
ROWS = np.array([5, 1, 5, 5, 7])
COLS = np.array([0, 2, 0, 3, 1])
DATA = np.array([1.0, 2.0, 3.0, 4.0, 0.0])
EXPECTED_INDICES = [1, 5, 7]
EXPECTED_VALUES = [[0, 0, 2, 0], [4, 0, 0, 4], [0, 0, 0, 0]]

FORMATS = {
    "coo_array": lambda d: sp.coo_array((d, (ROWS, COLS)), shape=(10, 4)),
    "coo_matrix": lambda d: sp.coo_matrix((d, (ROWS, COLS)), shape=(10, 4)),
    "csr_array": lambda d: sp.csr_array((d, (ROWS, COLS)), shape=(10, 4)),
    "csr_matrix": lambda d: sp.csr_matrix((d, (ROWS, COLS)), shape=(10, 4)),
    "csc_array": lambda d: sp.csc_array((d, (ROWS, COLS)), shape=(10, 4)),
    "csc_matrix": lambda d: sp.csc_matrix((d, (ROWS, COLS)), shape=(10, 4)),
}


def check(result, dtype) -> None:
    indices, values, shape = result
    np.testing.assert_array_equal(indices, EXPECTED_INDICES)
    assert indices.dtype == np.int64 and values.dtype == dtype
    np.testing.assert_array_equal(values, EXPECTED_VALUES)
    np.testing.assert_array_equal(shape, [10, 4])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_raw_apply_takes_stored_rows_and_keeps_the_dtype(fmt, dtype) -> None:
    tf_dtype = tfa.as_dtype(dtype)
    h = raw.SparseConditionalAccumulator(dtype=tf_dtype, shape=[10, 4])
    raw.SparseAccumulatorApplyGradient(
        handle=h, local_step=0, gradient_indices=None, gradient_values=FORMATS[fmt](DATA.astype(dtype)),
        gradient_shape=None, has_known_shape=True,
    )  # fmt: skip
    check(raw.SparseAccumulatorTakeGradient(handle=h, num_required=1, dtype=tf_dtype), dtype)


@pytest.mark.parametrize("fmt", FORMATS)
def test_class_apply_grad_and_indexed_slices_convert_the_dtype(fmt) -> None:
    acc = SCA(tfa.float32, shape=[10, 4])
    acc.apply_grad(None, FORMATS[fmt](DATA))  # float64 stored values convert
    acc.apply_indexed_slices_grad(FORMATS[fmt](DATA.astype(np.int64)), local_step=0)
    assert acc.num_accumulated() == 2
    check(acc.take_grad(2), np.float32)  # the mean of two equal gradients


def test_a_wrong_matrix_changes_nothing() -> None:
    h = raw.SparseConditionalAccumulator(dtype=tfa.float32, shape=[10, 4])
    matrix = FORMATS["csr_array"](DATA.astype(np.float32))

    def apply(**kw):
        args = dict(handle=h, local_step=0, gradient_indices=None, gradient_values=matrix,
                    gradient_shape=None, has_known_shape=True)  # fmt: skip
        raw.SparseAccumulatorApplyGradient(**{**args, **kw})

    with pytest.raises(tfa.errors.InvalidArgumentError, match="gradient_indices must be None"):
        apply(gradient_indices=[1, 5, 7])
    with pytest.raises(tfa.errors.InvalidArgumentError, match=r"is not the shape \[10, 4\]"):
        apply(gradient_shape=[12, 4])
    with pytest.raises(tfa.errors.InvalidArgumentError, match="Signature mismatch"):
        apply(gradient_values=FORMATS["csr_array"](DATA))  # float64
    tall = sp.csr_array(np.ones((12, 4), np.float32))
    with pytest.raises(tfa.errors.InvalidArgumentError, match="expected shape dim 0 to be 10"):
        apply(gradient_values=tall)
    with pytest.raises(tfa.errors.InvalidArgumentError, match="exceeded limits of shape"):
        apply(gradient_values=tall, has_known_shape=False)
    with pytest.raises(
        tfa.errors.InvalidArgumentError, match="expected shape dim 1 to be 4, got 3"
    ):
        apply(gradient_values=sp.csr_array(np.ones((10, 3), np.float32)))
    with pytest.raises(tfa.errors.InvalidArgumentError, match="must be 2-D"):
        apply(gradient_values=sp.coo_array(np.ones(4, np.float32)))
    acc = SCA(tfa.int32, shape=[10, 4])
    with pytest.raises(TypeError, match="Expected int32, but got 1.5"):
        acc.apply_grad(None, sp.csr_array(np.full((2, 4), 1.5)))
    assert raw.AccumulatorNumAccumulated(handle=h) == 0 and acc.num_accumulated() == 0
    apply(gradient_shape=[10, 4])  # the matrix's own shape is fine
    check(
        raw.SparseAccumulatorTakeGradient(handle=h, num_required=1, dtype=tfa.float32), np.float32
    )


def test_a_scipy_matrix_is_no_dense_gradient() -> None:
    acc = tfa.compat.v1.ConditionalAccumulator(tfa.float32, shape=[10, 4])
    with pytest.raises(TypeError, match="is a sparse gradient"):
        acc.apply_grad(FORMATS["csr_array"](DATA))
    assert acc.num_accumulated() == 0


@pytest.mark.usefixtures("quiet_background")  # tracemalloc sees every thread
def test_no_dense_copy_of_a_big_matrix() -> None:
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(10**6, size=6400), rng.integers(64, size=6400)
    matrix = sp.csr_array((rng.random(6400, np.float32), (rows, cols)), shape=(10**6, 64))
    acc = SCA(tfa.float32, shape=[10**6, 64])
    # compiling the optional loops (at the first large sparse gradient of the
    # process) allocates tens of megabytes: not the apply's own memory
    sparse_kernel.load()
    tracemalloc.start()
    try:
        acc.apply_grad(None, matrix)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    stored_rows = np.unique(matrix.tocoo().row).size
    assert peak < 3 * stored_rows * 64 * 4 + 64 * matrix.nnz  # nowhere near 256 MB
    # compared sparse: each dense copy would be 256 MB
    taken = acc.take_grad(1).to_scipy()
    assert taken.shape == matrix.shape and (taken != matrix).nnz == 0


def test_indexed_slices_round_trip() -> None:
    matrix = FORMATS["coo_array"](DATA)
    slices = tfa.IndexedSlices.from_scipy(matrix)
    np.testing.assert_array_equal(slices.indices, EXPECTED_INDICES)
    np.testing.assert_array_equal(slices.values, EXPECTED_VALUES)
    np.testing.assert_array_equal(slices.dense_shape, [10, 4])
    for fmt in ("csr", "csc", "coo"):
        back = slices.to_scipy(fmt)
        assert back.format == fmt and back.shape == (10, 4) and back.dtype == np.float64
        np.testing.assert_array_equal(back.toarray(), matrix.toarray())
    # the explicit-zero row 7 stays a stored row
    again = tfa.IndexedSlices.from_scipy(slices.to_scipy())
    np.testing.assert_array_equal(again.indices, EXPECTED_INDICES)
    with pytest.raises(TypeError, match="Expected a scipy.sparse matrix"):
        tfa.IndexedSlices.from_scipy(np.ones((2, 2)))
    with pytest.raises(ValueError, match="format must be one of"):
        slices.to_scipy("dok")
    with pytest.raises(ValueError, match="one 2-D row per index"):
        tfa.IndexedSlices(np.ones((2, 2, 2)), [0, 1], [4, 2, 2]).to_scipy()
    with pytest.raises(ValueError, match="one 2-D row per index"):
        tfa.IndexedSlices(np.ones((3, 2)), [0, 1], [4, 2]).to_scipy()
    with pytest.raises(ValueError, match=r"dense_shape is \[4, 2, 1\]"):
        tfa.IndexedSlices(np.ones((2, 2)), [0, 1], [4, 2, 1]).to_scipy()


def test_a_sparse_take_reads_as_a_scipy_matrix_of_the_dense_shape() -> None:
    acc = SCA(tfa.float32, shape=[6, 2])
    acc.apply_grad([4, 1], [[1.0, 2.0], [3.0, 4.0]])
    acc.apply_grad([4], [[3.0, 0.0]])
    take = acc.take_grad(2)
    matrix = take.to_scipy()
    assert matrix.format == "csr" and matrix.shape == (6, 2) and matrix.dtype == np.float32
    np.testing.assert_array_equal(
        matrix.toarray(), [[0, 0], [3, 4], [0, 0], [0, 0], [2, 1], [0, 0]]
    )
    unknown = SCA(tfa.float32, shape=None)  # dimension 0 unknown: up to the largest index
    unknown.apply_grad([2], [[1.0, 1.0]])
    slices = unknown.take_indexed_slices_grad(1)
    assert slices.to_scipy("coo").shape == (3, 2)


def test_the_manual_s_scipy_example_runs(capsys) -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "arrays.md").read_text()
    block = re.search(r"```python\n(import numpy as np\nimport scipy.*?)```", page, re.S)
    assert block is not None
    exec(compile(block.group(1), "docs/arrays.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[3 7] [0.  1.5]"
    assert out[1] == "(1000, 4) 8"
    assert out[2] == "[3 7]"


def test_graph_mode_builds_ops_from_a_scipy_matrix() -> None:
    v1 = tfa.compat.v1
    with v1.Graph().as_default():
        acc = v1.SparseConditionalAccumulator(tfa.float32, shape=[10, 4])
        ops = [
            acc.apply_grad(None, FORMATS["csr_matrix"](DATA)),
            acc.apply_indexed_slices_grad(FORMATS["coo_array"](DATA)),
        ]
        take = acc.take_grad(2)
        with v1.Session() as session:
            session.run(ops)
            result = session.run(take)
    check(result, np.float32)
    assert result.to_scipy().shape == (10, 4)
