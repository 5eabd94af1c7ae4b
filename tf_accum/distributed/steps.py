"""The steps a host runs: the parts every host knows (raw ops and constructors).

A request to a host is a list of steps in dependency order. ``(MAKE, op_type,
op_name, attrs)`` makes a resource (an accumulator, a queue) and ``(RAW,
op_type, input_names, attrs, sources, n_outputs)`` calls a raw op; other kinds
of step (a TF1 cluster's variables, training ops and graph kernels: see
``tf_accum.graph.host_steps``) are run by the step runner the host was made
with. Each source says where an input comes from: ``(VALUE, value)`` in the
steps, ``(STEP, index, output)`` an earlier step's output, or ``(SLOT, index)``
the request's values (what changes from run to run).
"""

from __future__ import annotations

from typing import Any

from tf_accum import raw_ops
from tf_accum.raw_ops.op_table import COMPONENT_TYPES, COMPONENTS
from tf_accum.raw_ops.op_table import OPS as NODE_SPECS

# Step kinds (the first element of every step) a host runs itself.
MAKE, RAW = "make", "raw"
# Where a step's input comes from: a value in the steps, an earlier step's output, or
# a slot of the values sent with the request (what changes from run to run).
VALUE, STEP, SLOT = "v", "s", "i"

# The queue ops: a queue on a host is one queue for every process that uses it, as an
# accumulator is.
QUEUE_TYPES = frozenset(name for name in NODE_SPECS if "Queue" in name)


class RawStep:
    """A RAW step, decoded: its kernel, which inputs are the handle and the count, and
    for a queue op its type and whether its components are a list input or its outputs."""

    __slots__ = (
        "op_type",
        "kernel",
        "names",
        "attrs",
        "sources",
        "n_outputs",
        "take",
        "handle",
        "required",
        "local_step",
        "queue_op",
        "listed_input",
        "listed_outputs",
    )

    def __init__(self, step: tuple[Any, ...]) -> None:
        _, self.op_type, self.names, self.attrs, self.sources, self.n_outputs = step
        op_type: str = self.op_type
        self.kernel = getattr(raw_ops, op_type)
        self.take: bool = "timeout" in self.attrs
        self.handle: int | None = self.names.index("handle") if "handle" in self.names else None
        self.required: int | None = (
            self.names.index("num_required") if "num_required" in self.names else None
        )
        # an accumulator's apply: where its local step is (the host notes who sent what)
        self.local_step: int | None = (
            self.names.index("local_step") if "local_step" in self.names else None
        )
        spec = NODE_SPECS[op_type]
        self.queue_op: str | None = op_type if op_type in QUEUE_TYPES else None
        # an enqueue's components: the inputs from the last name on
        self.listed_input = any(kind == COMPONENTS for _, kind in spec.inputs)
        # a dequeue's components: one output each
        self.listed_outputs = spec.outputs == (COMPONENT_TYPES,)

    def arguments(self, inputs: list[Any]) -> dict[str, Any]:
        """The raw op's keyword arguments for these input values (attributes apart)."""
        if not self.listed_input:
            return dict(zip(self.names, inputs, strict=True))
        last = len(self.names) - 1
        found = dict(zip(self.names[:last], inputs[:last], strict=True))
        found[self.names[last]] = list(inputs[last:])
        return found


def decode(step: tuple[Any, ...]) -> Any:
    """A step as the host runs it: a RawStep for a RAW step, else the step itself."""
    return RawStep(step) if step[0] == RAW else step


def inputs_of(
    sources: tuple[Any, ...], outputs: list[tuple[Any, ...]], slots: list[Any]
) -> list[Any]:
    """A step's input values, given the outputs of the steps before it and the slots."""
    found = []
    for source in sources:
        kind = source[0]
        if kind == STEP:
            found.append(outputs[source[1]][source[2]])
        elif kind == SLOT:
            found.append(slots[source[1]])
        else:
            found.append(source[1])
    return found
