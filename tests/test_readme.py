"""The README as a front door: every snippet runs as written after the command
above it, every link leads somewhere, and the manual's snippets run too."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import re
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_main_job_processes import processes_marked
from tf_accum import errors

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PYPROJECT = (ROOT / "pyproject.toml").read_text()


def _lists(text: str) -> dict[str, list[str]]:
    """``name = ["...", ...]`` lines of pyproject.toml (tomllib needs Python 3.11)."""
    return {k: ast.literal_eval(v) for k, v in re.findall(r"^(\w+) = (\[.*\])$", text, re.M)}


EXTRAS = _lists(PYPROJECT.split("[project.optional-dependencies]")[1].split("\n[")[0])
BASE = _lists(PYPROJECT.split("[project]")[1].split("\n[")[0])["dependencies"]
CHILD_TIMEOUT = 300
# what a snippet may import besides the standard library, by distribution name
IMPORT_NAMES: dict[str, str | None] = {"tf_accum": None, "scipy": "scipy", "numpy": "numpy", "ml_dtypes": "ml_dtypes",
                "tqdm": "tqdm", "matplotlib": "matplotlib", "ray": "ray", "torch": "torch",
                "jax": "jax"}  # fmt: skip


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(offset, code) of every ```python block."""
    return [(m.start(), m.group(1)) for m in re.finditer(r"```python\n(.*?)```", text, re.S)]


def command_above(offset: int) -> str:
    """The nearest install command above ``offset``, but the test command's (which
    installs every extra, for developers): what a user ran before the snippet."""
    commands = [
        m
        for m in re.finditer(r"^    (.*pip install .*)$", README, re.M)
        if m.start() < offset and not m.group(1).endswith("pytest")
    ]
    assert commands, "a snippet comes before any install command"
    return commands[-1].group(1)


def installed_by(command: str) -> set[str]:
    """The distributions a README command installs: the base ones and its extras'."""
    extras = re.search(r"'\.\[([\w,]+)\]'", command)
    names = [*BASE]
    for extra in extras.group(1).split(",") if extras else []:
        names += EXTRAS[extra]
    return {re.split(r"[<>=\[ ]", name, maxsplit=1)[0] for name in names}


def needed_by(code: str) -> set[str]:
    needed: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            tops = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            tops = [node.module.split(".")[0]]
        else:
            continue
        for top in tops:
            if top in sys.stdlib_module_names:
                continue
            assert top in IMPORT_NAMES, f"a README snippet imports {top}: add it to IMPORT_NAMES"
            distribution = IMPORT_NAMES[top]
            if distribution is not None:
                needed.add(distribution)
    if "distributed.connect" in code or "TF_ACCUM_RAY_ADDRESS" in code:
        needed.add("ray")
    return needed


def run_child(code: str, marker: str) -> tuple[subprocess.CompletedProcess[str], set[int]]:
    """The snippet's run, and the processes it left running (killed here, by pid)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TF_ACCUM_RAY"))}
    env.update(PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0", TF_ACCUM_TEST_MARKER=marker)
    left: set[int] = set()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=CHILD_TIMEOUT,
        )  # fmt: skip
    finally:
        left = processes_marked(marker)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return done, left


def expected_lines(code: str) -> list[str]:
    """What ``print(...)  # shown`` lines say they print: the comment, less a
    remark in brackets after two spaces or after a colon."""
    found = re.findall(r"^\s*print\(.*\)  # (.*)$", code, re.M)
    return [re.split(r"  \(|: (?=[a-z])", comment, maxsplit=1)[0] for comment in found]


BLOCKS = python_blocks(README)


def test_the_readme_has_the_front_door_snippets() -> None:
    assert len(BLOCKS) == 3  # eager quickstart, TF1, Ray
    assert len(README.splitlines()) < 200


@pytest.mark.parametrize(("offset", "code"), BLOCKS, ids=["quickstart", "tf1", "ray"])
def test_every_readme_snippet_runs_after_the_command_above_it(offset: int, code: str) -> None:
    command = command_above(offset)
    missing = needed_by(code) - installed_by(command)
    assert not missing, f"the snippet needs {missing}, which {command!r} does not install"
    absent = sorted(m for m in needed_by(code) if importlib.util.find_spec(m) is None)
    if absent:
        pytest.skip(f"this environment lacks {absent} (the oldest-numpy run installs no extras)")
    marker = f"readme-{secrets.token_hex(8)}"
    done, left = run_child(code, marker)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == expected_lines(code)
    assert not left, f"processes the snippet started are still running: {left}"


def test_a_snippet_needing_an_extra_the_command_lacks_is_caught() -> None:
    scipy_snippet = "import scipy.sparse\nimport tf_accum as tfa\n"
    main_command = re.search(r"^    (python3 -m venv .*python -m tf_accum)$", README, re.M)
    assert main_command is not None
    assert needed_by(scipy_snippet) - installed_by(main_command.group(1)) == {"scipy"}


def test_every_relative_link_leads_to_a_file() -> None:
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if "://" in target:
                continue
            assert (path.parent / target).exists(), f"{path.relative_to(ROOT)}: {target}"


def test_the_readme_links_every_page_of_the_manual() -> None:
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)\)", README))
    assert pages == linked


DOC_BLOCKS = [
    (path.relative_to(ROOT).as_posix(), code)
    for path in sorted((ROOT / "docs").rglob("*.md"))
    for _, code in python_blocks(path.read_text())
]


@pytest.mark.parametrize(("page", "code"), DOC_BLOCKS, ids=[p for p, _ in DOC_BLOCKS])
def test_every_snippet_of_the_manual_runs(page: str, code: str) -> None:
    absent = sorted(m for m in needed_by(code) if importlib.util.find_spec(m) is None)
    if absent:
        pytest.skip(f"this environment lacks {absent} (the oldest-numpy run installs no extras)")
    marker = f"docs-{secrets.token_hex(8)}"
    done, left = run_child(code, marker)
    assert done.returncode == 0, f"{page}: {done.stderr[-3000:]}"
    assert done.stdout.splitlines() == expected_lines(code)
    assert not left, f"{page}: processes the snippet started are still running: {left}"


def test_the_readme_shows_the_cluster_the_connect_error_points_to() -> None:
    connect = importlib.import_module("tf_accum.distributed.connect")
    with pytest.raises(errors.UnavailableError) as caught:
        connect._check_reachable("127.0.0.1:9", 1.0)  # nothing listens on the discard port
    assert "the README's 'Across processes' section" in caught.value.message
    section = README.split("## Across processes")[1].split("\n## ")[0]
    shell = re.findall(r"^    (.*)$", section, re.M)
    assert any("RAY_AUTH_TOKEN=" in line for line in shell), section
    assert any(
        line.startswith("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 ray start --head")
        and "--node-ip-address 127.0.0.1" in line
        for line in shell
    ), section
    assert any(line.startswith("TF_ACCUM_RAY_ADDRESS=127.0.0.1:") for line in shell), section
