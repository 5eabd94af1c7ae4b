"""float16 running sums kept in float32 (see tf_accum/accumulators/float32_shadow.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum.accumulators import half_kernel
from tf_accum.accumulators.float32_shadow import Float32ShadowSum, round_bits
from tf_accum.accumulators.float_errors import add_ignoring_float_errors

Array = np.ndarray[Any, Any]

# Bits of a float32 that is the (scaled) image of a float16: see HalfSum.
_HALF_SIGN_FIX = np.uint32(0x8FFFFFFF)
_HALF_KEEP = np.uint32(0xFFFFE000)
_HALF_HALFWAY = np.uint32(0x0FFF)
_HALF_INF = 0x0F800000
_LARGEST_HALF = 65504.0  # the largest finite float16


class HalfSum(Float32ShadowSum):
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

    def _loop_call(
        self, kernels: half_kernel.Kernels, bits: Array, gradient_bits: Array
    ) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return kernels.add_half_checked, (bits, gradient_bits, half_kernel.BLOCK)

    def _settled(self, returned: Any) -> bool:
        largest, added = returned
        # the value of the half with magnitude field ``largest`` (finite), by
        # arithmetic alone: no call between the loop and the statement below
        exponent, fraction = largest >> 10, largest & 0x3FF
        value = fraction * 2.0**-24 if exponent == 0 else (1024 + fraction) * 2.0 ** (exponent - 25)
        bound = self._bound + value
        if added != self.shadow.size or bound >= _LARGEST_HALF:
            return False  # infinities or NaNs left, or an overflow to check: settle
        self._bound, self.pending = bound, None
        return True

    def _settle(self, gradient: Array) -> None:
        # what add_half_checked returned: the blocks before the first one
        # holding an infinity or a NaN were added; the largest magnitude among them
        magnitudes = np.bitwise_and(gradient.view(np.uint16), np.uint16(0x7FFF))
        beyond = np.flatnonzero(magnitudes > self._LARGEST_FINITE)
        added = (
            gradient.size
            if not beyond.size
            else int(beyond[0]) // half_kernel.BLOCK * half_kernel.BLOCK
        )
        largest = int(np.maximum.reduce(magnitudes[:added])) if added else 0
        self._bound += self._value(largest)
        if added < gradient.size:
            exact = self._narrow_in_place().reshape(-1)
            add_ignoring_float_errors(exact[added:], gradient[added:])
        elif self._past_largest():
            self._check_overflow()

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

    def _check_overflow(self) -> None:
        bits = self.shadow.reshape(-1).view(np.uint32)

        def chunk(lo: int, hi: int, scratch: Array) -> int:
            np.bitwise_and(bits[lo:hi], np.uint32(0x7FFFFFFF), out=scratch)
            return int(np.maximum.reduce(scratch))

        magnitude = max(self._split(chunk))
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

    def _narrow(self) -> Array:
        """The sum as float16: in chunks, allocating only the result."""
        out = np.empty(self.shadow.shape, np.uint16)
        flat_out = out.reshape(-1)
        bits = self.shadow.reshape(-1).view(np.uint32)
        clamp = self._past_largest()  # a sum past the largest half is an infinity

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
