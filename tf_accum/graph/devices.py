"""Device strings and ``device(...)`` scopes: where a TF1 program places its ops.

A device string names a job, replica, task and device, each part optional
(``"/job:ps/task:1"``, ``"/cpu:0"``); ops record it, in TensorFlow's
canonical spelling, as ``op.device``. Scopes nest: a device string fills in
only the parts the op's device (set by inner scopes) leaves open, a device
function returns the op's whole device, and ``device(None)`` stops the outer
scopes from applying.

Where an op runs follows from its device only in a session on a cluster's
target (see ``tf_accum.graph.cluster``); a local ``Session`` runs every op in
its own process whatever its device says.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tf_accum.graph import mode

if TYPE_CHECKING:
    from tf_accum.graph.graph import Graph, Operation

DEVICE_TYPES = ("CPU", "GPU", "TPU")


@dataclass(frozen=True)
class DeviceSpec:
    """The parts of a device string; None where the string leaves a part open.

    ``device_index`` None with a ``device_type`` is ``*`` (any device of that type).
    """

    job: str | None = None
    replica: int | None = None
    task: int | None = None
    device_type: str | None = None
    device_index: int | None = None

    @classmethod
    def from_string(cls, spec: str | None) -> DeviceSpec:
        """Parse ``"/job:ps/replica:0/task:1/device:CPU:0"`` and its shorter spellings.

        Raises:
            ValueError: an unknown part (``"/foo:1"``), a task or replica
                that is not an integer, or two device types.
        """
        job: str | None = None
        replica = task = index = None
        device_type: str | None = None
        for part in (spec or "").split("/"):
            fields = part.split(":")
            count = len(fields)
            if count == 2 and fields[0] == "job":
                job = fields[1]
            elif count == 2 and fields[0] == "replica":
                replica = _integer(fields[1], "replica", spec)
            elif count == 2 and fields[0] == "task":
                task = _integer(fields[1], "task", spec)
            elif count in (1, 2) and fields[0].upper() in DEVICE_TYPES:
                _one_device_type(device_type, spec)
                device_type = fields[0].upper()
                index = (
                    None if count == 1 or fields[1] == "*" else _integer(fields[1], "device", spec)
                )
            elif count == 3 and fields[0] == "device":
                _one_device_type(device_type, spec)
                device_type = fields[1].upper() if fields[1].upper() in DEVICE_TYPES else fields[1]
                index = None if fields[2] == "*" else _integer(fields[2], "device", spec)
            elif fields[0]:
                raise ValueError(
                    f"Unknown attribute '{fields[0]}' is encountered while parsing the device "
                    f"spec: '{spec}' (expected parts such as /job:NAME, /replica:N, /task:N, "
                    "/device:CPU:N or /cpu:N)."
                )
        return cls(job, replica, task, device_type, index)

    def to_string(self) -> str:
        """The canonical spelling: ``/job:J/replica:R/task:T/device:TYPE:N``, open parts left out."""
        parts = []
        if self.job is not None:
            parts.append(f"/job:{self.job}")
        if self.replica is not None:
            parts.append(f"/replica:{self.replica}")
        if self.task is not None:
            parts.append(f"/task:{self.task}")
        if self.device_type is not None:
            index = "*" if self.device_index is None else str(self.device_index)
            parts.append(f"/device:{self.device_type}:{index}")
        return "".join(parts)

    def make_merged_spec(self, other: DeviceSpec) -> DeviceSpec:
        """This spec with every part ``other`` sets taken from ``other``."""
        merged = self
        if other.job is not None:
            merged = replace(merged, job=other.job)
        if other.replica is not None:
            merged = replace(merged, replica=other.replica)
        if other.task is not None:
            merged = replace(merged, task=other.task)
        if other.device_type is not None:
            merged = replace(merged, device_type=other.device_type, device_index=other.device_index)
        return merged

    def replace(self, **parts: Any) -> DeviceSpec:
        return replace(self, **parts)


def _integer(text: str, part: str, spec: str | None) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"invalid literal for int() with base 10: '{text}' (the {part} part of device "
            f"spec '{spec}' must be an integer)"
        ) from None


def _one_device_type(found: str | None, spec: str | None) -> None:
    if found is not None:
        raise ValueError(
            f"Multiple device types are not allowed while parsing the device spec: {spec}."
        )


def canonical(device: str | None) -> str:
    """``device`` in TensorFlow's canonical spelling (``"/cpu:0"`` -> ``"/device:CPU:0"``)."""
    return DeviceSpec.from_string(device).to_string()


# One entry of a graph's device stack: a parsed string, a function, or None (a break).
DeviceEntry = DeviceSpec | Callable[..., Any] | None


def as_entry(device_name_or_function: Any) -> tuple[DeviceEntry, bool]:
    """(entry, whether it is a no-op) for what ``device(...)`` was given.

    Raises:
        TypeError: neither a string, a DeviceSpec, a callable nor None.
        ValueError: a string that does not parse.
    """
    given = device_name_or_function
    if given is None:
        return None, False
    if isinstance(given, DeviceSpec):
        return given, given == DeviceSpec()
    if callable(given):
        return given, False
    if isinstance(given, bytes):
        given = given.decode()
    if not isinstance(given, str):
        raise TypeError(
            f"device() takes a device string, a DeviceSpec, a function of an op or None, not "
            f"{type(given).__name__} ({given!r})."
        )
    spec = DeviceSpec.from_string(given)
    return spec, spec == DeviceSpec()


def apply_device_stack(op: Operation, stack: list[DeviceEntry]) -> None:
    """Set ``op``'s device from the scopes around it, innermost first, as TensorFlow does.

    Raises:
        TypeError: a device function returned something other than a string.
    """
    for entry in reversed(stack):
        if entry is None:
            break
        if isinstance(entry, DeviceSpec):
            current = DeviceSpec.from_string(op.device)
            op._set_device(entry.make_merged_spec(current).to_string())
            continue
        chosen = entry(op)
        if isinstance(chosen, DeviceSpec):
            chosen = chosen.to_string()
        if isinstance(chosen, bytes):
            chosen = chosen.decode()
        if not isinstance(chosen, str):
            raise TypeError(
                f"Expected binary or unicode string, got {chosen!r}: a device function must "
                "return a device string"
            )
        op._set_device(canonical(chosen))


@contextlib.contextmanager
def device_scope(graph: Graph, device_name_or_function: Any) -> Iterator[None]:
    entry, no_op = as_entry(device_name_or_function)
    stack = graph._build.devices
    if no_op:
        yield
        return
    stack.append(entry)
    try:
        yield
    finally:
        stack.pop()


def device(device_name_or_function: Any) -> Any:
    """Place the ops built inside on a device: ``with tf.device("/job:ps/task:0"):``.

    Args:
        device_name_or_function: a device string (parts it leaves open are
            filled in by enclosing scopes), a function taking the Operation
            and returning its device string (as ``replica_device_setter``
            returns), or None (enclosing scopes stop applying).

    Returns:
        A context manager. Eagerly (no graph being built) it changes nothing.

    Raises:
        TypeError: anything else as the argument.
        ValueError: a device string that does not parse.
    """
    graph = mode.building_graph()
    if graph is None:
        as_entry(device_name_or_function)  # checked eagerly too
        return contextlib.nullcontext()
    return device_scope(graph, device_name_or_function)
