"""Lower layers import no upper ones.

The package's layers, lowest first: shared pieces (errors, dtypes, shapes),
the accumulators, the resource tables, the raw ops (with the conversions of
values TensorFlow does before an op), the distributed tables, the graph mode
(whose TF1 clusters use the distributed tables), the compat classes, and on
top the examples, the launcher and the package's own ``__init__``. A module
may import its own layer and those below, never one above: every import
statement counts, including those inside functions (done lazily, they still
make the lower layer depend on the upper one).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tf_accum

PACKAGE = Path(tf_accum.__file__).parent

# module name prefixes, by layer (lowest first); a module is in the layer of
# its longest matching prefix
LAYERS: list[tuple[str, ...]] = [
    (
        "tf_accum.errors",
        "tf_accum.dtypes",
        "tf_accum.shapes",
        "tf_accum.context_blocks",
        "tf_accum.scipy_export",
    ),
    ("tf_accum.accumulators", "tf_accum.queues"),
    ("tf_accum.resources",),
    ("tf_accum.raw_ops", "tf_accum.indexed_slices", "tf_accum.tensor_conversion"),
    ("tf_accum.distributed",),
    ("tf_accum.graph",),
    ("tf_accum.compat", "tf_accum.sparse"),
    ("tf_accum.examples", "tf_accum.launch", "tf_accum"),
]

# Imports of an upper layer not yet inverted, each with the reason it is there
# (the test fails on one that is gone, so that the list cannot rot).
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _layer(module: str) -> int:
    best, layer = -1, len(LAYERS) - 1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, layer = len(prefix), index
    return layer


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path) for path in PACKAGE.rglob("*.py")}


def _imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                # ``from tf_accum.graph import mode`` depends on tf_accum.graph.mode
                submodule = f"{target}.{alias.name}"
                names.add(submodule if submodule in MODULES else target)
    return {name for name in names if name.startswith("tf_accum")}


def _upward_imports() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _layer(module)
        for name in _imported(tree, module, path.name == "__init__.py"):
            if _layer(name) > own:
                found.add((module, name))
    return found


def test_no_module_imports_an_upper_layer() -> None:
    upward = _upward_imports()
    assert upward - KNOWN_UPWARD == set(), "lower layers import upper ones"
    assert KNOWN_UPWARD - upward == set(), "no longer imported: take it off KNOWN_UPWARD"


def test_the_layers_are_told_apart() -> None:
    """The check above sees an upward import when there is one."""
    tree = ast.parse("from tf_accum.graph import mode\n")
    names = _imported(tree, "tf_accum.accumulators.dense", False)
    assert "tf_accum.graph.mode" in names
    assert _layer("tf_accum.graph.mode") > _layer("tf_accum.accumulators.dense")
    assert _layer("tf_accum.resources.current") > _layer("tf_accum.accumulators.base")
    assert _layer("tf_accum.errors") < _layer("tf_accum.accumulators")


def test_graph_mode_registers_with_the_op_layer_only_while_in_use() -> None:
    """The raw ops know no graph: graph mode installs its node builder in the
    op layer while a graph may be built, and removes it after, so an eager op
    consults nothing else (and ops inside a graph still build nodes). In a
    fresh process: other tests may leave eager execution off on purpose."""
    code = """
import tf_accum as tfa, tf_accum.compat.v1 as tf
from tf_accum.raw_ops import keyword_only
assert keyword_only._graph_builder is None
with tf.Graph().as_default():
    assert keyword_only._graph_builder is not None
    node = tfa.raw_ops.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])
assert isinstance(node, tf.Tensor)
assert keyword_only._graph_builder is None
handle = tfa.raw_ops.ResourceConditionalAccumulator(dtype=tfa.float32, shape=[1])
assert isinstance(handle, int)
tf.disable_eager_execution()
assert keyword_only._graph_builder is not None
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PACKAGE.parent, timeout=60)
