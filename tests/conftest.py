from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import tf_accum as tfa

raw = tfa.raw_ops


def _dense_ops(prefix: str, constructor: str) -> SimpleNamespace:
    return SimpleNamespace(
        name=prefix or "ref",
        create=getattr(raw, constructor),
        apply=getattr(raw, f"{prefix}AccumulatorApplyGradient"),
        num=getattr(raw, f"{prefix}AccumulatorNumAccumulated"),
        set_step=getattr(raw, f"{prefix}AccumulatorSetGlobalStep"),
        take=getattr(raw, f"{prefix}AccumulatorTakeGradient"),
    )


@pytest.fixture(params=["ref", "resource"])
def ops(request: pytest.FixtureRequest) -> SimpleNamespace:
    """The dense raw ops, in their ref and their resource spelling."""
    if request.param == "ref":
        return _dense_ops("", "ConditionalAccumulator")
    return _dense_ops("Resource", "ResourceConditionalAccumulator")


@pytest.fixture
def f32() -> type:
    return np.float32
