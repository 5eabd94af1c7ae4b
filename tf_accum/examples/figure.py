"""The run's figure: loss, accepted and stale gradients, and the chief's wait, per step.

matplotlib is optional (the ``demo`` extra) and imported only here, with the
Agg backend (no display needed). The PNG also carries the plotted numbers as
JSON in a text chunk named :data:`PANELS_KEY`, so that a test (or a person)
can read back exactly what each panel shows.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from tf_accum.examples.records import RunResult

PANELS_KEY = "tf_accum:panels"
TITLE_MARGIN = 0.03  # of the figure's width, kept clear on each side of the title


def panel_data(run: RunResult) -> dict[str, list[float]]:
    """The numbers each panel plots, keyed by series."""
    return {
        "step": [r.step for r in run.records],
        "loss": [r.loss for r in run.records],
        "accepted": [r.accepted for r in run.records],
        "stale": [r.stale for r in run.records],
        "wait_ms": [1000.0 * r.wait_s for r in run.records],
    }


def save_figure(run: RunResult, path: str | Path) -> Any:
    """Draw the run's three panels and save them as a PNG at ``path``.

    Returns:
        The matplotlib Figure (for inspection; it is not shown).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    data = panel_data(run)
    steps = data["step"]
    fig = Figure(figsize=(9, 9), layout="constrained")
    FigureCanvasAgg(fig)
    loss_ax, count_ax, wait_ax = fig.subplots(3, 1, sharex=True)
    _title(
        fig,
        f"Synchronous replicas: {run.workers} worker {run.worker_kind}; each step the chief takes "
        f"the gradients of at least {run.replicas_to_aggregate}",
        f"({run.model_description})",
    )

    loss_ax.plot([0, *steps], [run.initial_loss, *data["loss"]], color="tab:blue", label="loss")
    loss_ax.set_yscale("log")
    loss_ax.set_ylabel("loss (log scale)")
    loss_ax.set_title("Training loss after each step")
    loss_ax.grid(True, which="major", alpha=0.3)

    count_ax.bar(steps, data["accepted"], width=1.0, color="tab:green", label="accepted (taken)")
    count_ax.bar(
        steps,
        data["stale"],
        width=1.0,
        bottom=data["accepted"],
        color="tab:orange",
        label="dropped as stale",
    )
    count_ax.axhline(
        run.replicas_to_aggregate,
        color="black",
        linestyle="--",
        linewidth=1,
        label=f"replicas to aggregate ({run.replicas_to_aggregate})",
    )
    heights = [a + s for a, s in zip(data["accepted"], data["stale"], strict=True)]
    count_ax.set_ylim(0, max([run.workers, *heights]) + 1.5)  # room for the legend
    count_ax.set_ylabel("gradients")
    count_ax.set_title("Gradients per step: taken by the chief, or arrived too late and dropped")
    count_ax.legend(loc="upper right", ncols=3, fontsize="small")

    wait_ax.bar(steps, data["wait_ms"], width=1.0, color="tab:purple")
    wait_ax.set_ylabel("milliseconds")
    wait_ax.set_xlabel("step")
    wait_ax.set_title("How long the chief's take waited for enough fresh gradients")
    wait_ax.grid(True, axis="y", alpha=0.3)

    fig.savefig(path, format="png", dpi=100, metadata={PANELS_KEY: json.dumps(data)})
    return fig


def _title(fig: Any, *lines: str) -> None:
    """The figure's title, its lines wrapped as narrow as needed to fit the figure's width
    (a centred line wider than the figure loses both ends)."""
    renderer = fig.canvas.get_renderer()
    margin = TITLE_MARGIN * fig.bbox.width
    for width in range(max(map(len, lines)), 19, -4):
        title = fig.suptitle("\n".join(textwrap.fill(line, width) for line in lines))
        extent = title.get_window_extent(renderer)
        if extent.x0 >= fig.bbox.x0 + margin and extent.x1 <= fig.bbox.x1 - margin:
            return
