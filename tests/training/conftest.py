"""The graph-mode tests' fixtures (tests/graph/conftest.py) serve the training tests too."""

from tests.graph.conftest import graph

__all__ = ["graph"]
