"""Rows of a sparse gradient or take as a SciPy sparse array.

Below the accumulators, which give their sparse takes a ``to_scipy``, and
:class:`tf_accum.indexed_slices.IndexedSlices`; SciPy is imported on first use.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SCIPY_FORMATS = ("csr", "csc", "coo")


def rows_to_scipy(indices: Any, values: Any, dense_shape: Any, format: str = "csr") -> Any:
    """Rows ``values[i]`` at row ``indices[i]`` as a SciPy sparse array of ``dense_shape``.

    Every element of every given row is stored (zeros included), so the stored
    rows are exactly ``indices``; duplicate indices add up. scipy is imported
    here, on first use.

    Args:
        indices: integer vector.
        values: 2-D array, one row per index.
        dense_shape: the 2-D dense shape; a dimension 0 of -1 or None (unknown,
            as a sparse take reports an undeclared one) becomes the largest
            index plus one.
        format: "csr", "csc" or "coo".

    Returns:
        A ``scipy.sparse.csr_array`` (or csc/coo) of the values' dtype.

    Raises:
        ValueError: values that are not 2-D, an unknown dimension 1, a format
            SciPy has no name for here, or rows that do not match indices.
        ImportError: SciPy is not installed (the ``scipy`` extra).
    """
    if format not in SCIPY_FORMATS:
        raise ValueError(f"format must be one of {SCIPY_FORMATS}, got {format!r}")
    index = np.asarray(indices, np.int64)
    rows = np.asarray(values)
    if rows.ndim != 2 or index.ndim != 1 or rows.shape[0] != index.shape[0]:
        raise ValueError(
            f"A SciPy matrix needs one 2-D row per index: got indices of shape "
            f"{index.shape} and values of shape {rows.shape}"
        )
    given = [None, None] if dense_shape is None else list(dense_shape)
    if len(given) != 2:
        raise ValueError(f"A SciPy matrix is 2-D, but dense_shape is {given}")
    shape = [None if d is None or d == -1 else int(d) for d in given]
    if shape[1] is None:
        shape[1] = rows.shape[1]
    if shape[0] is None:
        shape[0] = int(index.max()) + 1 if index.size else 0
    import scipy.sparse

    width = rows.shape[1]
    coo = scipy.sparse.coo_array(
        (rows.ravel(), (np.repeat(index, width), np.tile(np.arange(width), index.size))),
        shape=tuple(shape),
    )
    return coo.asformat(format)
