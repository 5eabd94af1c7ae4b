"""float16 and bfloat16 running sums, kept in float32 and rounded per add.

numpy's half loops (and ml_dtypes' bfloat16 loops) are scalar code, many
times slower than float32 vector code. One add of two narrow values done in
float32 and rounded to the narrow type gives the correctly rounded narrow sum
(24 >= 2 * 11 + 2 bits), which is what numpy, ml_dtypes and TensorFlow's
kernels compute; so a round keeps its sum as float32 images of narrow values
and rounds the bits after every add, with integer operations. With numba
installed (the ``fast`` extra), large sums run the hot part of each add as one
compiled loop instead (tf_accum/accumulators/half_kernel.py), and a MEAN take
divides there too.

:class:`NarrowSum` holds what both types share (the float32 image, its
chunks, the choice between the compiled loops and numpy's passes, an add by
one recorded compiled call); :class:`HalfSum` and :class:`BFloat16Sum` each type's image and checks.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum.accumulators import division, half_kernel
from tf_accum.accumulators.float_errors import add_ignoring_float_errors, ignoring_float_errors

Array = np.ndarray[Any, Any]
# An add by one compiled call (see NarrowSum.prepare_add): the loop, its
# arguments, its ticket and the flat gradient.
PendingAdd = tuple[Callable[..., Any], tuple[Any, ...], int, Array]

_ONE = np.uint32(1)
CHUNK = 262_144  # elements per pass: few GIL hand-offs, working set near the L2


def round_bits(bits: Array, scratch: Array, low_bits: int, keep: Any, halfway: Any) -> None:
    """Round the float32 patterns ``bits`` (uint32) to nearest-even at ``low_bits``,
    clearing them: ``bits + halfway + (bit low_bits) & keep``."""
    np.right_shift(bits, low_bits, out=scratch)
    np.bitwise_and(scratch, _ONE, out=scratch)
    np.add(bits, scratch, out=bits)
    np.add(bits, halfway, out=bits)
    np.bitwise_and(bits, keep, out=bits)


class NarrowSum:
    """A running float16 or bfloat16 sum, kept in float32 and rounded per add.

    Until something other than a finite number turns up, the sum lives in a
    float32 ``shadow`` (each element the exact image of a narrow value), and a
    gradient is added in chunks: widen it (exactly), add in float32, round the
    bits to the narrow precision. After that the round falls back to numpy's own
    narrow arithmetic (``exact``), so that infinities and NaN payloads are
    exactly numpy's. Subclasses define the image and the checks. Besides the
    shadow (twice the narrow sum's size) a round holds a fixed scratch of
    ``CHUNK`` elements, so an apply allocates nothing.

    With numba there, a sum scans and adds contiguous gradients with the
    compiled loops of :mod:`half_kernel` (``_kernels``): the same operations on
    the same state, in one pass instead of ten numpy calls per chunk. A sum of ``half_kernel.MIN_ELEMENTS`` or more loads them; a smaller
    one uses them only if they are loaded already.
    """

    __slots__ = (
        "shadow",
        "exact",
        "dtype",
        "_scratch",
        "_bound",
        "_kernels",
        "pending",
        "_record",
        "_tickets",
    )
    # largest magnitude field (bits & 0x7fff) of a finite value
    _LARGEST_FINITE: int

    def __init__(self, first: Array, dtype: np.dtype[Any]) -> None:
        self.dtype = dtype
        self.exact: Array | None = None
        self._bound = 0.0
        # the add by one compiled call counted and not yet finished (see prepare_add)
        self.pending: PendingAdd | None = None
        # what that call found, and its ticket as its last store (see half_kernel._recording)
        self._record = np.zeros(3, np.int64)
        self._tickets = 0
        self._kernels = (
            half_kernel.load() if first.size >= half_kernel.MIN_ELEMENTS else half_kernel.loaded()
        )
        self._scratch = np.empty(min(CHUNK, first.size), np.uint32)
        self.shadow = np.empty(first.shape, np.float32)
        gradient = first.reshape(-1)
        largest = self._largest_magnitude(gradient)
        if largest > self._LARGEST_FINITE:
            self.exact = np.array(first, dtype, copy=True)
            return
        flat = self.shadow.reshape(-1)
        self._split(lambda lo, hi, scratch: self._widen(gradient[lo:hi], flat[lo:hi]))
        self._bound = self._value(largest)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.shadow.shape

    def _split(self, work: Callable[[int, int, Array], Any], whole: bool = False) -> list[Any]:
        """``work(lo, hi, scratch)`` over the flat elements, in chunks (``whole``:
        one, for the compiled loops, which need no scratch); returns what each
        chunk's call returned."""
        size = self.shadow.size
        scratch = self._scratch
        chunk = max(size, 1) if whole else CHUNK
        found: list[Any] = []
        for start in range(0, size, chunk):
            stop = min(start + chunk, size)
            found.append(work(start, stop, scratch[: stop - start]))
        return found

    def _largest_magnitude(self, gradient: Array) -> int:
        """The largest ``bits & 0x7fff`` of the narrow values (their sign dropped)."""
        if gradient.size == 0:
            return 0
        bits = gradient.view(np.uint16)
        kernels = self._kernels_for(gradient)
        if kernels is not None:
            scan = kernels.largest_magnitude
            return int(max(self._split(lambda lo, hi, _: scan(bits[lo:hi]), whole=True)))

        def chunk(lo: int, hi: int, scratch: Array) -> int:
            field = scratch.view(np.uint16)[: hi - lo]
            np.bitwise_and(bits[lo:hi], np.uint16(0x7FFF), out=field)
            return int(np.maximum.reduce(field))

        largest: int = max(self._split(chunk))
        return largest

    def _add_all(
        self, gradient: Array, compiled: Callable[[Array, Array], Any] | None
    ) -> list[Any]:
        """Add the flat ``gradient`` into the shadow: with the
        compiled loop ``compiled`` (a field of half_kernel.Kernels) if given,
        else in numpy chunks (``_add_chunk``). Returns what each call returned."""
        flat = self.shadow.reshape(-1)
        if compiled is not None:
            bits, gradient_bits = flat.view(np.uint32), gradient.view(np.uint16)
            return self._split(
                lambda lo, hi, _: compiled(bits[lo:hi], gradient_bits[lo:hi]), whole=True
            )
        return self._split(
            lambda lo, hi, scratch: self._add_chunk(flat[lo:hi], gradient[lo:hi], scratch)
        )

    def _kernels_for(self, gradient: Array) -> half_kernel.Kernels | None:
        """The compiled loops if this sum uses them and they take ``gradient``
        (flat; the loops take contiguous, aligned arrays only)."""
        if self._kernels is None:
            return None
        flags = gradient.flags
        return self._kernels if flags.c_contiguous and flags.aligned else None

    def result(self) -> Array:
        if self.exact is not None:
            if np.may_share_memory(self.exact, self.shadow):
                # narrowed over the shadow (HalfSum._narrow_in_place): the taker
                # gets an array of its own, not a view keeping twice its size alive
                own: Array = self.exact.copy()
                return own
            return self.exact
        return self._narrow()

    def divided(self, count: int) -> Array | None:
        """The sum divided by ``count`` as its dtype divides (a MEAN take's
        result, the bits of :meth:`result` then :func:`divide_in_place`), in one
        compiled pass over the shadow into a new array; None when the loops are
        not loaded or the round went on in numpy's narrow arithmetic."""
        kernels = self._kernels
        if kernels is None or self.exact is not None:
            return None
        divisor = np.float32(division.count_in(self.dtype, count))  # exact: a narrow value
        loop = self._narrow_dividing(kernels)
        out = np.empty(self.shadow.shape, np.uint16)
        bits = self.shadow.reshape(-1).view(np.uint32)
        loop(bits, out.reshape(-1), divisor)
        divided: Array = out.view(self.dtype)
        return divided

    # --- an add by one compiled call (see prepare_add) ---

    def prepare_add(self, gradient: Array) -> PendingAdd | None:
        """The add of ``gradient`` as one compiled call, when the sum uses the
        loops, is not exact and the loops take the gradient; else None (use
        :meth:`add`). Changes nothing the sum shows: the caller counts the
        gradient and makes it ``pending`` in one statement, then calls
        :meth:`finish`."""
        if self.exact is not None:
            return None
        flat = gradient.reshape(-1)
        kernels = self._kernels_for(flat)
        if kernels is None:
            return None
        self._tickets = ticket = self._tickets + 1
        bits = self.shadow.reshape(-1).view(np.uint32)
        loop, arguments = self._recorded_loop(kernels, bits, flat.view(np.uint16))
        return loop, (*arguments, self._record, ticket), ticket, flat

    def finish(self) -> None:
        """Finish the ``pending`` add, if any: its loop is run unless its
        ticket says it ran, then what it found is taken in. Whatever cuts
        this short, the add is still pending, and finishing it again does it
        once (the accumulator finishes it before it next reads the sum)."""
        pending = self.pending
        if pending is None:
            return
        loop, arguments, ticket, _ = pending
        if self._record[2] != ticket:
            loop(*arguments)
        if not self._took_in(self._record):
            self._settle()

    def _recorded_loop(
        self, kernels: half_kernel.Kernels, bits: Array, gradient_bits: Array
    ) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        raise NotImplementedError

    def _took_in(self, record: Array) -> bool:
        """Take in what the pending add's loop found, and clear ``pending``,
        in one statement, when nothing more is needed; else False (see
        :meth:`_settle`)."""
        raise NotImplementedError

    def _settle(self) -> None:
        """The rest of the pending add (see :meth:`_took_in`: infinities, NaNs
        or an overflow to check), made aside, then stored with ``pending``
        cleared in one statement."""
        raise NotImplementedError

    # --- subclass hooks ---
    def _narrow_dividing(self, kernels: half_kernel.Kernels) -> Callable[[Array, Array, Any], None]:
        """The compiled loop writing the shadow's values divided by a float32
        into narrow bit patterns: ``loop(shadow_bits, out_bits, divisor)``."""
        raise NotImplementedError

    def add(self, gradient: Array) -> None:
        if self.exact is not None:
            add_ignoring_float_errors(self.exact, gradient)
            return
        flat_gradient = gradient.reshape(-1)
        self._add_shadow(gradient, flat_gradient, self._kernels_for(flat_gradient))

    def _add_shadow(
        self, gradient: Array, flat_gradient: Array, kernels: half_kernel.Kernels | None
    ) -> None:
        """Add ``gradient`` (flat: ``flat_gradient``) to the shadow, with the
        compiled ``kernels`` when they apply; the sum is not yet exact."""
        raise NotImplementedError

    def _value(self, magnitude: int) -> float:
        raise NotImplementedError

    def _widen(self, gradient: Array, out: Array) -> None:
        raise NotImplementedError

    def _add_chunk(self, shadow: Array, gradient: Array, scratch: Array) -> Any:
        raise NotImplementedError

    def _narrow(self) -> Array:
        raise NotImplementedError


# Bits of a float32 that is the (scaled) image of a float16: see HalfSum.
_HALF_SIGN_FIX = np.uint32(0x8FFFFFFF)
_HALF_KEEP = np.uint32(0xFFFFE000)
_HALF_HALFWAY = np.uint32(0x0FFF)
_HALF_INF = 0x0F800000
_LARGEST_HALF = 65504.0  # the largest finite float16


class HalfSum(NarrowSum):
    """float16. The image of a half with bits ``h`` is the float32 with bits
    ``sign(h) << 31 | (h & 0x7fff) << 13``: the half's value times 2**-112, exact
    for every finite half (subnormals included), so float32 adds are exact
    images too, and rounding to half is rounding the bits at bit 13. Overflow
    past the largest half cannot be seen in the image (its infinity is a finite
    float32), so a bound on the sum's magnitude is kept, and the sum is
    checked when the bound reaches the largest half."""

    __slots__ = ()
    _LARGEST_FINITE = half_kernel.LARGEST_FINITE_HALF

    def _past_largest(self) -> bool:
        """Whether the bound on the sum's magnitude reached the largest half:
        the sum may have rounded past it, to an infinity."""
        return self._bound >= _LARGEST_HALF

    def _add_shadow(
        self, gradient: Array, flat_gradient: Array, kernels: half_kernel.Kernels | None
    ) -> None:
        if kernels is not None:
            self._add_checked(flat_gradient, kernels)
            return
        largest = self._largest_magnitude(flat_gradient)
        if largest > self._LARGEST_FINITE:
            self.exact = self._narrow()
            add_ignoring_float_errors(self.exact, gradient)
            return
        self._add_all(flat_gradient, None)
        self._bound += self._value(largest)
        if self._past_largest():
            self._check_overflow()

    def _add_checked(self, gradient: Array, kernels: half_kernel.Kernels) -> None:
        """Add the flat ``gradient`` with the compiled loop that scans and adds
        block by block (half_kernel.add_half_checked). It stops before a
        block holding an infinity or NaN; the round then
        goes on in numpy's float16 arithmetic, which adds what the loop left.
        Element by element that is the same add, so the bits are those of
        scanning the whole gradient first. Once a block is added, no buffer is
        allocated: the float16 sum is made in the shadow's own memory, and the
        rest is added in place between contiguous float16 arrays."""
        bits, gradient_bits = self.shadow.reshape(-1).view(np.uint32), gradient.view(np.uint16)
        checked, block = kernels.add_half_checked, half_kernel.BLOCK
        parts = self._split(
            lambda lo, hi, _: (lo, hi, *checked(bits[lo:hi], gradient_bits[lo:hi], block)),
            whole=True,
        )
        # the blocks added count toward the bound, also for the narrowing below
        self._bound += self._value(max((largest for _, _, largest, _ in parts), default=0))
        left = [(lo + added, hi) for lo, hi, _, added in parts if lo + added < hi]
        if left:
            exact = self._narrow_in_place().reshape(-1)
            for lo, hi in left:
                add_ignoring_float_errors(exact[lo:hi], gradient[lo:hi])
        elif self._past_largest():
            self._check_overflow()

    def _recorded_loop(
        self, kernels: half_kernel.Kernels, bits: Array, gradient_bits: Array
    ) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return kernels.add_half_recorded, (bits, gradient_bits, half_kernel.BLOCK)

    def _took_in(self, record: Array) -> bool:
        largest, added = int(record[0]), int(record[1])
        # the value of the half with magnitude field ``largest`` (finite), by arithmetic
        exponent, fraction = largest >> 10, largest & 0x3FF
        value = fraction * 2.0**-24 if exponent == 0 else (1024 + fraction) * 2.0 ** (exponent - 25)
        bound = self._bound + value
        if added != self.shadow.size or bound >= _LARGEST_HALF:
            return False  # infinities or NaNs left, or an overflow to check
        self._bound, self.pending = bound, None
        return True

    def _settle(self) -> None:
        pending = self.pending
        if pending is None:
            return
        gradient = pending[3]
        # the blocks before the first one holding an infinity or a NaN were
        # added; the largest magnitude among them
        largest, added = int(self._record[0]), int(self._record[1])
        bound = self._bound + self._value(largest)
        exact: Array | None = None
        if added < gradient.size:
            exact = self._narrow(bound >= _LARGEST_HALF)
            flat = exact.reshape(-1)
            add_ignoring_float_errors(flat[added:], gradient[added:])
        elif bound >= _LARGEST_HALF:
            magnitude = self._largest_image()
            if magnitude >= _HALF_INF:
                exact = self._narrow(True)  # rounded past the largest half: infinities
            else:
                bound = self._value(magnitude >> 13)
        self._bound, self.exact, self.pending = bound, exact, None

    def _narrow_in_place(self) -> Array:
        """Go on in numpy's float16 arithmetic: ``exact``, which this returns,
        is the sum narrowed over the shadow's own memory (by the compiled loop,
        or without it by numpy, chunk after chunk from the front), so that a
        round switching after or midway through an add needs no new buffer."""
        bits = self.shadow.reshape(-1).view(np.uint32)
        clamp = self._past_largest()
        if self._kernels is not None:
            self._kernels.narrow_half_into(bits, bits.view(np.uint16), clamp)
        else:
            # element i's two bytes land in element i // 2's, which an earlier
            # chunk, or this one (read whole into scratch first), has read
            halves = bits.view(np.uint16)
            scratch = self._scratch
            width = scratch.shape[0]
            for lo in range(0, bits.size, width):
                hi = min(lo + width, bits.size)
                _narrow_chunk_in_place(bits[lo:hi], halves[lo:hi], scratch[: hi - lo], clamp)
        exact: Array = bits.view(np.uint16)[: bits.size].view(np.float16)
        self.exact = exact.reshape(self.shadow.shape)
        return self.exact

    def _value(self, magnitude: int) -> float:
        return float(np.uint16(magnitude).view(np.float16))

    def _narrow_dividing(self, kernels: half_kernel.Kernels) -> Callable[[Array, Array, Any], None]:
        loop, clamp = kernels.narrow_half_dividing, self._past_largest()
        return lambda bits, out, divisor: loop(bits, out, clamp, divisor)

    def _largest_image(self) -> int:
        """The largest magnitude among the shadow's float32 bit patterns."""
        bits = self.shadow.reshape(-1).view(np.uint32)

        def chunk(lo: int, hi: int, scratch: Array) -> int:
            np.bitwise_and(bits[lo:hi], np.uint32(0x7FFFFFFF), out=scratch)
            return int(np.maximum.reduce(scratch))

        largest: int = max(self._split(chunk))
        return largest

    def _check_overflow(self) -> None:
        magnitude = self._largest_image()
        if magnitude >= _HALF_INF:
            # rounded past the largest half: infinities from here on
            self._narrow_in_place()
        else:
            self._bound = self._value(magnitude >> 13)

    def _widen(self, gradient: Array, out: Array) -> None:
        bits = out.view(np.uint32)
        np.copyto(bits.view(np.int32), gradient.view(np.int16), casting="unsafe")  # sign-extends
        np.left_shift(bits, 13, out=bits)
        np.bitwise_and(bits, _HALF_SIGN_FIX, out=bits)

    def _add_chunk(self, shadow: Array, gradient: Array, scratch: Array) -> None:
        self._widen(gradient, scratch)
        np.add(shadow, scratch.view(np.float32), out=shadow)
        round_bits(shadow.view(np.uint32), scratch, 13, _HALF_KEEP, _HALF_HALFWAY)

    def _narrow(self, clamp: bool | None = None) -> Array:
        """The sum as float16: in chunks, allocating only the result. ``clamp``:
        a sum past the largest half is an infinity (by default, once the
        bound reached it)."""
        out = np.empty(self.shadow.shape, np.uint16)
        flat_out = out.reshape(-1)
        bits = self.shadow.reshape(-1).view(np.uint32)
        if clamp is None:
            clamp = self._past_largest()

        def chunk(lo: int, hi: int, scratch: Array) -> None:
            part = flat_out[lo:hi]
            np.right_shift(bits[lo:hi], 13, out=scratch)  # the sign lands on bit 18
            np.bitwise_and(scratch, np.uint32(0x3FFFF), out=scratch)
            if clamp:
                np.minimum(scratch, np.uint32(0x7C00), out=scratch)
            np.copyto(part, scratch, casting="unsafe")
            np.right_shift(bits[lo:hi], 16, out=scratch)
            np.bitwise_and(scratch, np.uint32(0x8000), out=scratch)
            np.bitwise_or(part, scratch, out=part, casting="unsafe")

        self._split(chunk)
        half: Array = out.view(np.float16)
        return half


# the uint16 holding a uint32's low half
_LOW_HALF = 0 if sys.byteorder == "little" else 1


def _narrow_chunk_in_place(bits: Array, halves: Array, scratch: Array, clamp: bool) -> None:
    """HalfSum._narrow's work on a chunk of the scaled float32 images ``bits``,
    into ``halves`` (uint16), which lie over memory ``bits`` or earlier chunks'
    images had. Nothing is allocated: every operation stays in uint32 (numpy
    buffers a cast), and ``bits``, once read into ``scratch``, holds the signs."""
    np.right_shift(bits, 13, out=scratch)  # the sign lands on bit 18
    sign = bits  # read whole: its memory is free
    np.right_shift(scratch, 3, out=sign)
    np.bitwise_and(sign, np.uint32(0x8000), out=sign)
    np.bitwise_and(scratch, np.uint32(0x3FFFF), out=scratch)
    if clamp:
        np.minimum(scratch, np.uint32(0x7C00), out=scratch)
    np.bitwise_or(scratch, sign, out=scratch)
    np.copyto(halves, scratch.view(np.uint16)[_LOW_HALF::2])


# Bits of a float32 that is the image of a bfloat16: see BFloat16Sum.
_BF16_KEEP = np.uint32(0xFFFF0000)
_BF16_HALFWAY = np.uint32(0x7FFF)


class BFloat16Sum(NarrowSum):
    """bfloat16. The image of a bfloat16 is its float32 value (its bits << 16),
    and float32 has the same exponent range, so overflow rounds to infinity on
    its own; only NaNs (whose payloads ml_dtypes makes canonical, and whose
    choice between two NaN operands is the compiler's) are left to ml_dtypes."""

    __slots__ = ()
    _LARGEST_FINITE = 0x7F7F

    def _value(self, magnitude: int) -> float:
        return 0.0  # no bound needed

    def _narrow_dividing(self, kernels: half_kernel.Kernels) -> Callable[[Array, Array, Any], None]:
        loop: Callable[[Array, Array, Any], None] = kernels.narrow_bfloat16_dividing
        return loop  # the shadow holds no NaN: one turns the round to ml_dtypes'

    def _add_shadow(
        self, gradient: Array, flat_gradient: Array, kernels: half_kernel.Kernels | None
    ) -> None:
        # No scan first: infinities add in float32 as they do in bfloat16, and a
        # NaN (from the gradient, or infinities of opposite signs) shows in each
        # chunk's maximum (or the compiled loop's answer). Rounding leaves NaNs
        # NaNs (their low 16 bits are zero); ml_dtypes returns them canonical,
        # keeping the sign. The round then continues with ml_dtypes'
        # arithmetic, where NaN meets NaN.
        found_nan = self._add_all(flat_gradient, None if kernels is None else kernels.add_bfloat16)
        if any(found_nan):
            self.exact = self._exact_after_nan()

    def _recorded_loop(
        self, kernels: half_kernel.Kernels, bits: Array, gradient_bits: Array
    ) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return kernels.add_bfloat16_recorded, (bits, gradient_bits)

    def _took_in(self, record: Array) -> bool:
        if record[0]:
            return False  # a NaN
        self.pending = None
        return True

    def _settle(self) -> None:
        if self.pending is not None:
            exact = self._exact_after_nan()
            self.exact, self.pending = exact, None

    def _exact_after_nan(self) -> Array:
        """The sum as bfloat16, its NaNs made canonical (in the shadow too:
        doing it again changes nothing)."""
        flat = self.shadow.reshape(-1)
        bits = flat.view(np.uint32)
        nan = np.isnan(flat)
        bits[nan] = (bits[nan] & np.uint32(0x80000000)) | np.uint32(0x7FC00000)
        return self._narrow()

    def _widen(self, gradient: Array, out: Array) -> None:
        np.copyto(out.view(np.float32), gradient, casting="unsafe")  # ml_dtypes: a vector shift

    def _add_chunk(self, shadow: Array, gradient: Array, scratch: Array) -> Any:
        widened = scratch.view(np.float32)
        self._widen(gradient, widened)
        ignoring_float_errors(np.add, shadow, widened, out=shadow)
        round_bits(shadow.view(np.uint32), scratch, 16, _BF16_KEEP, _BF16_HALFWAY)
        largest = np.maximum.reduce(shadow)  # NaN when one is there
        return largest != largest

    def _narrow(self) -> Array:
        """The sum as bfloat16 (the top half of each float32): allocates only the result."""
        out = np.empty(self.shadow.shape, np.uint16)
        flat_out = out.reshape(-1)
        bits = self.shadow.reshape(-1).view(np.uint32)
        self._split(
            lambda lo, hi, scratch: np.right_shift(
                bits[lo:hi], 16, out=flat_out[lo:hi], casting="unsafe"
            )
        )
        narrow: Array = out.view(self.dtype)
        return narrow
