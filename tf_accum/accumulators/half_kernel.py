"""Compiled loops for float16 and bfloat16 running sums (optional: needs numba).

Why: a float16/bfloat16 running sum (narrow_sum.HalfSum, narrow_sum.BFloat16Sum) is a
float32 "image" rounded to the narrow precision after every add. In numpy that
is about ten passes over the array per apply (widen, add, four or five for the
rounding, a scan for infinities and NaNs), each a separate loop over memory.
Fused into one loop compiled by numba, an apply reads the gradient and the
sum once (a float16 gradient is scanned a block at a time just before the
block is added, so the scan reads it from the cache; a bfloat16 add finds NaNs
in the sums it makes): several times faster than numpy, and near TensorFlow's
own float16 kernel, which keeps its sum in float16 and so moves less memory
(benchmarks/bench_table.py).

The loops do exactly the integer and float32 operations the numpy path does,
element by element, so the bits are the same (tests/test_half_kernel.py runs
both side by side). They cover only the hot part of an apply: the scan of the
gradient and the add with rounding, and the narrowing of a float16 round that
goes on in float16 arithmetic; and a MEAN take's division, read straight from
a round's float32 sum when it is still there (numpy's float16 division and
ml_dtypes' bfloat16 division are scalar code, the loops vector code; their
tests run every pattern against them). Everything rarer (the first gradient's
widening, the overflow check, the result's narrowing, and the adds of a round
that met an infinity or a NaN) stays on the numpy path, which shares the same
state. When a float16 gradient holds an infinity or a NaN, the loop stops
before its block, the sum is narrowed over its own memory
(:func:`narrow_half_into`, so that no buffer is allocated with part of the
gradient added) and numpy adds the rest.

numba is imported, and the loops compiled, only by :func:`load`, at the first
large enough float16/bfloat16 round of a process (compiling is slow, and
``import tf_accum`` never imports numba). If numba is missing, or
fails to import or compile, :func:`load` returns None and the numpy path is
used: same results, slower.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tf_accum.accumulators.compiled_loader import Loader
from tf_accum.dtypes import is_bfloat16

Array = np.ndarray[Any, Any]

_FLOAT16 = np.dtype(np.float16)

# Rounds of this many elements load the loops (importing numba and compiling
# are slow, once per process): from here the time an add saves repays that
# within a few thousand adds (benchmarks/bench_half_kernel.py), below it only
# after many more. Smaller rounds use the loops only when a large one has
# loaded them already (see :func:`loaded`): they are faster there too, but not
# worth the compiling.
MIN_ELEMENTS = 262_144

# Constants as numpy scalars, so that numba keeps the arithmetic in uint32
# (a Python int would widen it to int64).
_U16_MAGNITUDE = np.uint16(0x7FFF)
_SIGN16 = np.uint32(0x8000)
_MAGNITUDE16 = np.uint32(0x7FFF)
_SHIFT16 = np.uint32(16)
_SHIFT13 = np.uint32(13)
_ONE = np.uint32(1)
_HALF_HALFWAY = np.uint32(0x0FFF)
_HALF_KEEP = np.uint32(0xFFFFE000)
_BF16_HALFWAY = np.uint32(0x7FFF)
_BF16_KEEP = np.uint32(0xFFFF0000)
_MAGNITUDE32 = np.uint32(0x7FFFFFFF)
_INF32 = np.uint32(0x7F800000)  # magnitudes above it are NaNs
LARGEST_FINITE_HALF = 0x7BFF  # magnitude field; above it, infinities and NaNs
_HALF_INF16 = np.uint32(0x7C00)
_HALF_FIELD = np.uint32(0x3FFFF)  # the magnitude of an image, shifted down by 13
_SIGN32_TO_16 = np.uint32(0x8000)

# Elements of a float16 gradient scanned, then added, at a time: the block is
# still in the cache when it is added, so the gradient is read from memory once
# (faster than a whole scan followed by the add).
BLOCK = 2048


# The loops below are plain Python over numpy scalars (they run uncompiled too,
# slowly); :func:`load` compiles them. Loops run over whole arrays (slices made
# by the caller): numba vectorises ``range(n)`` loops over contiguous arrays.


def largest_magnitude(bits: Array) -> int:
    """The largest ``bits & 0x7fff`` of uint16 patterns (0 for none): above
    the largest finite value, an infinity or NaN is among them."""
    largest = np.uint16(0)
    for i in range(bits.size):
        magnitude = np.uint16(bits[i] & _U16_MAGNITUDE)
        # a branch rather than max(): numba then keeps the loop in uint16 and
        # vectorises it
        if magnitude > largest:
            largest = magnitude
    return int(largest)


def add_half(shadow: Array, gradient: Array) -> None:
    """``shadow`` (uint32 bits of float32 images of halves, see
    narrow_sum.HalfSum) plus the half bit patterns ``gradient`` (finite),
    rounded to nearest-even at bit 13, in place."""
    total = shadow.view(np.float32)
    for i in range(shadow.size):
        h = np.uint32(gradient[i])
        image = np.uint32(((h & _SIGN16) << _SHIFT16) | ((h & _MAGNITUDE16) << _SHIFT13))
        bits = np.float32(total[i] + image.view(np.float32)).view(np.uint32)
        shadow[i] = (bits + _HALF_HALFWAY + ((bits >> _SHIFT13) & _ONE)) & _HALF_KEEP


def _checked_half_adder(scan: Any, add: Any) -> Any:
    """``add_half_checked`` over the given scan and add (compiled by :func:`_compile`)."""

    def add_half_checked(shadow: Array, gradient: Array, block: int) -> tuple[int, int]:
        """:func:`add_half` of the half bit patterns ``gradient``, ``block``
        elements at a time, each block scanned first: stops before the first
        block that holds an infinity or a NaN. Returns the largest magnitude
        field among the blocks added, and how many elements were added."""
        largest = 0
        size = shadow.size
        lo = 0
        while lo < size:
            hi = min(lo + block, size)
            found = scan(gradient[lo:hi])
            if found > LARGEST_FINITE_HALF:
                break
            largest = max(largest, found)
            add(shadow[lo:hi], gradient[lo:hi])
            lo = hi
        return largest, lo

    return add_half_checked


def _recording(add_half_checked: Any, add_bfloat16: Any) -> tuple[Any, Any]:
    """The adds of one gradient that record what they found in ``record``
    (int64) and, as their last store, ``ticket`` in ``record[2]``: whoever
    finds the ticket there knows the add ran whole (compiled by :func:`_compile`)."""

    def add_half_recorded(
        shadow: Array, gradient: Array, block: int, record: Array, ticket: int
    ) -> None:
        """``add_half_checked``; its answer (the largest magnitude field
        among the blocks added, how many elements were added) in ``record[0]``
        and ``record[1]``."""
        largest, added = add_half_checked(shadow, gradient, block)
        record[0] = largest
        record[1] = added
        record[2] = ticket

    def add_bfloat16_recorded(shadow: Array, gradient: Array, record: Array, ticket: int) -> None:
        """``add_bfloat16``; whether a sum is NaN in ``record[0]`` (1 or 0)."""
        record[0] = 1 if add_bfloat16(shadow, gradient) else 0
        record[2] = ticket

    return add_half_recorded, add_bfloat16_recorded


def narrow_half_into(shadow: Array, out: Array, clamp: bool) -> None:
    """The halves whose images ``shadow`` holds (uint32 bits, see
    narrow_sum.HalfSum), as half bit patterns into ``out``, which may be
    ``shadow``'s own memory viewed as uint16: element ``i`` then lands in the
    bytes of element ``i // 2``, read before then, so narrowing allocates
    nothing. ``clamp``: a sum past the largest half becomes an infinity. The
    same bits as narrow_sum.HalfSum._narrow."""
    for i in range(shadow.size):
        bits = shadow[i]
        field = (bits >> _SHIFT13) & _HALF_FIELD
        if clamp and field > _HALF_INF16:
            field = _HALF_INF16
        out[i] = np.uint16((field & np.uint32(0xFFFF)) | ((bits >> _SHIFT16) & _SIGN32_TO_16))


def add_bfloat16(shadow: Array, gradient: Array) -> bool:
    """``shadow`` (uint32 bits of float32 values of bfloat16s) plus the
    bfloat16 bit patterns ``gradient``, rounded to nearest-even at bit 16, in
    place. Returns whether a sum is NaN."""
    total = shadow.view(np.float32)
    largest = np.uint32(0)
    for i in range(shadow.size):
        widened = np.uint32(np.uint32(gradient[i]) << _SHIFT16)
        bits = np.float32(total[i] + widened.view(np.float32)).view(np.uint32)
        bits = np.uint32((bits + _BF16_HALFWAY + ((bits >> _SHIFT16) & _ONE)) & _BF16_KEEP)
        shadow[i] = bits
        largest = max(largest, np.uint32(bits & _MAGNITUDE32))
    return bool(largest > _INF32)


# A normal half's magnitude bits shifted to a float32's place, plus this, are
# its float32 bits: the exponent rebiased from half's 15 to float32's 127.
_EXPONENT_REBIAS = np.uint32(112 << 23)
# A subnormal half's fraction bits in a float32 whose exponent is 2**-14 give
# 2**-14 more than its value, a normal float32 minus 2**-14.
_SUBNORMAL_BIAS = np.uint32(113 << 23)
_TWO_MINUS_14 = np.float32(2.0**-14)
_HALF_SMALLEST_NORMAL = np.uint32(0x400)
_TWO_MINUS_14_BITS = np.uint32(0x38800000)  # below it, a half is subnormal (or zero)
_HALF_REBIAS = np.uint32(112 << 10)  # float32's exponent bias less half's, in place
_HALF_ULP_SCALE = np.float32(0.5)  # its unit in the last place is the smallest half
_HALF_ULP_SCALE_BITS = np.uint32(0x3F000000)
_HALF_PAYLOAD = np.uint32(0x3FF)
_BF16_NAN = np.uint32(0x7FC0)


def half_quotient(h: Any, divisor: Any) -> Any:
    """The float16 pattern ``h`` divided by the float32 ``divisor`` as numpy
    divides float16: the half widened to float32 (exactly), one float32
    division, and the quotient rounded to the nearest half, ties to even; a
    NaN keeps its sign and the top of its payload."""
    h = np.uint32(h)
    magnitude = np.uint32(h & _MAGNITUDE16)
    fraction = np.uint32((magnitude & _HALF_PAYLOAD) << _SHIFT13)
    # Widened with no subnormal float32 anywhere: an operation on one costs a
    # microcode assist of about a hundred cycles, and small float16 gradients
    # are mostly subnormal (scaling the image, a float32 subnormal for them,
    # made such a take several times slower). All three are made and one is picked, so
    # that the loop stays vectorised.
    special = np.uint32(_INF32 | fraction)  # an infinity or NaN, payload and all
    normal = np.uint32((magnitude << _SHIFT13) + _EXPONENT_REBIAS)
    biased = np.uint32(_SUBNORMAL_BIAS | fraction)
    subnormal = np.float32(biased.view(np.float32) - _TWO_MINUS_14).view(np.uint32)
    wide = special if magnitude >= _HALF_INF16 else normal
    wide = subnormal if magnitude < _HALF_SMALLEST_NORMAL else wide
    value = np.uint32(wide | ((h & _SIGN16) << _SHIFT16)).view(np.float32)
    quotient = np.float32(value / divisor)
    q = quotient.view(np.uint32)
    q_magnitude = np.uint32(q & _MAGNITUDE32)
    if q_magnitude > _INF32:  # NaN
        field = np.uint32(_HALF_INF16 | ((q_magnitude >> _SHIFT13) & _HALF_PAYLOAD))
    elif q_magnitude < _TWO_MINUS_14_BITS:
        # subnormal: one float32 add rounds the quotient to the smallest
        # half's multiples (ties to even), a single rounding as numpy's
        rounded = np.float32(abs(quotient) + _HALF_ULP_SCALE).view(np.uint32)
        field = np.uint32(rounded - _HALF_ULP_SCALE_BITS)
    else:
        rounded = np.uint32(q_magnitude + _HALF_HALFWAY + ((q_magnitude >> _SHIFT13) & _ONE))
        field = np.uint32(min((rounded >> _SHIFT13) - _HALF_REBIAS, _HALF_INF16))
    return np.uint16(field | ((q >> _SHIFT16) & _SIGN32_TO_16))


def bfloat16_quotient(value: Any, divisor: Any) -> Any:
    """The float32 ``value`` (a bfloat16's) divided by the float32 ``divisor``
    as ml_dtypes divides bfloat16: one float32 division rounded to
    nearest-even at bit 16; a NaN becomes the quiet NaN of its sign."""
    q = np.float32(value / divisor).view(np.uint32)
    if np.uint32(q & _MAGNITUDE32) > _INF32:
        return np.uint16(((q >> _SHIFT16) & _SIGN32_TO_16) | _BF16_NAN)
    return np.uint16((q + _BF16_HALFWAY + ((q >> _SHIFT16) & _ONE)) >> _SHIFT16)


def _dividers(half: Any, bfloat16: Any, inline: Any = lambda fn: fn) -> tuple[Any, ...]:
    """The division loops over the given per-element quotients (compiled by
    :func:`_compile`, which passes its ``inline``; plain Python over the plain
    ones)."""

    def divide_half(bits: Array, divisor: Any) -> None:
        """Divide the float16 patterns ``bits`` by the float32 ``divisor`` in place."""
        for i in range(bits.size):
            bits[i] = half(bits[i], divisor)

    def divide_bfloat16(bits: Array, divisor: Any) -> None:
        """Divide the bfloat16 patterns ``bits`` by the float32 ``divisor`` in place."""
        for i in range(bits.size):
            widened = np.uint32(np.uint32(bits[i]) << _SHIFT16)
            bits[i] = bfloat16(widened.view(np.float32), divisor)

    narrow_part, divide_part = inline(narrow_half_into), inline(divide_half)

    def narrow_half_dividing(shadow: Array, out: Array, clamp: bool, divisor: Any) -> None:
        """The halves whose images ``shadow`` holds (see :func:`narrow_half_into`,
        whose bits they are first), divided by the float32 ``divisor``, into
        the float16 patterns ``out``: a MEAN take's result. A block at a time,
        narrowed then divided while in the cache: two simple loops, which the
        compiler vectorises wider than one fused loop."""
        size = shadow.size
        lo = 0
        while lo < size:
            hi = min(lo + BLOCK, size)
            narrow_part(shadow[lo:hi], out[lo:hi], clamp)
            divide_part(out[lo:hi], divisor)
            lo = hi

    def narrow_bfloat16_dividing(shadow: Array, out: Array, divisor: Any) -> None:
        """The float32 values ``shadow`` (bits; of bfloat16s, none a NaN)
        divided by the float32 ``divisor``, into the bfloat16 patterns ``out``."""
        values = shadow.view(np.float32)
        for i in range(shadow.size):
            out[i] = bfloat16(values[i], divisor)

    return divide_half, divide_bfloat16, narrow_half_dividing, narrow_bfloat16_dividing


divide_half, divide_bfloat16, narrow_half_dividing, narrow_bfloat16_dividing = _dividers(
    half_quotient, bfloat16_quotient
)


class Kernels(NamedTuple):
    """The compiled loops: each takes C-contiguous, aligned 1-D arrays
    (``gradient`` may be read-only)."""

    largest_magnitude: Any
    add_half_checked: Any
    narrow_half_into: Any
    add_bfloat16: Any
    add_half_recorded: Any
    add_bfloat16_recorded: Any
    divide_half: Any
    divide_bfloat16: Any
    narrow_half_dividing: Any
    narrow_bfloat16_dividing: Any


def _compile() -> Kernels:
    import numba
    from numba import types

    def bits(dtype: Any, readonly: bool = False) -> Any:
        return types.Array(dtype, 1, "C", readonly=readonly)

    # a read-only array type accepts writable arrays too: one compilation each
    gradient = bits(types.uint16, readonly=True)
    shadow = bits(types.uint32)

    def jit(fn: Any, signatures: list[Any]) -> Any:
        # nogil: other threads go on while a loop runs (as in numpy's own loops)
        return numba.njit(signatures, nogil=True)(fn)

    def inlined(fn: Any) -> Any:
        # compiled into their caller, for the types it passes (slices)
        return numba.njit(nogil=True, inline="always")(fn)

    checked = _checked_half_adder(inlined(largest_magnitude), inlined(add_half))
    halves = bits(types.uint16)
    divide, divide_bf16, narrow_dividing, narrow_bf16_dividing = _dividers(
        inlined(half_quotient), inlined(bfloat16_quotient), inlined
    )
    record = bits(types.int64)
    half_recorded, bfloat16_recorded = _recording(inlined(checked), inlined(add_bfloat16))
    add_half_recorded = jit(
        half_recorded, [types.void(shadow, gradient, types.int64, record, types.int64)]
    )
    add_bfloat16_recorded = jit(
        bfloat16_recorded, [types.void(shadow, gradient, record, types.int64)]
    )

    def add_half_answering(shadow: Array, gradient: Array, block: int) -> tuple[int, int]:
        """add_half_checked, compiled once: the recorded add, its answer returned."""
        answer = np.zeros(3, np.int64)
        add_half_recorded(shadow, gradient, block, answer, 0)
        return int(answer[0]), int(answer[1])

    def add_bfloat16_answering(shadow: Array, gradient: Array) -> bool:
        """add_bfloat16, compiled once: the recorded add, its answer returned."""
        answer = np.zeros(3, np.int64)
        add_bfloat16_recorded(shadow, gradient, answer, 0)
        return bool(answer[0])

    return Kernels(
        largest_magnitude=jit(largest_magnitude, [types.int64(gradient)]),
        add_half_checked=add_half_answering,
        narrow_half_into=jit(narrow_half_into, [types.void(shadow, halves, types.boolean)]),
        add_bfloat16=add_bfloat16_answering,
        add_half_recorded=add_half_recorded,
        add_bfloat16_recorded=add_bfloat16_recorded,
        divide_half=jit(divide, [types.void(halves, types.float32)]),
        divide_bfloat16=jit(divide_bf16, [types.void(halves, types.float32)]),
        narrow_half_dividing=jit(
            narrow_dividing, [types.void(shadow, halves, types.boolean, types.float32)]
        ),
        narrow_bfloat16_dividing=jit(
            narrow_bf16_dividing, [types.void(shadow, halves, types.float32)]
        ),
    )


# _compile is looked up at each load: tests replace it
LOADER: Loader[Kernels] = Loader(lambda: _compile())


def load() -> Kernels | None:
    """The compiled loops, or None when numba is not available (see
    :meth:`compiled_loader.Loader.load`: compiled once per process)."""
    return LOADER.load()


def load_pending(dtype: np.dtype[Any], size: int) -> bool:
    """Whether a round of ``size`` elements of ``dtype`` would call :func:`load`
    before it has been tried: callers that must not block (a lock holder, such
    as a host serving other calls) load first, elsewhere."""
    return not LOADER.tried and size >= MIN_ELEMENTS and is_narrow(dtype)


def is_narrow(dtype: np.dtype[Any]) -> bool:
    """Whether sums of ``dtype`` use the loops: float16 and bfloat16 (told
    without importing ml_dtypes)."""
    return dtype == _FLOAT16 or is_bfloat16(dtype)


def loaded() -> Kernels | None:
    """The compiled loops if an earlier :func:`load` made them, else None
    (never imports or compiles)."""
    return LOADER.kernels
