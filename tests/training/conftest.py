"""Fixtures for the graph-mode tests: each test builds in a fresh Graph of its own.

Nothing here calls ``disable_eager_execution()``: that flips the whole process
into graph mode (and every other test file with it). ``with Graph().as_default():``
is graph mode for the building thread only.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import tf_accum.compat.v1 as tf


@pytest.fixture
def graph() -> Iterator[tf.Graph]:
    """A new graph, the default graph of the test's thread for the whole test."""
    g = tf.Graph()
    with g.as_default():
        yield g
