"""``python -m tf_accum``: the synchronous-replicas job end to end, its figure and summary."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import statistics
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tf_accum import errors
from tf_accum.examples import progress as progress_module
from tf_accum.examples.config import JobConfig
from tf_accum.examples.records import RunResult, StepRecord
from tf_accum.examples.sync_replicas import build_parser, main, run

ROOT = Path(__file__).resolve().parent.parent
FAST = ["--compute-ms", "0.2", "--quiet"]


def png_chunks(path: Path) -> list[tuple[bytes, bytes]]:
    """The chunks of a PNG file, each CRC checked."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    chunks = []
    at = 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind!r}"
        chunks.append((kind, body))
        at += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    return chunks


def png_text(path: Path) -> dict[str, str]:
    texts = {}
    for kind, body in png_chunks(path):
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            texts[key.decode("latin-1")] = value.decode("latin-1")
    return texts


def run_main(args: list[str]) -> tuple[RunResult, str]:
    out = io.StringIO()
    result = main(args, stdout=out)
    return result, out.getvalue()


def check_accounting(result: RunResult, config: JobConfig) -> None:
    assert [r.step for r in result.records] == list(range(1, config.steps + 1))
    for record in result.records:
        # a take consumes every accepted gradient; a worker sends one per step
        assert config.replicas_to_aggregate <= record.accepted <= config.workers
        assert record.stale >= 0
        assert record.wait_s >= 0
    assert result.applied == result.accepted + result.stale + result.unsettled
    assert result.unsettled >= 0


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_job_end_to_end_writes_the_figure_and_a_matching_summary(tmp_path, sparse) -> None:
    png = tmp_path / "run.png"
    args = ["--workers", "3", "--replicas-to-aggregate", "2", "--steps", "12", "--plot", str(png)]
    result, printed = run_main(args + FAST + (["--sparse"] if sparse else []))

    config = JobConfig(workers=3, replicas_to_aggregate=2, steps=12)
    check_accounting(result, config)
    assert result.final_loss < result.initial_loss
    assert ("SparseConditionalAccumulator" in result.model_description) == sparse

    # the figure: a valid PNG carrying exactly the run's per-step series
    panels = json.loads(png_text(png)["tf_accum:panels"])
    assert panels == {
        "step": list(range(1, 13)),
        "loss": [r.loss for r in result.records],
        "accepted": [r.accepted for r in result.records],
        "stale": [r.stale for r in result.records],
        "wait_ms": [1000 * r.wait_s for r in result.records],
    }
    width, height = struct.unpack(">II", png_chunks(png)[0][1][:8])
    assert width >= 600 and height >= 600

    # the summary: what was printed is this run's figures
    fields = dict(re.findall(r"^ *(\S.*?) {2,}(.*)$", printed, re.M))
    assert fields["steps"] == "12"
    assert fields["workers"] == "3 threads"
    assert fields["replicas to aggregate"] == "2"
    assert fields["gradients applied"] == str(result.applied)
    assert fields["model"] == result.model_description
    assert (
        fields["taken by the chief"] == f"{result.accepted} ({result.accepted / 12:.2f} per step)"
    )
    assert fields["dropped as stale"] == f"{result.stale} ({result.stale / 12:.2f} per step)"
    assert fields["after the last take"] == str(result.unsettled)
    waits = [1000 * r.wait_s for r in result.records]
    assert fields["chief's wait per take"] == (
        f"median {statistics.median(waits):.2f} ms, max {max(waits):.2f} ms"
    )
    assert fields["loss"] == f"{result.initial_loss:.6g} -> {result.final_loss:.6g}"
    assert printed.splitlines()[-1] == f"figure: {png.resolve()}"


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_graph_mode_job_end_to_end(tmp_path, sparse) -> None:
    import tf_accum.compat.v1 as tf

    png = tmp_path / "graph.png"
    args = ["--graph", "--workers", "3", "--steps", "10", "--plot", str(png)]
    result, printed = run_main(args + FAST + (["--sparse"] if sparse else []))

    config = JobConfig(workers=3, replicas_to_aggregate=2, steps=10)
    check_accounting(result, config)
    assert result.final_loss < result.initial_loss
    assert result.model_description.endswith("(TF1 graph mode)")
    assert ("SparseConditionalAccumulator" in result.model_description) == sparse
    assert tf.executing_eagerly()  # the graph was built in a Graph of its own
    panels = json.loads(png_text(png)["tf_accum:panels"])
    assert panels["accepted"] == [r.accepted for r in result.records]
    assert panels["stale"] == [r.stale for r in result.records]
    assert panels["loss"] == [r.loss for r in result.records]
    fields = dict(re.findall(r"^ *(\S.*?) {2,}(.*)$", printed, re.M))
    assert fields["workers"] == "3 threads (TF1 graph)"
    assert fields["replicas to aggregate"] == "2"
    assert fields["gradients applied"] == str(result.applied)
    assert (
        fields["taken by the chief"] == f"{result.accepted} ({result.accepted / 10:.2f} per step)"
    )
    assert fields["dropped as stale"] == f"{result.stale} ({result.stale / 10:.2f} per step)"
    assert fields["loss"] == f"{result.initial_loss:.6g} -> {result.final_loss:.6g}"


def test_graph_mode_job_takes_what_the_eager_job_takes_when_every_worker_is_waited_for() -> None:
    # with replicas_to_aggregate == workers every take holds one gradient per
    # worker at the same weights: both programs make the same updates
    config = JobConfig(workers=2, replicas_to_aggregate=2, steps=6, compute_ms=0)
    eager = run(config)
    graph = run(dataclasses.replace(config, graph=True))
    assert [r.accepted for r in graph.records] == [2] * 6
    np.testing.assert_allclose(
        [r.loss for r in graph.records], [r.loss for r in eager.records], rtol=1e-5
    )


def test_figure_panels_plot_the_records(tmp_path) -> None:
    from tf_accum.examples.figure import save_figure

    records = [
        StepRecord(step=1, loss=4.0, accepted=2, stale=0, wait_s=0.004),
        StepRecord(step=2, loss=1.0, accepted=3, stale=1, wait_s=0.001),
        StepRecord(step=3, loss=0.5, accepted=2, stale=2, wait_s=0.002),
    ]
    result = RunResult(3, 2, "a model", 8.0, records, applied=11, seconds=0.1)
    fig = save_figure(result, tmp_path / "f.png")
    loss_ax, count_ax, wait_ax = fig.axes
    (line,) = loss_ax.get_lines()
    assert list(line.get_xdata()) == [0, 1, 2, 3]
    assert list(line.get_ydata()) == [8.0, 4.0, 1.0, 0.5]
    assert loss_ax.get_yscale() == "log"
    accepted_bars, stale_bars = count_ax.containers
    assert [b.get_height() for b in accepted_bars] == [2, 3, 2]
    assert [b.get_height() for b in stale_bars] == [0, 1, 2]
    assert [b.get_y() for b in stale_bars] == [2, 3, 2]  # stacked on the accepted ones
    assert [round(b.get_height(), 9) for b in wait_ax.containers[0]] == [4.0, 1.0, 2.0]
    labels = [t.get_text() for t in count_ax.get_legend().get_texts()]
    assert labels == ["replicas to aggregate (2)", "accepted (taken)", "dropped as stale"]
    for ax in fig.axes:
        assert ax.get_title() and ax.get_ylabel()
    assert wait_ax.get_xlabel() == "step"


@pytest.mark.parametrize(
    ("kind", "description"),
    [
        ("threads", "a model"),
        (
            "processes (TF1 cluster on Ray)",
            "embedding table [1000, 16], gradients through a SparseConditionalAccumulator "
            "(TF1 cluster: 1 ps task, one process per task)",
        ),
    ],
)
def test_the_figure_title_is_whole_within_the_figure(tmp_path, kind, description) -> None:
    from tf_accum.examples.figure import save_figure

    records = [StepRecord(step=1, loss=4.0, accepted=2, stale=1, wait_s=0.004)]
    result = RunResult(3, 2, description, 8.0, records, 3, 0.1, worker_kind=kind)
    fig = save_figure(result, tmp_path / "f.png")
    title = fig.get_suptitle()
    # every word is there (wrapped, not cut), and the text lies inside the figure
    expected = (
        f"Synchronous replicas: 3 worker {kind}; each step the chief takes the gradients "
        f"of at least 2 ({description})"
    )
    assert title.split() == expected.split()
    extent = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
    assert fig.bbox.x0 <= extent.x0 and extent.x1 <= fig.bbox.x1, (extent, fig.bbox)


def test_same_seed_same_losses_when_every_worker_is_waited_for() -> None:
    # with replicas_to_aggregate == workers == 2 every step takes one gradient
    # from each worker, and a sum of two floats does not depend on their order
    config = JobConfig(workers=2, replicas_to_aggregate=2, steps=8, compute_ms=0)
    first, second = run(config), run(config)
    assert [r.loss for r in first.records] == [r.loss for r in second.records]
    assert all(r.accepted == 2 for r in first.records)
    other = run(JobConfig(workers=2, replicas_to_aggregate=2, steps=8, compute_ms=0, seed=1))
    assert [r.loss for r in other.records] != [r.loss for r in first.records]


def test_slow_workers_are_dropped_as_stale() -> None:
    # worker 2 takes twice as long as worker 0 (and 1.5 times worker 1): with
    # one gradient per step needed, the others arrive after their step's take
    config = JobConfig(workers=3, replicas_to_aggregate=1, steps=10, compute_ms=3)
    result = run(config)
    check_accounting(result, config)
    assert result.stale > 0


def test_without_a_terminal_progress_is_plain_periodic_lines() -> None:
    stream = io.StringIO()
    shown = progress_module.make_progress(20, quiet=False, stream=stream)
    assert isinstance(shown, progress_module.Lines)
    run(JobConfig(workers=2, replicas_to_aggregate=1, steps=20, compute_ms=0.2), shown)
    lines = stream.getvalue().splitlines()
    assert [line.split()[1] for line in lines] == [f"{s}/20" for s in range(2, 21, 2)]
    assert all(
        re.search(r"loss \S+  accepted \d+  stale \d+  take waited [\d.]+ ms", x) for x in lines
    )


def test_on_a_terminal_progress_is_a_tqdm_bar_and_quiet_shows_nothing() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    shown = progress_module.make_progress(4, quiet=False, stream=stream)
    assert isinstance(shown, progress_module.Bar)
    run(JobConfig(workers=2, replicas_to_aggregate=1, steps=4, compute_ms=0.2), shown)
    assert "4/4" in stream.getvalue() and "accepted" in stream.getvalue()
    assert isinstance(
        progress_module.make_progress(4, quiet=True, stream=stream), progress_module.Silent
    )


def test_help_explains_every_option() -> None:
    text = build_parser().format_help()
    for option in [
        "--workers",
        "--replicas-to-aggregate",
        "--steps",
        "--sparse",
        "--plot PATH",
        "--no-plot",
        "--seed",
        "--quiet",
        "--compute-ms",
        "--processes N",
        "--address ADDR",
        "--graph",
    ]:
        assert re.search(rf"^\s+{re.escape(option)}\b.*\S", text, re.M), option


@pytest.mark.parametrize(
    "args, message",
    [
        (["--workers", "2", "--replicas-to-aggregate", "3"], "between 1 and --workers (2), got 3"),
        (["--steps", "0"], "--steps must be at least 1, got 0"),
        (["--workers", "0"], "--workers must be at least 1, got 0"),
        (["--processes", "-1"], "--processes must be at least 1, got -1"),
        (["--graph", "--processes", "2"], "--processes and --graph cannot be combined"),
    ],
)
def test_bad_options_are_refused_before_training(args, message, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_no_plot_saves_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _, printed = run_main(["--steps", "2", "--no-plot", *FAST])
    assert "figure:" not in printed
    assert list(tmp_path.iterdir()) == []


def test_python_m_tf_accum_in_a_pipe(tmp_path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tf_accum",
            "--steps",
            "3",
            "--compute-ms",
            "0.2",
            "--plot",
            "p.png",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert re.findall(r"^step (\d)/3 ", done.stderr, re.M) == ["1", "2", "3"]
    assert done.stdout.splitlines()[-1] == f"figure: {(tmp_path / 'p.png').resolve()}"
    assert png_text(tmp_path / "p.png")["tf_accum:panels"]


def test_a_failing_worker_stops_the_run_with_its_error(monkeypatch) -> None:
    from tf_accum.examples.models import LinearRegression

    real = LinearRegression.gradient

    def failing(self: LinearRegression, params: Any, worker: int, step: int) -> Any:
        if worker == 1 and step == 3:
            raise RuntimeError("worker 1 broke at step 3")
        return real(self, params, worker, step)

    monkeypatch.setattr(LinearRegression, "gradient", failing)
    with pytest.raises(RuntimeError, match="worker 1 broke at step 3"):
        run(JobConfig(workers=2, replicas_to_aggregate=2, steps=20, compute_ms=0))


def test_without_the_demo_and_ray_extras(monkeypatch, capsys) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("tqdm", "matplotlib", "ray") else real(name, *a),
    )

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    # on a terminal without tqdm: plain lines
    assert isinstance(progress_module.make_progress(4, False, Terminal()), progress_module.Lines)
    # a figure without matplotlib: refused before training, with the way out
    with pytest.raises(SystemExit):
        main(["--steps", "2", *FAST])
    assert "--plot needs matplotlib: install the demo extra" in capsys.readouterr().err
    # worker processes without Ray: refused before anything starts, with the way out
    with pytest.raises(SystemExit):
        main(["--processes", "2", "--steps", "2", "--no-plot", *FAST])
    assert "--processes needs Ray: install the ray extra" in capsys.readouterr().err
    _, printed = run_main(["--steps", "2", "--no-plot", *FAST])
    assert "steps" in printed and "figure:" not in printed


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_a_gradient_refused_once_the_job_closed_its_accumulator_stays_counted(
    monkeypatch, sparse: bool
) -> None:
    """Worker 2's gradient for the last step but one is counted (before its
    apply), then held until the chief has taken the last step, counted it
    stale, and closed the accumulator: its apply is refused. The run still
    accounts for every gradient: none is counted stale and then taken back
    (which made the unsettled count -1, now and then, on a loaded machine)."""
    import threading

    from tf_accum.examples import models

    steps = 4
    model_class = models.EmbeddingFit if sparse else models.LinearRegression
    real_apply = model_class.apply
    held, closed = threading.Event(), threading.Event()
    lock = threading.Lock()
    calls, refused = [0], [0]  # gradients the workers counted and applied; refused ones

    def apply(self: Any, accumulator: Any, gradient: Any, local_step: int) -> None:
        with lock:
            calls[0] += 1
        worker_2 = threading.current_thread().name == "worker-2"
        if local_step == steps - 1 and worker_2 or local_step == steps:
            held.set()
            assert closed.wait(10)  # refused: the job is over
        elif local_step == steps - 1:
            assert held.wait(10)  # the last take comes after worker 2 counted its own
        try:
            real_apply(self, accumulator, gradient, local_step)
        except errors.NotFoundError:
            with lock:
                refused[0] += 1
            raise

    accumulator_class = type(model_class(0, 3).make_accumulator())
    real_close = accumulator_class.close

    def close(self: Any) -> None:
        real_close(self)
        closed.set()

    monkeypatch.setattr(model_class, "apply", apply)
    monkeypatch.setattr(accumulator_class, "close", close)
    config = JobConfig(workers=3, replicas_to_aggregate=2, steps=steps, sparse=sparse,
                       compute_ms=0.2, quiet=True)  # fmt: skip
    result = run(config)
    check_accounting(result, config)
    assert result.records[-1].stale >= 1  # worker 2's, counted stale at the last take
    # every gradient the workers counted stays counted, refused or not (a
    # worker may skip a step that was taken while it computed, so no fixed total)
    assert refused[0] >= 1
    assert result.applied == calls[0]
