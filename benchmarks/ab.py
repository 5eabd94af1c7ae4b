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
ratio (this tree / baseline; above 1 is slower), the median of the rounds' own
ratios, and that median once each run's figure is divided by its row's bare
numpy control from the same run (``vs control``). A row whose ratios all exceed
``1 + --tolerance`` is flagged. The figures are only as steady as the machine:
on a loaded machine, read the control rows, which neither tree changes, for
the noise.
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


# Columns timing bare work that neither tree changes, in the order one is
# chosen as a row's control.
CONTROLS = ("numpy", "bare numpy", "bare function")


def compare(
    base: list[dict[tuple[str, str], float]],
    ours: list[dict[tuple[str, str], float]],
    columns: list[str] | None,
    tolerance: float,
) -> list[list[str]]:
    """Table rows: the medians of each side, their ratio, the median round
    ratio, the median round ratio against the row's control, and a flag.

    The control ratio divides each run's figure by its own control's (the
    row's bare-numpy work, timed in the same run) before comparing the trees,
    so that a run the machine slowed as a whole counts less. A row is flagged
    SLOWER when all its ratios exceed ``1 + tolerance``; a control row is
    marked as one, never flagged.
    """
    keys = [k for k in base[0] if k in ours[0] and (columns is None or k[1] in columns)]
    rows = []
    for key in keys:
        pairs = [(a[key], b[key]) for a, b in zip(base, ours, strict=True) if key in a and key in b]
        ratio = statistics.median(b for _, b in pairs) / statistics.median(a for a, _ in pairs)
        paired = statistics.median(b / a for a, b in pairs)
        found = [ratio, paired]
        control = next((c for c in CONTROLS if (key[0], c) in base[0]), None)
        against = "-"
        if control is not None and key[1] not in CONTROLS:
            ckey = (key[0], control)
            relative = statistics.median(
                (b[key] / b[ckey]) / (a[key] / a[ckey])
                for a, b in zip(base, ours, strict=True)
                if key in a and key in b and ckey in a and ckey in b
            )
            found.append(relative)
            against = f"{relative:.3f}"
        if key[1] in CONTROLS:
            flag = "(control)"  # its movement is the machine's, not the package's
        else:
            flag = "SLOWER" if all(r > 1 + tolerance for r in found) else ""
        rows.append(
            [
                key[0],
                key[1],
                fmt_seconds(statistics.median(a for a, _ in pairs)),
                fmt_seconds(statistics.median(b for _, b in pairs)),
                f"{ratio:.3f}",
                f"{paired:.3f}",
                against,
                flag,
            ]
        )
    return rows


def print_markdown(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


RunFigures = dict[tuple[str, str], float]


def run_rounds(
    commit: str, module: str, rounds: int, bench_args: list[str]
) -> dict[str, list[RunFigures]]:
    """Run ``module`` ``rounds`` times in each tree, alternating; the figures by side."""
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
        figures: dict[str, list[RunFigures]] = {"baseline": [], "current": []}
        for n in range(rounds):
            order = ["baseline", "current"] if n % 2 == 0 else ["current", "baseline"]
            for side in order:
                found = run_once(trees[side], module, bench_args, scratch / f"{side}.json")
                figures[side].append(found)
            print(f"round {n + 1} of {rounds} done", file=sys.stderr, flush=True)
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(baseline)],
            cwd=ROOT,
            check=False,
            capture_output=True,
        )
        shutil.rmtree(scratch, ignore_errors=True)
    return figures


def save(path: str, commit: str, figures: dict[str, list[RunFigures]]) -> None:
    """Write every round's figures, and the baseline's commit, to ``path`` (JSON)."""
    saved: dict[str, Any] = {
        side: [[[row, column, v] for (row, column), v in found.items()] for found in rounds]
        for side, rounds in figures.items()
    }
    Path(path).write_text(json.dumps({"revision": commit, **saved}, indent=1))


def load(path: str) -> tuple[str, dict[str, list[RunFigures]]]:
    """The baseline commit and the figures a run's ``--save`` wrote."""
    saved = json.loads(Path(path).read_text())
    figures = {
        side: [{(row, column): float(v) for row, column, v in found} for found in saved[side]]
        for side in ("baseline", "current")
    }
    return str(saved["revision"]), figures


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
    parser.add_argument(
        "--load", metavar="PATH", help="run nothing: print the table of a run --save wrote"
    )
    ours, bench_args = split_argv(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(ours)
    columns = [c for c in args.columns.split(",") if c] or None
    if args.load:
        commit, figures = load(args.load)
        rounds = len(figures["current"])
    else:
        commit = git("rev-parse", "--verify", args.revision + "^{commit}")
        figures = run_rounds(commit, args.module, args.rounds, bench_args)
        rounds = args.rounds
    if args.save:
        save(args.save, commit, figures)
    header = [
        "row",
        "column",
        "baseline",
        "this tree",
        "ratio",
        "round ratio",
        "vs control",
        "flag",
    ]
    rows = compare(figures["baseline"], figures["current"], columns, args.tolerance)
    title = (
        f"{args.module}: baseline {commit[:7]} vs this tree, medians of {rounds} "
        "alternating rounds (ratio = this tree / baseline)"
    )
    if args.markdown:
        print(title + "\n")
        print_markdown(header, rows)
    else:
        print_table(title, header, rows)


if __name__ == "__main__":
    main()
