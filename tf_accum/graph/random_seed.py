"""Graph- and op-level seeds, by TensorFlow's rules (``tf.set_random_seed``).

A random op's two seeds come from the graph's seed and its own:

- both set: ``(graph seed, op seed)``;
- only the graph's: the op seed is a counter of the graph's random ops that
  had no seed of their own (0, 1, 2, ... in the order they were built);
  eagerly, a draw from a Python ``random.Random`` seeded with the global seed;
- only the op's: the graph seed is 87654321;
- neither: ``(None, None)``, and the op is seeded from the system's entropy.

Seeds are taken modulo ``2**31 - 1``; ``(0, 0)`` becomes ``(0, 2**31 - 1)``.
Eagerly, ops with the same seeds continue one sequence, as TensorFlow's
cached eager kernels do, until ``set_random_seed`` starts them afresh.
"""

from __future__ import annotations

import random
import threading
import weakref
from typing import Any

from tf_accum.graph import mode
from tf_accum.graph.graph import Graph

DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2**31 - 1

_lock = threading.Lock()
_graph_seeds: weakref.WeakKeyDictionary[Graph, int | None] = weakref.WeakKeyDictionary()
_graph_counters: weakref.WeakKeyDictionary[Graph, int] = weakref.WeakKeyDictionary()


class _EagerSeeds:
    """The eager global seed, its op-seed generator, and the position each
    eager random op's sequence has reached."""

    def __init__(self) -> None:
        self.seed: int | None = None
        self.draws = random.Random()
        self.positions: dict[tuple[Any, ...], int] = {}


_eager = _EagerSeeds()


def set_random_seed(seed: Any) -> None:
    """Set the seed of the graph being built (eagerly: the global seed).

    With it set, random ops without a seed of their own give the same values
    in every run of the program.
    """
    value = None if seed is None else int(seed)
    graph = mode.building_graph()
    with _lock:
        if graph is None:
            _eager.seed = value
            _eager.draws = random.Random(value)
            _eager.positions.clear()
        else:
            _graph_seeds[graph] = value


def graph_seed(graph: Graph) -> int | None:
    """The seed ``set_random_seed`` gave ``graph`` (None if none)."""
    with _lock:
        return _graph_seeds.get(graph)


def get_seed(op_seed: Any) -> tuple[int | None, int | None]:
    """The two seeds a random op built now uses, given its own ``op_seed``."""
    graph = mode.building_graph()
    with _lock:
        global_seed = _eager.seed if graph is None else _graph_seeds.get(graph)
        if global_seed is not None:
            if op_seed is None:
                if graph is None:
                    op_seed = _eager.draws.randint(0, _MAXINT32)
                else:
                    op_seed = _graph_counters.get(graph, 0)
                    _graph_counters[graph] = op_seed + 1
            seeds: tuple[int | None, int | None] = (
                global_seed % _MAXINT32,
                int(op_seed) % _MAXINT32,
            )
        elif op_seed is not None:
            seeds = DEFAULT_GRAPH_SEED, int(op_seed) % _MAXINT32
        else:
            seeds = None, None
    if seeds == (0, 0):
        return 0, _MAXINT32
    return seeds


def eager_position(key: tuple[Any, ...], advance: int) -> int:
    """Where the eager sequence of ``key`` (an op type, attributes and seeds)
    stands, moving it on by ``advance``."""
    with _lock:
        position = _eager.positions.get(key, 0)
        _eager.positions[key] = position + advance
        return position
