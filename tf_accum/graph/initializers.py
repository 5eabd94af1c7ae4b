"""TensorFlow 1's initializers (``tf.zeros_initializer`` ... ``glorot_uniform_initializer``):
objects called with a shape and dtype that build the initial value.

The random ones call ``random_normal``, ``truncated_normal`` and
``random_uniform`` with their seed, so with seeds set they give TensorFlow's
values bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tf_accum.dtypes import DType, as_dtype, float32
from tf_accum.graph import random_ops
from tf_accum.graph.fill_ops import ones, zeros
from tf_accum.graph.ops import constant


def _float_dtype(dtype: Any) -> DType:
    wanted = as_dtype(dtype)
    if not wanted.is_floating:
        raise ValueError(f"Argument `dtype` is expected to be floating point. Received: {wanted}.")
    return wanted


def _dims(shape: Any) -> list[int]:
    if hasattr(shape, "as_list"):
        shape = shape.as_list()
    if isinstance(shape, (int, np.integer)):
        return [int(shape)]
    return [int(d) for d in shape]


class Initializer:
    """The base of initializers: ``initializer(shape, dtype=None, partition_info=None)``."""

    dtype: DType = float32

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Initializer:
        return cls(**config)


class zeros_initializer(Initializer):  # noqa: N801 - TensorFlow's name
    """Zeros of the requested shape and dtype (default float32)."""

    def __init__(self, dtype: Any = float32) -> None:
        self.dtype = as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
        return zeros(_dims(shape), as_dtype(dtype or self.dtype))

    def get_config(self) -> dict[str, Any]:
        return {"dtype": self.dtype.name}


class ones_initializer(Initializer):  # noqa: N801 - TensorFlow's name
    """Ones of the requested shape and dtype (default float32)."""

    def __init__(self, dtype: Any = float32) -> None:
        self.dtype = as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
        return ones(_dims(shape), as_dtype(dtype or self.dtype))

    def get_config(self) -> dict[str, Any]:
        return {"dtype": self.dtype.name}


class constant_initializer(Initializer):  # noqa: N801 - TensorFlow's name
    """``value`` (a number, broadcast; or a list of exactly the shape's size,
    reshaped) in the requested dtype.

    Raises:
        TypeError: a value that is not numbers, or a list of another size.
    """

    def __init__(self, value: Any = 0, dtype: Any = float32, verify_shape: bool = False) -> None:
        if not np.isscalar(value) and not isinstance(value, (list, tuple, np.ndarray)):
            raise TypeError(
                "Invalid type for initial value: "
                f"{type(value).__name__} (expected Python scalar, list or tuple of values, or "
                "numpy.ndarray)."
            )
        self.value = value
        self.dtype = as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
        return constant(self.value, dtype=as_dtype(dtype or self.dtype), shape=_dims(shape))

    def get_config(self) -> dict[str, Any]:
        return {"value": self.value, "dtype": self.dtype.name}


class random_normal_initializer(Initializer):  # noqa: N801 - TensorFlow's name
    """``random_normal(shape, mean, stddev, dtype, seed)``."""

    def __init__(
        self, mean: Any = 0.0, stddev: Any = 1.0, seed: Any = None, dtype: Any = float32
    ) -> None:
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
        wanted = _float_dtype(dtype or self.dtype)
        return random_ops.random_normal(shape, self.mean, self.stddev, wanted, seed=self.seed)

    def get_config(self) -> dict[str, Any]:
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed,
                "dtype": self.dtype.name}  # fmt: skip


class truncated_normal_initializer(random_normal_initializer):  # noqa: N801
    """``truncated_normal(shape, mean, stddev, dtype, seed)``: normal values
    within two standard deviations."""

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
        wanted = _float_dtype(dtype or self.dtype)
        return random_ops.truncated_normal(shape, self.mean, self.stddev, wanted, seed=self.seed)


class random_uniform_initializer(Initializer):  # noqa: N801 - TensorFlow's name
    """``random_uniform(shape, minval, maxval, dtype, seed)`` (integers too)."""

    def __init__(
        self, minval: Any = 0, maxval: Any = None, seed: Any = None, dtype: Any = float32
    ) -> None:
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
        wanted = as_dtype(dtype or self.dtype)
        return random_ops.random_uniform(shape, self.minval, self.maxval, wanted, seed=self.seed)

    def get_config(self) -> dict[str, Any]:
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed,
                "dtype": self.dtype.name}  # fmt: skip


def _fans(shape: list[int]) -> tuple[float, float]:
    if not shape:
        return 1.0, 1.0
    if len(shape) == 1:
        return float(shape[0]), float(shape[0])
    if len(shape) == 2:
        return float(shape[0]), float(shape[1])
    receptive = float(np.prod(shape[:-2]))
    return shape[-2] * receptive, shape[-1] * receptive


class variance_scaling_initializer(Initializer):  # noqa: N801 - TensorFlow's name
    """Values whose variance is ``scale`` divided by the fan (``mode``: inputs,
    outputs or their mean); ``distribution`` ``"truncated_normal"`` (also
    ``"normal"``), ``"untruncated_normal"`` or ``"uniform"``.

    Raises:
        ValueError: a scale that is not positive, an unknown mode or
            distribution, or a dtype that is not floating point.
    """

    def __init__(
        self,
        scale: float = 1.0,
        mode: str = "fan_in",
        distribution: str = "truncated_normal",
        seed: Any = None,
        dtype: Any = float32,
    ) -> None:
        if scale <= 0.0:
            raise ValueError(f"Argument `scale` must be a positive float. Received: {scale}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(
                f"Argument `mode` should be one of ('fan_in', 'fan_out', 'fan_avg'). Received: "
                f"{mode}"
            )
        distribution = distribution.lower()
        if distribution not in ("normal", "uniform", "truncated_normal", "untruncated_normal"):
            raise ValueError(
                "Argument `distribution` should be one of ('normal', uniform', "
                f"'truncated_normal', 'untruncated_normal'). Received: {distribution}"
            )
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Any:
        wanted = _float_dtype(dtype or self.dtype)
        fan_in, fan_out = _fans(_dims(shape))
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}
        scale = self.scale / max(1.0, fan[self.mode])
        if self.distribution in ("normal", "truncated_normal"):
            # the standard deviation of a unit normal truncated at two deviations
            stddev = math.sqrt(scale) / 0.87962566103423978
            return random_ops.truncated_normal(shape, 0.0, stddev, wanted, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_ops.random_normal(shape, 0.0, math.sqrt(scale), wanted, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_ops.random_uniform(shape, -limit, limit, wanted, seed=self.seed)

    def get_config(self) -> dict[str, Any]:
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
                "seed": self.seed, "dtype": self.dtype.name}  # fmt: skip


class glorot_uniform_initializer(variance_scaling_initializer):  # noqa: N801
    """Uniform in ``±sqrt(6 / (fan_in + fan_out))``: get_variable's default."""

    def __init__(self, seed: Any = None, dtype: Any = float32) -> None:
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "dtype": self.dtype.name}


class glorot_normal_initializer(variance_scaling_initializer):  # noqa: N801
    """Truncated normal with variance ``2 / (fan_in + fan_out)``."""

    def __init__(self, seed: Any = None, dtype: Any = float32) -> None:
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "dtype": self.dtype.name}


def he_normal(seed: Any = None) -> variance_scaling_initializer:
    """Truncated normal with variance ``2 / fan_in``."""
    return variance_scaling_initializer(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed: Any = None) -> variance_scaling_initializer:
    """Uniform in ``±sqrt(6 / fan_in)``."""
    return variance_scaling_initializer(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed: Any = None) -> variance_scaling_initializer:
    """Truncated normal with variance ``1 / fan_in``."""
    return variance_scaling_initializer(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed: Any = None) -> variance_scaling_initializer:
    """Uniform in ``±sqrt(3 / fan_in)``."""
    return variance_scaling_initializer(1.0, "fan_in", "uniform", seed)
