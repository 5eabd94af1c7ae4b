"""What an accumulator is: the attributes fixed at creation."""

from __future__ import annotations

from dataclasses import dataclass

from tf_accum.dtypes import DType
from tf_accum.shapes import DeclaredShape, kernel_text

REDUCTION_TYPES = ("MEAN", "SUM")
KINDS = ("dense", "sparse")


@dataclass(frozen=True)
class AccumulatorSpec:
    """Kind, dtype, declared shape and reduction: compared when a name is shared."""

    kind: str  # "dense" or "sparse"
    dtype: DType
    shape: DeclaredShape
    reduction_type: str

    def describe(self) -> str:
        return (
            f"a {self.kind} {self.dtype.name} accumulator of shape {kernel_text(self.shape)} "
            f"with reduction_type {self.reduction_type}"
        )
