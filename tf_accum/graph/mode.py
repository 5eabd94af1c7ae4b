"""Eager or graph: which one the ops are in, per thread.

TF2's rule, kept by ``tf_accum.compat.v1``: ops act at once (eager) unless
eager execution was disabled for the process, or the thread is inside
``with graph.as_default():``, in which case they build into that graph.
Unless a graph is being built somewhere (eager execution disabled, or a thread
inside ``as_default()``) nothing here is consulted but one flag, so the eager
ops pay nothing for graph mode's existence.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tf_accum.graph.graph import Graph

# True while ops may build into a graph: eager execution is disabled, or some
# thread is inside a graph's as_default(). When it is False the raw ops read
# nothing else, so eager calls cost the same before and after graphs were used.
graph_mode_used = False
_eager_enabled = True
_entered = 0  # as_default() blocks open, over all threads
_entered_lock = threading.Lock()
_default_graph: Graph | None = None
_default_graph_lock = threading.Lock()
_local = threading.local()


def _graph_stack() -> list[Graph]:
    stack: list[Graph] | None = getattr(_local, "graphs", None)
    if stack is None:
        stack = _local.graphs = []
    return stack


def _refresh_flag() -> None:
    """Recompute ``graph_mode_used``; callers hold ``_entered_lock``."""
    global graph_mode_used
    used = _entered > 0 or not _eager_enabled
    if used != graph_mode_used:
        from tf_accum.graph.raw_op_nodes import graph_mode_changed  # registers with the ops

        graph_mode_changed(used)
    graph_mode_used = used


def push_graph(graph: Graph) -> None:
    global _entered
    with _entered_lock:
        _entered += 1
        _refresh_flag()
    _graph_stack().append(graph)


def pop_graph(graph: Graph) -> None:
    global _entered
    stack = _graph_stack()
    if not stack or stack[-1] is not graph:
        raise AssertionError("Nesting violated for default graph: graphs must be exited in order")
    stack.pop()
    with _entered_lock:
        _entered -= 1
        _refresh_flag()


def building_graph() -> Graph | None:
    """The graph ops build into on this thread, or None when they act at once."""
    if not graph_mode_used:
        return None
    stack: list[Graph] | None = getattr(_local, "graphs", None)
    if stack:
        return stack[-1]
    if _eager_enabled:
        return None
    return global_default_graph()


def executing_eagerly() -> bool:
    """Whether ops called now act at once (True) or build into a graph (False)."""
    return building_graph() is None


def disable_eager_execution() -> None:
    """Make graph mode the default for the whole process, as TensorFlow 1 was.

    Ops then build into :func:`get_default_graph` and run in a ``Session``.
    """
    global _eager_enabled
    with _entered_lock:
        _eager_enabled = False
        _refresh_flag()


def enable_eager_execution(
    config: object = None, device_policy: object = None, execution_mode: object = None
) -> None:
    """Make eager execution the default again (the arguments are accepted and ignored)."""
    global _eager_enabled
    with _entered_lock:
        _eager_enabled = True
        _refresh_flag()


def global_default_graph() -> Graph:
    global _default_graph
    graph = _default_graph
    if graph is None:
        with _default_graph_lock:
            if _default_graph is None:
                from tf_accum.graph.graph import Graph

                _default_graph = Graph()
            graph = _default_graph
    return graph


def get_default_graph() -> Graph:
    """The graph ops build into: the innermost ``as_default()`` graph of this
    thread, else the process's global default graph."""
    stack: list[Graph] | None = getattr(_local, "graphs", None)
    if stack:
        return stack[-1]
    return global_default_graph()


def reset_default_graph() -> None:
    """Replace the global default graph with a new, empty one.

    Raises:
        AssertionError: called inside ``with graph.as_default():`` (or a
            session's ``with`` block), where it would clear a graph in use.
    """
    global _default_graph
    if getattr(_local, "graphs", None):
        raise AssertionError(
            "Do not use tf.reset_default_graph() to clear nested graphs. If you need a "
            "cleared graph, exit the nesting and create a new graph."
        )
    from tf_accum.graph.graph import Graph

    with _default_graph_lock:
        _default_graph = Graph()
