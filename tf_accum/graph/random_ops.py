"""``random_normal``, ``truncated_normal`` and ``random_uniform``: the values
TensorFlow's kernels give for the same seeds, bit for bit (see ``philox``
and ``random_seed``).

Each function builds what TensorFlow builds: in a scope named after it, a
``shape`` constant, the random op (``RandomStandardNormal``,
``TruncatedNormal``, ``RandomUniform``, ``RandomUniformInt``) and the
scaling arithmetic. A random op's sequence belongs to the session running
it: each run continues where the session's previous run of that op stopped,
and a new session starts over.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType, as_dtype, float32, int32, int64
from tf_accum.graph import mode, philox
from tf_accum.graph.graph import Tensor, is_symbolic
from tf_accum.graph.math_ops import Converted, building_in, check_allowed, graph_of
from tf_accum.graph.op_building import convert_input, make_op
from tf_accum.graph.ops import as_tensor, constant
from tf_accum.graph.random_seed import eager_position, get_seed
from tf_accum.graph.tensor_shape import Dimension, TensorShape

Array = np.ndarray[Any, Any]
_FLOATS = ("float16", "bfloat16", "float32", "float64")
_SAMPLERS = {
    "RandomUniform": philox.uniform,
    "RandomStandardNormal": philox.normal,
    "TruncatedNormal": philox.truncated_normal,
}


class _Sequences:
    """Each session's sequence of one random op: its seeds (drawn from the
    system's entropy for an op without seeds, once per session, as each
    TensorFlow session's kernel draws its own) and where it has got to."""

    def __init__(self, seed: int, seed2: int) -> None:
        self._lock = threading.Lock()
        self._seeds = (seed, seed2)
        self._state: weakref.WeakKeyDictionary[Any, list[int]] = weakref.WeakKeyDictionary()

    def advance(self, session: Any, by: int) -> tuple[int, int, int]:
        """The key, the counter's upper half and the position for this run."""
        with self._lock:
            state = self._state.get(session)
            if state is None:
                state = self._state[session] = [*_seeds_or_entropy(*self._seeds), 0]
            key, counter_seed, position = state
            state[2] = position + by
            return key, counter_seed, position


def _seeds_or_entropy(seed: int, seed2: int) -> tuple[int, int]:
    if seed == 0 and seed2 == 0:
        # no seed at all: TensorFlow seeds such an op from the system's entropy
        return (
            int.from_bytes(os.urandom(8), "little"),
            int.from_bytes(os.urandom(8), "little"),
        )
    return seed, seed2


def _dims_of(array: Array, op_type: str) -> tuple[int, ...]:
    dims = [int(d) for d in np.asarray(array).reshape(-1)]
    if np.ndim(array) != 1 and np.size(array) != 0:
        raise errors.InvalidArgumentError(
            None, None, f"shape must be a vector of {{int32,int64}}, got shape {np.shape(array)}"
        )
    if any(d < 0 for d in dims):
        raise errors.InvalidArgumentError(None, None, f"Dimension {min(dims)} must be >= 0")
    return tuple(dims)


def _random_op(
    op_type: str,
    shape: Any,
    dtype: DType,
    seed: int | None,
    seed2: int | None,
    extra: Sequence[tuple[str, Any]] = (),
    name: str | None = None,
) -> Any:
    """The random op itself: ``shape`` (an int32/int64 input), the seeds as attributes."""
    shape_dtype = _dtype_of(shape)
    sequences = _Sequences(seed or 0, seed2 or 0)
    eager = mode.building_graph() is None

    def kernel(context: Any, arrays: list[Any]) -> Sequence[Any]:
        dims = _dims_of(np.asarray(arrays[0]), op_type)
        count = int(np.prod(dims)) if dims else 1
        advance = count * philox.RESERVED_PER_OUTPUT
        if eager:
            identity = (op_type, dtype.name, shape_dtype.name, seed or 0, seed2 or 0)
            key_seed, counter_seed = _seeds_or_entropy(seed or 0, seed2 or 0)
            position = eager_position(identity, advance) if (seed or seed2) else 0
        else:
            owner = getattr(context, "session", None) or kernel
            key_seed, counter_seed, position = sequences.advance(owner, advance)
        counter = philox.start_counter(counter_seed) + position
        if op_type == "RandomUniformInt":
            values = _uniform_int(key_seed, counter, count, dtype, arrays[1], arrays[2])
        else:
            sample = _SAMPLERS[op_type](key_seed, counter, count, np.dtype(dtype.numpy_dtype))
            values = sample.astype(dtype.numpy_dtype)
        return (values.reshape(dims),)

    def outputs(tensors: list[Tensor]) -> list[tuple[DType, TensorShape]]:
        return [(dtype, _static_shape_of(tensors[0]))]

    type_attr = "Tout" if op_type == "RandomUniformInt" else "dtype"
    attrs = {"seed": seed or 0, "seed2": seed2 or 0, type_attr: dtype, "T": shape_dtype}
    return make_op(op_type, name, [("shape", shape), *extra], kernel, outputs, attrs, effects=True)


def _uniform_int(key: int, counter: int, count: int, dtype: DType, low: Any, high: Any) -> Array:
    lo, hi = int(np.asarray(low)), int(np.asarray(high))
    if np.ndim(low) or np.ndim(high):
        raise errors.InvalidArgumentError(
            None, None, f"minval must be 0-D, got shape {list(np.shape(low))}"
        )
    if count and lo >= hi:
        raise errors.InvalidArgumentError(None, None, f"Need minval < maxval: {lo} >= {hi}")
    wide = dtype == int64
    per_group = 2 if wide else 4
    groups = -(-count // per_group)
    words = philox.philox_words(key, counter, np.arange(groups, dtype=np.uint64))
    if wide:
        bits = words[:, 0::2].astype(np.uint64) | (
            words[:, 1::2].astype(np.uint64) << np.uint64(32)
        )
    else:
        bits = words.astype(np.uint64)
    span = np.uint64((hi - lo) % 2**64)
    # the sum wraps, as TensorFlow adds in unsigned arithmetic
    out: Array = (np.uint64(lo % 2**64) + bits % span).reshape(-1)[:count]
    return out.astype(dtype.numpy_dtype)


def _dtype_of(value: Any) -> DType:
    return value.dtype if isinstance(value, Converted) else as_tensor(value).dtype


def _static_shape_of(shape: Tensor) -> TensorShape:
    if shape.op.type == "Const":
        return TensorShape([int(d) for d in np.asarray(shape.op.get_attr("value")).reshape(-1)])
    length = shape.shape.as_list()[0] if shape.shape.rank == 1 else None
    if length is not None:
        return TensorShape([None] * length)
    return TensorShape(None)


def shape_input(shape: Any) -> Any:
    """A shape argument as the int32 (int64 if needed) vector TensorFlow makes of it.

    Raises:
        TypeError: a dimension that is not an integer.
        ValueError: a partially known TensorShape.
    """
    if is_symbolic(shape):
        tensor = as_tensor(shape)
        if tensor.dtype not in (int32, int64):
            raise TypeError(
                f"Value passed to parameter 'shape' has DataType {tensor.dtype.name} not in list "
                "of allowed values: int32, int64"
            )
        return tensor
    if isinstance(shape, TensorShape):
        if not shape.is_fully_defined():
            raise ValueError(f"Cannot convert a partially known TensorShape {shape} to a Tensor.")
        dims = [int(d) for d in shape.as_list()]  # type: ignore[arg-type]
    elif isinstance(shape, (list, tuple)):
        dims = []
        for d in shape:
            d = d.value if isinstance(d, Dimension) else d
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
                raise TypeError(f"Expected int32, but got {d} of type '{type(d).__name__}'.")
            dims.append(int(d))
    else:
        array = np.asarray(shape)
        if array.dtype.kind not in "iu":
            raise TypeError(f"Expected int32, but got {shape} of type '{type(shape).__name__}'.")
        dims = [int(d) for d in array.reshape(-1)]
    wide = any(d >= 2**31 for d in dims)
    array = np.asarray(dims, np.int64 if wide else np.int32).reshape(-1)
    return Converted(array, int64 if wide else int32)


def _float_dtype(dtype: Any, op_type: str) -> DType:
    wanted = as_dtype(dtype)
    check_allowed(op_type, "dtype", wanted, _FLOATS)
    return wanted


def _scaled(
    function: str,
    op_type: str,
    shape: Any,
    mean: Any,
    stddev: Any,
    dtype: Any,
    seed: Any,
    name: str | None,
) -> Any:
    """``op * stddev + mean``, built as TensorFlow builds ``random_normal`` and
    ``truncated_normal``."""
    from tf_accum.graph.math_ops import add, multiply

    wanted = as_dtype(dtype)
    with building_in(graph_of([shape, mean, stddev])):
        graph = mode.building_graph()
        if graph is None:
            shape_value = shape_input(shape)
            seed1, seed2 = get_seed(seed)
            mean_array = np.asarray(_value_as(mean, wanted))
            stddev_array = np.asarray(_value_as(stddev, wanted))
            _float_dtype(wanted, op_type)
            sample = _random_op(op_type, shape_value, wanted, seed1, seed2)
            with np.errstate(all="ignore"):
                return np.asarray(sample * stddev_array + mean_array).astype(wanted.numpy_dtype)
        with graph.name_scope(name or function) as scope:
            shape_tensor = _shape_tensor(shape)
            mean_tensor = _tensor_of(mean, wanted, "mean")
            stddev_tensor = _tensor_of(stddev, wanted, "stddev")
            seed1, seed2 = get_seed(seed)
            _float_dtype(wanted, op_type)
            sample = _random_op(op_type, shape_tensor, wanted, seed1, seed2)
            product = multiply(sample, stddev_tensor, name="mul")
            return add(product, mean_tensor, name=scope)


def _shape_tensor(shape: Any) -> Tensor:
    value = shape_input(shape)
    if isinstance(value, Converted):
        made: Tensor = constant(value.array, dtype=value.dtype, name="shape")
        return made
    return as_tensor(value)


def _value_as(value: Any, dtype: DType) -> Any:

    converted = convert_input(value, dtype)
    return converted.array


def _tensor_of(value: Any, dtype: DType, name: str) -> Tensor:
    """``value`` as a tensor of ``dtype`` (a constant called ``name``), as
    TensorFlow converts it; a Tensor of another dtype is a ValueError."""
    converted = convert_input(value, dtype)
    if isinstance(converted, Converted):
        made: Tensor = constant(converted.array, dtype=dtype, name=name)
        return made
    tensor: Tensor = converted
    return tensor


def random_normal(
    shape: Any,
    mean: Any = 0.0,
    stddev: Any = 1.0,
    dtype: Any = float32,
    seed: Any = None,
    name: str | None = None,
) -> Any:
    """Normally distributed values of ``shape``: ``mean + stddev * N(0, 1)``.

    Raises:
        TypeError: a dtype that is not float16, bfloat16, float32 or float64,
            or a shape that is not integers.
    """
    return _scaled("random_normal", "RandomStandardNormal", shape, mean, stddev, dtype, seed, name)


def truncated_normal(
    shape: Any,
    mean: Any = 0.0,
    stddev: Any = 1.0,
    dtype: Any = float32,
    seed: Any = None,
    name: str | None = None,
) -> Any:
    """Normal values of ``shape`` within two standard deviations of ``mean``
    (values outside are drawn again); arguments and errors as :func:`random_normal`."""
    return _scaled("truncated_normal", "TruncatedNormal", shape, mean, stddev, dtype, seed, name)


def random_uniform(
    shape: Any,
    minval: Any = 0,
    maxval: Any = None,
    dtype: Any = float32,
    seed: Any = None,
    name: str | None = None,
) -> Any:
    """Uniform values of ``shape`` in ``[minval, maxval)`` (default ``[0, 1)``);
    int32 and int64 take ``minval + bits % (maxval - minval)`` as TensorFlow does.

    Raises:
        ValueError: a dtype other than float16, bfloat16, float32, float64,
            int32, int64; an integer dtype without ``maxval``.
        InvalidArgumentError: ``minval >= maxval`` for integers (when run).
    """
    from tf_accum.graph.math_ops import add, multiply

    wanted = as_dtype(dtype)
    if wanted.name not in (*_FLOATS, "int32", "int64"):
        raise ValueError(
            f"Argument `dtype` got invalid value {wanted!r}. Accepted dtypes are (tf.float16, "
            "tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64)."
        )
    if maxval is None:
        if wanted.is_integer:
            raise ValueError(f"Must specify maxval for integer dtype {wanted!r}")
        maxval = 1
    minval_is_zero = type(minval) is int and minval == 0
    maxval_is_one = type(maxval) is int and maxval == 1
    plain = minval_is_zero and maxval_is_one and not wanted.is_integer
    with building_in(graph_of([shape, minval, maxval])):
        graph = mode.building_graph()
        if graph is None:
            shape_value = shape_input(shape)
            low = np.asarray(_value_as(minval, wanted))
            high = np.asarray(_value_as(maxval, wanted))
            seed1, seed2 = get_seed(seed)
            if wanted.is_integer:
                pairs = [("minval", Converted(low, wanted)), ("maxval", Converted(high, wanted))]
                return _random_op("RandomUniformInt", shape_value, wanted, seed1, seed2, pairs)
            sample = _random_op("RandomUniform", shape_value, wanted, seed1, seed2)
            if plain:
                return sample
            with np.errstate(all="ignore"):
                if minval_is_zero:
                    return np.asarray(sample * high).astype(wanted.numpy_dtype)
                scaled = np.asarray(sample * (high - low)).astype(wanted.numpy_dtype)
                return np.asarray(scaled + low).astype(wanted.numpy_dtype)
        with graph.name_scope(name or "random_uniform") as scope:
            shape_tensor = _shape_tensor(shape)
            if not plain:
                low_t = _tensor_of(minval, wanted, "min")
                high_t = _tensor_of(maxval, wanted, "max")
            seed1, seed2 = get_seed(seed)
            if wanted.is_integer:
                tensors: list[tuple[str, Any]] = [("minval", low_t), ("maxval", high_t)]
                return _random_op(
                    "RandomUniformInt", shape_tensor, wanted, seed1, seed2, tensors, name=scope
                )
            sample = _random_op("RandomUniform", shape_tensor, wanted, seed1, seed2)
            if plain:
                return sample
            if minval_is_zero:
                return multiply(sample, high_t)
            return add(sample * (high_t - low_t), low_t, name=scope)


def _register_no_gradients() -> None:
    from tf_accum.graph.gradient_registry import is_registered, no_gradient

    for op_type in ("RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal"):
        if not is_registered(op_type):
            no_gradient(op_type)


_register_no_gradients()
