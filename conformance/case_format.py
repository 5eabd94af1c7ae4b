"""The case file format, and its parser.

A case file holds cases; each starts with a header line and continues with
indented statements, one per line::

    case D02 dense: MEAN of two gradients
        a = ResourceConditionalAccumulator(dtype=float32, shape=[2])
        ResourceAccumulatorApplyGradient(handle=a, local_step=0, gradient=f32([1, 2]))
        ResourceAccumulatorTakeGradient(handle=a, num_required=1, dtype=float32) => f32([1, 2])
        t = background(ResourceAccumulatorTakeGradient(handle=a, num_required=1, dtype=float32))
        t => BLOCKED
        q = compat.ConditionalAccumulator(float32, shape=[2])
        q.take_grad(1.0) => TypeError("Expected int32")
        close()

A statement is a call of a raw op (by TensorFlow's name), of ``compat.<Class>``
or of a method of an object made earlier (an argument may name an attribute of
one: ``var=v.handle``), an attribute read, or the name of a
background call (to check it). ``=> expectation`` states what must come of it:
a typed value (``f32([..])``, ``i32(0)``, ...), a list of typed values (a
queue's dequeue: one per component), ``sparse(indices=.., values=..,
shape=..)``, an error class with a substring of its message,
``BLOCKED``, ``OK``, or a plain literal. Without ``=>`` the statement must
succeed. Everything is parsed with ``ast``; nothing is evaluated.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CASES_DIR = Path(__file__).parent / "cases"
GRAPH_ONLY_AREAS = {"ref"}

TYPED = {
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "c64": "complex64", "c128": "complex128", "i8": "int8", "i16": "int16", "i32": "int32",
    "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
}  # fmt: skip
DTYPE_NAMES = {
    "float16", "half", "bfloat16", "float32", "float64", "double", "complex64", "complex128",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "qint8",
    "quint8", "qint16", "quint16", "qint32", "bool", "string",
}  # fmt: skip


@dataclass(frozen=True)
class Typed:
    """A value with an explicit dtype: ``f32([1, 2])``."""

    dtype: str
    value: Any
    shape: tuple[int, ...] | None = None  # given when the value alone cannot say (zeros([0, 2]))


@dataclass(frozen=True)
class DType:
    """A dtype given by name, as an attribute: ``dtype=float32``."""

    name: str


@dataclass(frozen=True)
class Ref:
    """A name bound by an earlier statement, or an attribute of one (``v.handle``)."""

    name: str

    def resolve(self, env: dict[str, Any]) -> Any:
        name, _, attribute = self.name.partition(".")
        found = env[name]
        return getattr(found, attribute) if attribute else found


@dataclass(frozen=True)
class Slices:
    """``IndexedSlices(values=.., indices=.., dense_shape=..)``."""

    values: Any
    indices: Any
    dense_shape: Any = None


@dataclass(frozen=True)
class Call:
    """A call: a raw op (``target`` is its name), ``compat.<Class>``, or a method."""

    target: str  # "ResourceConditionalAccumulator", "compat.ConditionalAccumulator", "q.apply_grad"
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Expect:
    kind: str  # "value" | "components" | "sparse" | "error" | "blocked" | "ok" | "literal"
    value: Any = None
    error: str = ""
    message: str = ""


@dataclass
class Statement:
    line: int
    text: str
    action: str  # "call" | "background" | "attribute" | "check" | "close"
    call: Call | None = None
    bind: str | None = None
    subject: str | None = None  # for attribute reads and checks: "q.name" / "t"
    expect: Expect | None = None


@dataclass
class Case:
    id: str
    area: str
    title: str
    file: str
    statements: list[Statement] = field(default_factory=list)
    # False for generated sequences: their expectation is TensorFlow's recorded outcome
    require_success: bool = True

    @property
    def graph_only(self) -> bool:
        """Ops that exist only in graph mode (the training ops' ref forms): the
        eager backends do not run the case."""
        return self.area in GRAPH_ONLY_AREAS


class CaseSyntaxError(ValueError):
    pass


def _literal(node: ast.expr, where: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _literal(node.operand, where)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Pow, ast.Sub, ast.Add, ast.Mult)):
        left, right = _literal(node.left, where), _literal(node.right, where)
        ops: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
            ast.Pow: pow, ast.Sub: lambda a, b: a - b, ast.Add: lambda a, b: a + b,
            ast.Mult: lambda a, b: a * b,
        }  # fmt: skip
        return ops[type(node.op)](left, right)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(e, where) for e in node.elts]
    if isinstance(node, ast.Name):
        if node.id in DTYPE_NAMES:
            return DType(node.id)
        if node.id in ("nan", "inf"):
            return float(node.id)
        if node.id == "None":
            return None
        return Ref(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return Ref(f"{node.value.id}.{node.attr}")  # ``v.handle``: an attribute of a result
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name in TYPED and len(node.args) == 1 and not node.keywords:
            return Typed(TYPED[name], _literal(node.args[0], where))
        if name == "IndexedSlices":
            kw = {str(k.arg): _literal(k.value, where) for k in node.keywords}
            return Slices(**kw)
        if name in ("zeros", "ones"):
            shape, dtype = (_literal(a, where) for a in node.args)
            fill = 0 if name == "zeros" else 1
            return Typed(dtype.name, _filled(shape, fill), tuple(shape))
    raise CaseSyntaxError(f"{where}: not a literal: {ast.unparse(node)}")


def _filled(shape: list[int], fill: int) -> Any:
    if not shape:
        return fill
    return [_filled(shape[1:], fill) for _ in range(shape[0])]


def _call(node: ast.expr, where: str) -> Call:
    if not isinstance(node, ast.Call):
        raise CaseSyntaxError(f"{where}: expected a call")
    func = node.func
    plain = isinstance(func, ast.Name)
    dotted = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
    if not (plain or dotted):
        raise CaseSyntaxError(f"{where}: call an op, compat.<Class> or <object>.<method>")
    target = ast.unparse(func)
    args = tuple(_literal(a, where) for a in node.args)
    kwargs = {k.arg: _literal(k.value, where) for k in node.keywords if k.arg}
    return Call(target, args, kwargs)


def _expect(text: str, where: str) -> Expect:
    node = ast.parse(text.strip(), mode="eval").body
    if isinstance(node, ast.Name) and node.id in ("BLOCKED", "OK"):
        return Expect("blocked" if node.id == "BLOCKED" else "ok")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name.endswith("Error") or name == "Error":
            message = _literal(node.args[0], where) if node.args else ""
            return Expect("error", error=name, message=message)
        if name == "sparse":
            kw = {k.arg: _literal(k.value, where) for k in node.keywords}
            return Expect("sparse", value=kw)
    value = _literal(node, where)
    if isinstance(value, list) and value and all(isinstance(v, Typed) for v in value):
        return Expect("components", value=value)  # a queue's dequeue: one value per component
    return Expect("value" if isinstance(value, Typed) else "literal", value=value)


_HEADER = re.compile(r"^case\s+(\S+)\s+(\w+):\s*(.*)$")


def parse_file(path: Path) -> list[Case]:
    cases: list[Case] = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{path.name}:{number}"
        header = _HEADER.match(line)
        if header:
            cases.append(Case(header[1], header[2], header[3], path.name))
            continue
        if not line.startswith((" ", "\t")) or not cases:
            raise CaseSyntaxError(f"{where}: statement outside a case")
        cases[-1].statements.append(parse_statement(stripped, number, where))
    return cases


def parse_statement(text: str, number: int, where: str) -> Statement:
    body, _, expectation = text.partition(" => ")
    expect = _expect(expectation, where) if expectation else None
    try:
        node = ast.parse(body, mode="exec").body[0]
    except SyntaxError as exc:
        raise CaseSyntaxError(f"{where}: {exc.msg}") from None
    bind = None
    if isinstance(node, ast.Assign):
        bind = ast.unparse(node.targets[0])
        value = node.value
    elif isinstance(node, ast.Expr):
        value = node.value
    else:
        raise CaseSyntaxError(f"{where}: unexpected statement")
    if isinstance(value, ast.Call) and ast.unparse(value.func) == "background":
        return Statement(
            number, text, "background", _call(value.args[0], where), bind, None, expect
        )
    if isinstance(value, ast.Call) and ast.unparse(value.func) == "close":
        return Statement(number, text, "close", None, None, None, expect)
    if isinstance(value, ast.Call):
        return Statement(number, text, "call", _call(value, where), bind, None, expect)
    if isinstance(value, ast.Attribute):
        return Statement(number, text, "attribute", None, bind, ast.unparse(value), expect)
    if isinstance(value, ast.Name):
        return Statement(number, text, "check", None, None, value.id, expect)
    raise CaseSyntaxError(f"{where}: unexpected statement {body!r}")


def load_cases() -> list[Case]:
    """Every case of every file, plus the seeded random sequences."""
    from conformance.random_cases import random_cases

    cases: list[Case] = []
    for path in sorted(CASES_DIR.glob("*.cases")):
        cases.extend(parse_file(path))
    cases.extend(random_cases())
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise CaseSyntaxError(f"duplicate case id {case.id}")
        seen.add(case.id)
    return cases
