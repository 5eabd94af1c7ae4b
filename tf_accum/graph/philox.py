"""TensorFlow's stateful random numbers, bit for bit: the Philox-4x32-10
counter-based generator and the transforms TensorFlow's CPU kernels apply to
its output (uniform from the mantissa bits, normal by Box-Muller, truncated
normal by rejection).

A generator is a 64-bit key (an op's ``seed``) and a 128-bit counter whose
upper half is an op's ``seed2``. Each counter value gives four 32-bit words.
Outputs are made in groups (four floats or float16s, two float64s); group
``g`` starts at the counter plus ``g`` (plus ``256 * g`` for truncated
normals, whose groups use as many words as rejection takes), so the values do
not depend on how the work is split. Every run of a random op moves its
counter on by 256 per output element, as TensorFlow's kernels reserve it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

_MULTIPLIERS = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))
_KEY_STEPS = (0x9E3779B9, 0xBB67AE85)
_LOW = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)
_MASK64 = (1 << 64) - 1
# How far a truncated normal's group moves the counter, as TensorFlow reserves it.
RESERVED_PER_OUTPUT = 256


def philox_words(key: int, counter: int, offsets: Array) -> Array:
    """The four words Philox-4x32-10 gives for each counter ``counter + offsets[i]``
    under ``key``: an array of shape ``[len(offsets), 4]``, uint32."""
    offsets = np.asarray(offsets, np.uint64)
    low = np.uint64(counter & _MASK64) + offsets  # wraps, as the 128-bit add does
    carry = (low < offsets).astype(np.uint64)
    high = np.uint64((counter >> 64) & _MASK64) + carry
    c = [low & _LOW, low >> _SHIFT, high & _LOW, high >> _SHIFT]
    k0, k1 = key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF
    for round_index in range(10):
        if round_index:
            k0 = (k0 + _KEY_STEPS[0]) & 0xFFFFFFFF
            k1 = (k1 + _KEY_STEPS[1]) & 0xFFFFFFFF
        product0 = _MULTIPLIERS[0] * c[0]
        product1 = _MULTIPLIERS[1] * c[2]
        c = [
            (product1 >> _SHIFT) ^ c[1] ^ np.uint64(k0),
            product1 & _LOW,
            (product0 >> _SHIFT) ^ c[3] ^ np.uint64(k1),
            product0 & _LOW,
        ]
    return np.stack(c, axis=-1).astype(np.uint32)


def start_counter(seed2: int) -> int:
    """The counter a kernel starts from: ``seed2`` in its upper 64 bits."""
    return (seed2 & _MASK64) << 64


# --- words to numbers ----------------------------------------------------------


def _unit_float32(words: Array) -> Array:
    """[0, 1) floats from the low 23 bits of each word, as TensorFlow makes them."""
    bits = (words & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)
    ones: Array = bits.view(np.float32) - np.float32(1.0)
    return ones


def _unit_float64(high: Array, low: Array) -> Array:
    """[0, 1) doubles from 20 bits of ``high`` and all of ``low``."""
    mantissa = ((high & np.uint32(0xFFFFF)).astype(np.uint64) << _SHIFT) | low.astype(np.uint64)
    bits = (np.uint64(1023) << np.uint64(52)) | mantissa
    ones: Array = bits.view(np.float64) - 1.0
    return ones


def _unit_float16(words: Array) -> Array:
    bits = ((words & np.uint32(0x3FF)) | np.uint32(15 << 10)).astype(np.uint16)
    ones: Array = bits.view(np.float16) - np.float16(1.0)
    return ones


def _unit_bfloat16(words: Array) -> Array:
    import ml_dtypes

    bits = ((words & np.uint32(0x7F)) | np.uint32(127 << 7)).astype(np.uint16)
    ones: Array = bits.view(ml_dtypes.bfloat16) - ml_dtypes.bfloat16(1.0)
    return ones


def _box_muller_float(x0: Array, x1: Array) -> tuple[Array, Array]:
    """Two standard normals per pair of words, in float32 as TensorFlow computes them."""
    u1 = np.maximum(_unit_float32(x0), np.float32(1.0e-7))
    # 2 * pi is a double in TensorFlow's expression, so the angle is rounded once
    v1 = (2.0 * np.pi * _unit_float32(x1).astype(np.float64)).astype(np.float32)
    log_u1, (sin, cos) = _C_MATH.logf(u1), _C_MATH.sincosf(v1)
    with np.errstate(all="ignore"):
        u2 = np.sqrt(np.float32(-2.0) * log_u1)
    return sin * u2, cos * u2


def _box_muller_double(words: Array) -> tuple[Array, Array]:
    """Two float64 standard normals per four words."""
    u1 = np.maximum(_unit_float64(words[..., 0], words[..., 1]), 1.0e-7)
    v1 = 2.0 * np.pi * _unit_float64(words[..., 2], words[..., 3])
    u2 = np.sqrt(-2.0 * _C_MATH.log(u1))
    sin, cos = _C_MATH.sincos(v1)
    return sin * u2, cos * u2


class _CMath:
    """The C library's ``logf``, ``sincosf``, ``log`` and ``sincos``, which
    TensorFlow's kernels call: numpy's vectorised versions differ from them in
    the last bit for about one value in a hundred. Where no C math library can
    be loaded, numpy's are used (the values then differ from TensorFlow's in
    the last bit now and then: docs/departures.md T22)."""

    def __init__(self) -> None:
        self._library: Any = None
        self._loaded = False

    def _load(self) -> Any:
        if not self._loaded:
            import ctypes
            import ctypes.util

            found = ctypes.util.find_library("m")
            try:
                library = ctypes.CDLL(found) if found else None
            except OSError:
                library = None
            if library is not None:
                library.logf.restype = ctypes.c_float
                library.logf.argtypes = [ctypes.c_float]
                pointer = ctypes.POINTER(ctypes.c_float)
                library.sincosf.argtypes = [ctypes.c_float, pointer, pointer]
                library.sincosf.restype = None
            self._library = library
            self._loaded = True
        return self._library

    def logf(self, values: Array) -> Array:
        library = self._load()
        if library is None:
            return np.log(values.astype(np.float64)).astype(np.float32)
        log = library.logf
        logs: Array = np.asarray([log(v) for v in values.reshape(-1).tolist()], np.float32)
        shaped: Array = logs.reshape(values.shape)
        return shaped

    def sincosf(self, values: Array) -> tuple[Array, Array]:
        library = self._load()
        if library is None:
            wide = values.astype(np.float64)
            return np.sin(wide).astype(np.float32), np.cos(wide).astype(np.float32)
        import ctypes

        sin, cos = ctypes.c_float(), ctypes.c_float()
        sin_ref, cos_ref = ctypes.byref(sin), ctypes.byref(cos)
        sincosf = library.sincosf
        flat = values.reshape(-1).tolist()
        sines = np.empty(len(flat), np.float32)
        cosines = np.empty(len(flat), np.float32)
        for i, v in enumerate(flat):
            sincosf(v, sin_ref, cos_ref)
            sines[i], cosines[i] = sin.value, cos.value
        return sines.reshape(values.shape), cosines.reshape(values.shape)

    @staticmethod
    def log(values: Array) -> Array:
        # Python's math module calls the C library's double functions
        logs: Array = np.asarray([math.log(v) for v in values.reshape(-1).tolist()])
        shaped: Array = logs.reshape(values.shape)
        return shaped

    @staticmethod
    def sincos(values: Array) -> tuple[Array, Array]:
        flat = values.reshape(-1).tolist()
        sines = np.asarray([math.sin(v) for v in flat]).reshape(values.shape)
        cosines = np.asarray([math.cos(v) for v in flat]).reshape(values.shape)
        return sines, cosines


_C_MATH = _CMath()


def _group_size(dtype: np.dtype[Any]) -> int:
    return 2 if dtype == np.float64 else 4


def uniform(key: int, counter: int, count: int, dtype: np.dtype[Any]) -> Array:
    """``count`` uniform numbers in [0, 1) of ``dtype`` (a float dtype)."""
    group = _group_size(dtype)
    groups = -(-count // group)
    words = philox_words(key, counter, np.arange(groups, dtype=np.uint64))
    if dtype == np.float64:
        values = _unit_float64(words[:, 0::2], words[:, 1::2])
    elif dtype == np.float32:
        values = _unit_float32(words)
    elif dtype == np.float16:
        values = _unit_float16(words)
    else:
        values = _unit_bfloat16(words)
    out: Array = values.reshape(-1)[:count]
    return out


def normal(key: int, counter: int, count: int, dtype: np.dtype[Any]) -> Array:
    """``count`` standard normal numbers of ``dtype``."""
    group = _group_size(dtype)
    groups = -(-count // group)
    words = philox_words(key, counter, np.arange(groups, dtype=np.uint64))
    if dtype == np.float64:
        first, second = _box_muller_double(words)
        values = np.stack([first, second], axis=-1)
    else:
        a, b = _box_muller_float(words[:, 0], words[:, 1])
        c, d = _box_muller_float(words[:, 2], words[:, 3])
        values = np.stack([a, b, c, d], axis=-1).astype(dtype)
    out: Array = values.reshape(-1)[:count]
    return out


def truncated_normal(key: int, counter: int, count: int, dtype: np.dtype[Any]) -> Array:
    """``count`` standard normals of ``dtype`` within (-2, 2): samples outside
    are drawn again, each group from its own reserved stretch of counters."""
    group = _group_size(dtype)
    groups = -(-count // group)
    double = dtype == np.float64
    starts = np.arange(groups, dtype=np.uint64) * np.uint64(RESERVED_PER_OUTPUT * group // 4)
    result = np.zeros((groups, group), np.float64 if double else np.float32)
    # Each round draws one more counter (four words) for the groups still short of
    # accepted values; one round finishes most groups, a few rounds all but a handful.
    pending = np.arange(groups)
    candidates = np.zeros((groups, 0), result.dtype)
    for step in range(8):
        if not pending.size:
            break
        words = philox_words(key, counter, starts[pending] + np.uint64(step))
        candidates = np.concatenate([candidates, _truncated_candidates(words, double)], axis=1)
        accepted = np.abs(candidates) < 2.0
        taken = accepted & (np.cumsum(accepted, axis=1) <= group)
        done = np.sum(taken, axis=1) == group
        result[pending[done]] = candidates[done][taken[done]].reshape(-1, group)
        pending, candidates = pending[~done], candidates[~done]
    for g in pending:
        result[g] = _slow_group(key, counter, int(starts[g]), group, double)
    out: Array = result.reshape(-1)[:count].astype(dtype)
    return out


def _truncated_candidates(words: Array, double: bool) -> Array:
    if double:
        quads = words.reshape(words.shape[0], -1, 4)
        first, second = _box_muller_double(quads)
    else:
        first, second = _box_muller_float(words[:, 0::2], words[:, 1::2])
    return np.stack([first, second], axis=-1).reshape(words.shape[0], -1)


def _slow_group(key: int, counter: int, start: int, group: int, double: bool) -> Array:
    found: list[float] = []
    step = 0
    while True:
        words = philox_words(key, counter, np.asarray([start + step], np.uint64))
        step += 1
        for value in _truncated_candidates(words, double)[0]:
            if abs(value) < 2.0:
                found.append(float(value))
                if len(found) == group:
                    return np.asarray(found)
