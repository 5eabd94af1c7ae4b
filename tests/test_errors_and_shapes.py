"""tf_accum.errors mirrors TensorFlow's classes and codes; shape parsing and text."""

from __future__ import annotations

import pickle

import pytest

from tf_accum import errors
from tf_accum.shapes import is_compatible, kernel_text, parse_attr_shape, parse_tensor_shape

CODES = {
    "CancelledError": 1, "UnknownError": 2, "InvalidArgumentError": 3,
    "DeadlineExceededError": 4, "NotFoundError": 5, "AlreadyExistsError": 6,
    "PermissionDeniedError": 7, "ResourceExhaustedError": 8, "FailedPreconditionError": 9,
    "AbortedError": 10, "OutOfRangeError": 11, "UnimplementedError": 12, "InternalError": 13,
    "UnavailableError": 14, "DataLossError": 15, "UnauthenticatedError": 16,
}  # fmt: skip


@pytest.mark.parametrize(("name", "code"), CODES.items())
def test_error_classes(name, code) -> None:
    cls = getattr(errors, name)
    error = cls(None, None, "what went wrong")
    assert isinstance(error, errors.OpError)
    assert error.error_code == code and error.message == "what went wrong"
    assert str(error) == "what went wrong"
    assert error.node_def is None and error.op is None
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and copy.message == "what went wrong"


def test_op_error_base() -> None:
    error = errors.OpError(None, None, "m", errors.INTERNAL)
    assert error.error_code == 13
    assert pickle.loads(pickle.dumps(error)).error_code == 13


@pytest.mark.parametrize(
    ("given", "parsed", "text"),
    [
        (None, None, "<unknown>"),
        ([], (), "[]"),
        ([2, 3], (2, 3), "[2,3]"),
        ([None, 3], (None, 3), "[?,3]"),
        ([-1, 3], (None, 3), "[?,3]"),
        ((4,), (4,), "[4]"),
    ],
)
def test_attr_shapes(given, parsed, text) -> None:
    assert parse_attr_shape(given) == parsed
    assert kernel_text(parse_attr_shape(given)) == text


def test_tensor_shape_rejects_minus_one() -> None:
    with pytest.raises(ValueError, match="Dimension -1 must be >= 0"):
        parse_tensor_shape([-1])
    assert parse_tensor_shape([None, 2]) == (None, 2)


def test_shapes_not_a_sequence() -> None:
    with pytest.raises(TypeError):
        parse_attr_shape("2,3")
    with pytest.raises(TypeError):
        parse_attr_shape([1.5])


def test_compatibility() -> None:
    assert is_compatible(None, (1, 2, 3))
    assert is_compatible((None, 3), (7, 3))
    assert not is_compatible((None, 3), (7, 4))
    assert not is_compatible((2,), (2, 1))
    assert is_compatible((), ())
