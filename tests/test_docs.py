"""The departures have one numbering, in the repository, and everything cites it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tf_accum as tfa

ROOT = Path(__file__).resolve().parent.parent
DEPARTURES = (ROOT / "docs" / "departures.md").read_text()
NUMBERS = [f"T{n}" for n in range(1, 34)]
SOURCES = [
    p
    for folder in ("tf_accum", "tests", "conformance", "benchmarks", "docs")
    for p in sorted((ROOT / folder).rglob("*"))
    if p.suffix in (".py", ".md", ".txt", ".cases")
] + [ROOT / "README.md", ROOT / "pyproject.toml"]


def cited_numbers(text: str) -> set[str]:
    """T-numbers in "docs/departures.md T5-T8, T11" citations, ranges expanded."""
    found: set[str] = set()
    for cite in re.findall(r"docs/departures\.md ((?:T\d+(?:-T\d+)?(?:, )?)+)", text):
        for part in re.findall(r"T(\d+)(?:-T(\d+))?", cite):
            low, high = int(part[0]), int(part[1] or part[0])
            found.update(f"T{n}" for n in range(low, high + 1))
    return found


def test_the_page_gives_every_departure_in_order() -> None:
    headings = re.findall(r"^## (T\d+): ", DEPARTURES, re.M)
    assert headings == NUMBERS


def test_the_readme_lists_the_same_numbers_and_titles_and_links_the_page() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Where tf_accum departs from TensorFlow", 1)[1].split("\n## ")[0]
    rows = re.findall(r"^\| (T\d+) \| (.*) \|$", section, re.M)
    assert rows == re.findall(r"^## (T\d+): (.*)$", DEPARTURES, re.M)
    assert [number for number, _ in rows] == NUMBERS
    assert "(docs/departures.md)" in section


def test_every_citation_and_xfail_group_names_a_departure() -> None:
    cited: set[str] = set()
    for path in SOURCES:
        cited |= cited_numbers(path.read_text())
    assert cited and cited <= set(NUMBERS)
    xfails = (ROOT / "conformance" / "tensorflow-xfails.txt").read_text()
    groups = set(re.findall(r"^# (T\d+):", xfails, re.M))
    assert groups and groups <= set(NUMBERS)


def test_nothing_cites_documents_outside_the_repository() -> None:
    outside = re.compile(r"behaviour\.md|cases\.md|decisions\.md|decisions T\d")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in SOURCES
        if path.name != "test_docs.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if outside.search(line)
    ]
    assert offenders == []


def test_docstrings_are_written_where_the_function_is() -> None:
    # a docstring kept in a variable and assigned later is invisible to tools
    # (a wrapper copying its wrapped function's __doc__ is fine)
    for path in sorted((ROOT / "tf_accum").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "__doc__" for t in node.targets
            ):
                assert not isinstance(node.value, (ast.Constant, ast.Name)), (path, node.lineno)
    for name in tfa.raw_ops.__all__:
        op = getattr(tfa.raw_ops, name)
        source = Path(op.__wrapped__.__code__.co_filename).read_text()
        (node,) = [
            n
            for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.FunctionDef) and n.name == name
        ]
        assert ast.get_docstring(node), name
        assert op.__doc__ == op.__wrapped__.__doc__, name
