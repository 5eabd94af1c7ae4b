"""A/B: a benchmark's rows timed on a baseline revision and on this tree, alternately.

Run: ``python -m benchmarks.ab REVISION benchmarks.bench_table [--rounds N]
[--markdown] -- --no-tensorflow --repeat 5`` (what follows ``--`` goes to the
benchmark). The benchmark module must take ``--json PATH`` (see
``benchmarks.harness.Figures``); bench_table and bench_graph do.

``REVISION`` (any git revision of this repository) is checked out into a
temporary ``git worktree``, removed at the end. Its ``benchmarks/`` is replaced
by this tree's, so that both sides run the same measuring code and only the
package differs. Each round runs the benchmark once in each tree, each time in
a fresh interpreter whose ``PYTHONPATH`` (and working directory) is that tree;
the order within a round alternates (baseline first, then this tree first), so
that a neighbour's load, or the machine warming up, falls on both sides alike.
Every run checks that it timed the tree it was meant to.

Printed per row and column: the median over the rounds on each side and their
ratio (this tree / baseline; above 1 is slower), and the median of the rounds'
own ratios. A row whose two ratios both exceed ``1 + --tolerance`` is flagged.
The figures are only as steady as the machine: on a loaded machine, read the
bare-numpy columns, which neither tree changes, for the noise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import print_table

ROOT = Path(__file__).resolve().parent.parent


def fmt_seconds(seconds: float) -> str:
    """Three significant digits, in the unit that suits (a ratio of 1.03 needs them)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def run_once(
    tree: Path, module: str, bench_args: list[str], out: Path
) -> dict[tuple[str, str], float]:
    """Run ``module`` in ``tree`` in a fresh interpreter; its figures by (row, column)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    subprocess.run(
        [sys.executable, "-m", module, *bench_args, "--json", str(out)],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    found = json.loads(out.read_text())
    timed = Path(found["tf_accum"]).resolve()
    if tree.resolve() not in timed.parents:
        raise RuntimeError(f"the run in {tree} timed the package at {timed}")
    return {(c["row"], c["column"]): float(c["seconds"]) for c in found["cells"]}


def compare(
    base: list[dict[tuple[str, str], float]],
    ours: list[dict[tuple[str, str], float]],
    columns: list[str] | None,
    tolerance: float,
) -> list[list[str]]:
    """Table rows: the medians of each side, their ratio, the median round ratio, a flag."""
    keys = [k for k in base[0] if k in ours[0] and (columns is None or k[1] in columns)]
    rows = []
    for key in keys:
        a = [r[key] for r in base if key in r]
        b = [r[key] for r in ours if key in r]
        ratio = statistics.median(b) / statistics.median(a)
        paired = statistics.median(y / x for x, y in zip(a, b, strict=False))
        slower = ratio > 1 + tolerance and paired > 1 + tolerance
        rows.append(
            [
                key[0],
                key[1],
                fmt_seconds(statistics.median(a)),
                fmt_seconds(statistics.median(b)),
                f"{ratio:.3f}",
                f"{paired:.3f}",
                "SLOWER" if slower else "",
            ]
        )
    return rows


def print_markdown(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """ab's own arguments, and the benchmark's (those after the first ``--``)."""
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("revision", help="the baseline: any git revision of this repository")
    parser.add_argument("module", help="the benchmark module, e.g. benchmarks.bench_table")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--columns",
        default="tf_accum,numpy,bare numpy,bare function",
        help="comma-separated columns to compare ('' for every column)",
    )
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--save", metavar="PATH", help="write every round's figures to PATH")
    ours, bench_args = split_argv(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(ours)
    columns = [c for c in args.columns.split(",") if c] or None
    commit = git("rev-parse", "--verify", args.revision + "^{commit}")

    scratch = Path(tempfile.mkdtemp(prefix="tf_accum_ab_"))
    baseline = scratch / "baseline"
    git("worktree", "add", "--detach", str(baseline), commit)
    try:
        shutil.rmtree(baseline / "benchmarks")
        shutil.copytree(
            ROOT / "benchmarks",
            baseline / "benchmarks",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        trees = {"baseline": baseline, "current": ROOT}
        figures: dict[str, list[dict[tuple[str, str], float]]] = {"baseline": [], "current": []}
        for n in range(args.rounds):
            order = ["baseline", "current"] if n % 2 == 0 else ["current", "baseline"]
            for side in order:
                found = run_once(trees[side], args.module, bench_args, scratch / f"{side}.json")
                figures[side].append(found)
            print(f"round {n + 1} of {args.rounds} done", file=sys.stderr, flush=True)
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(baseline)],
            cwd=ROOT,
            check=False,
            capture_output=True,
        )
        shutil.rmtree(scratch, ignore_errors=True)

    if args.save:
        saved: dict[str, Any] = {
            side: [[[k[0], k[1], v] for k, v in r.items()] for r in rounds]
            for side, rounds in figures.items()
        }
        Path(args.save).write_text(json.dumps({"baseline": commit, **saved}, indent=1))
    header = ["row", "column", "baseline", "this tree", "ratio", "round ratio", "flag"]
    rows = compare(figures["baseline"], figures["current"], columns, args.tolerance)
    title = (
        f"{args.module}: baseline {commit[:7]} vs this tree, medians of {args.rounds} "
        "alternating rounds (ratio = this tree / baseline)"
    )
    if args.markdown:
        print(title + "\n")
        print_markdown(header, rows)
    else:
        print_table(title, header, rows)


if __name__ == "__main__":
    main()
