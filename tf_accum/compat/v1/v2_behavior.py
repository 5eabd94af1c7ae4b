"""``disable_v2_behavior`` and ``enable_v2_behavior``: TensorFlow 1's switch
between its two behaviours, which for tf_accum is the switch between graph
mode and eager execution."""

from __future__ import annotations

from tf_accum.graph.mode import disable_eager_execution, enable_eager_execution


def disable_v2_behavior() -> None:
    """Behave as TensorFlow 1: graph mode for the whole process (see
    ``disable_eager_execution``). TensorFlow's other v2 switches (resource
    variables, control flow) change nothing in tf_accum, which has one kind of each."""
    disable_eager_execution()


def enable_v2_behavior() -> None:
    """Behave as TensorFlow 2 again: eager execution (see ``enable_eager_execution``)."""
    enable_eager_execution()


__all__ = ["disable_v2_behavior", "enable_v2_behavior"]
