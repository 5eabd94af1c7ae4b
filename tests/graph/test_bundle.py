"""Small arrays of a request to a ps task's host travel in one buffer (tf_accum.graph.bundle)."""

from __future__ import annotations

import numpy as np

from tf_accum.graph.bundle import SMALL_ARRAY_BYTES, bundle_small_arrays, unbundle


def test_small_arrays_come_back_equal_in_dtype_shape_and_value() -> None:
    large = np.arange(SMALL_ARRAY_BYTES, dtype=np.float32)
    strided = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]  # not contiguous
    values = [
        7,  # a handle
        np.float32(1.5) * np.ones(3, np.float32),
        np.array(2**40),  # a 0-d local step
        np.array([True, False, True]),
        np.array([1 + 2j], np.complex64),
        strided,
        np.array(["a"], dtype=object),  # not numeric: stays as it is
        large,  # too large: stays as it is
        np.array([3], dtype=">i4"),  # another byte order
        None,
    ]
    originals = list(values)
    bundle = bundle_small_arrays(values)
    assert bundle is not None
    assert values[7] is large and values[6] is originals[6] and values[0] == 7
    assert values[1] is None and values[5] is None  # moved into the buffer
    back = unbundle(values, bundle)
    for got, want in zip(back, originals, strict=True):
        if isinstance(want, np.ndarray):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
        else:
            assert got == want
    assert not back[1].flags.writeable  # as Ray hands arrays over
    assert back[2].ndim == 0 and back[2].item() == 2**40


def test_fewer_than_two_small_arrays_are_left_alone() -> None:
    values = [np.ones(2, np.float32), np.zeros(SMALL_ARRAY_BYTES + 1, np.uint8), 3]
    assert bundle_small_arrays(values) is None
    assert values[0] is not None and values[0].tolist() == [1.0, 1.0]
