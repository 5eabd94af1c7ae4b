"""benchmarks/ab.py's arithmetic and the benchmarks' ``--json`` figures (no timing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tf_accum
from benchmarks.ab import compare, fmt_seconds, load, save, split_argv
from benchmarks.harness import Figures


def rounds(*values: float) -> list[dict[tuple[str, str], float]]:
    return [{("apply", "tf_accum"): v, ("apply", "numpy"): 1.0} for v in values]


def test_ratios_are_this_tree_over_the_baseline() -> None:
    rows = compare(rounds(1.0, 2.0, 3.0), rounds(2.0, 2.0, 2.0), ["tf_accum"], 0.05)
    assert len(rows) == 1
    row, column, base, ours, ratio, paired, against, flag = rows[0]
    assert (row, column, base, ours) == ("apply", "tf_accum", "2 s", "2 s")
    assert ratio == "1.000"  # median 2 over median 2
    assert paired == "1.000"  # the round ratios 2, 1, 0.667
    assert against == "1.000"  # the numpy control stayed at 1
    assert flag == ""


def test_a_row_is_flagged_only_when_both_ratios_exceed_the_tolerance() -> None:
    slower = compare(rounds(1.0, 1.0, 1.0), rounds(1.1, 1.06, 1.2), ["tf_accum"], 0.05)
    assert slower[0][4:] == ["1.100", "1.100", "1.100", "SLOWER"]
    # the medians differ by 27%, but two rounds of three are even
    mixed = compare(rounds(1.0, 1.5, 2.0), rounds(1.9, 1.5, 2.0), ["tf_accum"], 0.05)
    assert mixed[0][4:] == ["1.267", "1.000", "1.000", ""]
    within = compare(rounds(1.0, 1.0), rounds(1.04, 1.04), ["tf_accum"], 0.05)
    assert within[0][7] == ""


def test_the_control_ratio_discounts_a_run_the_machine_slowed() -> None:
    base = [{("apply", "tf_accum"): 1.0, ("apply", "numpy"): 1.0}] * 3
    # every run of this tree was slowed by 20%, its numpy control with it
    ours = [{("apply", "tf_accum"): 1.2, ("apply", "numpy"): 1.2}] * 3
    row = compare(base, ours, None, 0.05)
    assert row[0][4:] == ["1.200", "1.200", "1.000", ""]
    assert row[1][1:] == ["numpy", "1 s", "1.2 s", "1.200", "1.200", "-", "(control)"]


def test_columns_select_what_is_compared() -> None:
    both = compare(rounds(1.0), rounds(1.0), None, 0.05)
    assert [(r[0], r[1]) for r in both] == [("apply", "tf_accum"), ("apply", "numpy")]
    assert compare(rounds(1.0), rounds(1.0), ["TF graph"], 0.05) == []


def test_three_significant_digits_in_a_fitting_unit() -> None:
    assert [fmt_seconds(s) for s in (2.5, 0.0123, 4.56e-6, 7.5e-7)] == [
        "2.5 s",
        "12.3 ms",
        "4.56 us",
        "750 ns",
    ]


@pytest.mark.parametrize(
    ("argv", "ours", "theirs"),
    [
        (["3be6be0", "benchmarks.bench_table"], ["3be6be0", "benchmarks.bench_table"], []),
        (
            ["HEAD", "benchmarks.bench_graph", "--rounds", "3", "--", "--no-tensorflow", "--"],
            ["HEAD", "benchmarks.bench_graph", "--rounds", "3"],
            ["--no-tensorflow", "--"],
        ),
    ],
)
def test_what_follows_the_first_double_dash_goes_to_the_benchmark(argv, ours, theirs) -> None:
    assert split_argv(argv) == (ours, theirs)


def test_figures_are_written_with_the_package_they_timed(tmp_path: Path) -> None:
    figures = Figures()
    figures.add("apply 1 float32", "tf_accum", 2.5e-5)
    figures.add("apply 1 float32", "TF graph", None)  # not run: left out
    figures.write(None)  # no --json: nothing written
    figures.write(str(tmp_path / "out.json"))
    found = json.loads((tmp_path / "out.json").read_text())
    assert found == {
        "tf_accum": tf_accum.__file__,
        "cells": [{"row": "apply 1 float32", "column": "tf_accum", "seconds": 2.5e-5}],
    }
    assert list(tmp_path.iterdir()) == [tmp_path / "out.json"]


def test_a_saved_run_loads_back_round_by_round(tmp_path: Path) -> None:
    figures = {"baseline": rounds(1.0, 2.0), "current": rounds(3.0, 4.0)}
    save(str(tmp_path / "run.json"), "3be6be0" * 5 + "3be6b", figures)
    assert load(str(tmp_path / "run.json")) == ("3be6be0" * 5 + "3be6b", figures)
