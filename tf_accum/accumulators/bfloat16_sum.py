"""bfloat16 running sums kept in float32 (see tf_accum/accumulators/float32_shadow.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tf_accum.accumulators import half_kernel
from tf_accum.accumulators.float32_shadow import Float32ShadowSum, round_bits
from tf_accum.accumulators.float_errors import ignoring_float_errors

Array = np.ndarray[Any, Any]

# Bits of a float32 that is the image of a bfloat16: see BFloat16Sum.
_BF16_KEEP = np.uint32(0xFFFF0000)
_BF16_HALFWAY = np.uint32(0x7FFF)


class BFloat16Sum(Float32ShadowSum):
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
            self._to_exact_after_nan()

    def _loop_call(
        self, kernels: half_kernel.Kernels, bits: Array, gradient_bits: Array
    ) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return kernels.add_bfloat16, (bits, gradient_bits)

    def _settled(self, returned: Any) -> bool:
        if returned:
            return False  # a NaN: settle
        self.pending = None
        return True

    def _settle(self, gradient: Array) -> None:
        if np.isnan(self.shadow).any():
            self._to_exact_after_nan()

    def _to_exact_after_nan(self) -> None:
        flat = self.shadow.reshape(-1)
        bits = flat.view(np.uint32)
        nan = np.isnan(flat)
        bits[nan] = (bits[nan] & np.uint32(0x80000000)) | np.uint32(0x7FC00000)
        self.exact = self._narrow()

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
