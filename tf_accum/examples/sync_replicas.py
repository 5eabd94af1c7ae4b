"""The synchronous-replicas pattern, watched: workers push gradients, a chief takes them.

Each worker thread waits for a new global step, reads the weights of that
step, computes a gradient on its own data and applies it to a shared
accumulator tagged with that step. The chief takes the gradients of at least
``replicas_to_aggregate`` workers, updates the weights and so moves the step
on: gradients computed from older weights arrive stale and the accumulator
drops them. Workers differ in speed (a simulated compute time, worker ``i``
taking ``1 + i/2`` times as long as worker 0, with seeded jitter), so the
slower ones are usually the stale ones.

How the job is put together, for whoever adds to it: :func:`build_parser`
declares the options (one ``add_argument`` per option, in groups);
:class:`~tf_accum.examples.config.JobConfig` holds them; :func:`run` trains
with a model from :data:`~tf_accum.examples.models.MODELS` and worker threads
from :func:`~tf_accum.examples.workers.start_thread_workers` (another way of
running workers is another function with its signature, returning
:class:`~tf_accum.examples.workers.Workers`), and returns a :class:`RunResult`;
:func:`main` shows progress, prints :func:`summary` and saves the figure.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from tf_accum import errors
from tf_accum.examples import recovery
from tf_accum.examples.config import DEFAULT_PLOT, JobConfig
from tf_accum.examples.models import MODELS, Model
from tf_accum.examples.progress import Progress, Silent, make_progress
from tf_accum.examples.records import RunResult, StepRecord
from tf_accum.examples.workers import Ledger, ParameterServer, start_thread_workers


def run(config: JobConfig, progress: Progress | None = None) -> RunResult:
    """Train with ``config``; report each step to ``progress``.

    Raises:
        ValueError: settings that cannot train (see :meth:`JobConfig.check`).
        Whatever a worker raised, if one failed.
    """
    config.check()
    progress = Silent() if progress is None else progress
    if config.graph:
        from tf_accum.examples.graph_job import run_graph

        return run_graph(config, progress)
    if config.tf1_cluster:
        from tf_accum.examples.tf1_cluster import run_tf1_cluster

        return run_tf1_cluster(config, progress)
    with contextlib.ExitStack() as stack:
        if config.processes:
            from tf_accum.examples import processes

            address = stack.enter_context(processes.cluster(config.address, config.quiet))
            return _train(config, progress, address, processes.shared_name())
        return _train(config, progress, None, None)


def _train(
    config: JobConfig, progress: Progress, address: str | None, shared_name: str | None
) -> RunResult:
    """:func:`run` with worker threads, or processes on the cluster at ``address``."""
    model: Model = MODELS["sparse" if config.sparse else "dense"](config.seed, config.workers)
    server = ParameterServer(model.initial_params())
    accumulator = model.make_accumulator(shared_name=shared_name)
    initial_loss = model.loss(server.params)
    records: list[StepRecord] = []
    started = time.perf_counter()
    if address is None:
        workers = start_thread_workers(config, model, accumulator, server, Ledger())
    else:
        from tf_accum.examples.processes import start_process_workers

        workers = start_process_workers(config, model, accumulator, server, address)
    accepted_so_far = stale_so_far = 0
    recoveries: list[str] = []
    taken_here = 0  # takes of the current accumulator (a restarted host starts a new one)
    try:
        while len(records) < config.steps:
            before = time.perf_counter()
            try:
                try:
                    total, count = model.take(
                        accumulator, config.replicas_to_aggregate, config.take_timeout
                    )
                except errors.DeadlineExceededError:
                    # A take can time out on a host that was lost and restarted while it
                    # waited, with a worker making the accumulator again meanwhile: the
                    # accumulator then has served fewer takes than this chief made of it.
                    if shared_name is None or accumulator.stats()["takes_served"] >= taken_here:
                        raise
                    accumulator.set_global_step(server.step)
                    server.republish()  # the workers' gradients of this step went with the host
                    recoveries.append(f"host lost at step {server.step}, accumulator re-created")
                    taken_here = 0
                    continue
            except (errors.CancelledError, errors.NotFoundError, errors.UnavailableError) as lost:
                # a failing worker closes the accumulator: report its error
                if workers.errors:
                    raise workers.errors[0] from None
                if shared_name is None or not recovery.host_lost(lost):
                    raise
                # the host was lost: the gradients of the step in flight went with it
                accumulator = recovery.remake(
                    functools.partial(model.make_accumulator, shared_name=shared_name),
                    config.take_timeout,
                )
                accumulator.set_global_step(server.step)
                workers.use_accumulator(accumulator)
                # the gradients already applied for this step went with the host, and
                # their workers wait for new weights: send these again
                server.republish()
                recoveries.append(f"host lost at step {server.step}, accumulator re-created")
                taken_here = 0
                continue
            taken_here += 1
            waited = time.perf_counter() - before
            step = server.update(functools.partial(model.update, total=total, count=count))
            accepted_so_far += count
            stale_now = workers.stale_so_far(step, accepted_so_far)
            records.append(
                StepRecord(step, model.loss(server.params), count, stale_now - stale_so_far, waited)
            )
            stale_so_far = stale_now
            progress.update(records[-1])
    finally:
        workers.stop()
        progress.close()
    if workers.errors:
        raise workers.errors[0]
    return RunResult(
        workers=config.workers,
        replicas_to_aggregate=config.replicas_to_aggregate,
        model_description=model.description,
        initial_loss=initial_loss,
        records=records,
        applied=workers.applied(),
        seconds=time.perf_counter() - started,
        worker_kind=config.worker_kind,
        recoveries=recoveries,
        worker_nodes=workers.nodes,
    )


def summary(result: RunResult) -> str:
    """The table printed at the end of a run."""
    steps = len(result.records)
    waits = [1000.0 * r.wait_s for r in result.records]
    rows = [
        ("model", result.model_description),
        ("workers", f"{result.workers} {result.worker_kind}"),
        *([("worker nodes", str(result.worker_nodes))] if result.worker_nodes else []),
        ("replicas to aggregate", str(result.replicas_to_aggregate)),
        ("steps", str(steps)),
        ("gradients applied", str(result.applied)),
        ("  taken by the chief", f"{result.accepted} ({result.accepted / steps:.2f} per step)"),
        ("  dropped as stale", f"{result.stale} ({result.stale / steps:.2f} per step)"),
        ("  after the last take", str(result.unsettled)),
        ("loss", f"{result.initial_loss:.6g} -> {result.final_loss:.6g}"),
        (
            "chief's wait per take",
            f"median {statistics.median(waits):.2f} ms, max {max(waits):.2f} ms",
        ),
        ("wall time", f"{result.seconds:.2f} s"),
    ]
    if result.recoveries:
        # what the chief went on from; the gradients waiting in a lost host are not counted
        rows.append(("recovered", "; ".join(result.recoveries)))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m tf_accum``."""
    parser = argparse.ArgumentParser(
        prog="python -m tf_accum",
        description=(
            "Train a small model in the synchronous-replicas pattern: workers (threads, or "
            "processes on Ray with --processes) apply "
            "gradients tagged with the step they read to a shared accumulator; a chief takes "
            "at least --replicas-to-aggregate of them per step and updates the weights; "
            "gradients that arrive after their step was taken are dropped as stale. Shows "
            "progress while it runs, then a summary table and a PNG figure."
        ),
    )
    training = parser.add_argument_group("training")
    training.add_argument(
        "--workers",
        metavar="N",
        type=int,
        default=JobConfig.workers,
        help="worker threads (default %(default)s)",
    )
    training.add_argument(
        "--replicas-to-aggregate",
        metavar="N",
        type=int,
        default=None,
        help="gradients the chief waits for per step, at most --workers; the slower workers' "
        "gradients for that step then arrive stale (default: one fewer than the workers, "
        "at least 1)",
    )
    training.add_argument(
        "--steps",
        metavar="N",
        type=int,
        default=JobConfig.steps,
        help="updates the chief makes (default %(default)s)",
    )
    training.add_argument(
        "--sparse",
        action="store_true",
        help="train an embedding table whose sparse gradients go through a "
        "SparseConditionalAccumulator (default: a dense linear model and a ConditionalAccumulator)",
    )
    training.add_argument(
        "--seed",
        metavar="N",
        type=int,
        default=JobConfig.seed,
        help="seeds the data, every mini-batch and the workers' simulated speeds; which "
        "gradients make each step still depends on thread timing (default %(default)s)",
    )
    training.add_argument(
        "--compute-ms",
        metavar="MS",
        type=float,
        default=JobConfig.compute_ms,
        help="simulated compute time of the fastest worker per gradient, in milliseconds; "
        "worker i takes 1 + i/2 times as long (default %(default)s)",
    )
    running = parser.add_argument_group("how the workers run")
    running.add_argument(
        "--processes",
        metavar="N",
        type=int,
        default=JobConfig.processes,
        help="run N workers as separate OS processes on a Ray cluster (instead of --workers "
        "threads), sharing the accumulator by its shared_name; the chief stays in this "
        "process and sends each worker the weights of every step; on a running cluster "
        "(--address other than local) the workers are Ray actors spread over its nodes; "
        "needs the ray extra",
    )
    running.add_argument(
        "--address",
        metavar="ADDR",
        default=JobConfig.address,
        help="the Ray cluster of --processes: 'local' starts a loopback-only one in this "
        "process and stops it at the end; otherwise a running cluster: its head's "
        "'host:port', 'auto' (the one `ray start` made here), or a 'ray://host:port' Ray "
        "Client address, handed to Ray as it is (default %(default)s)",
    )
    running.add_argument(
        "--graph",
        action="store_true",
        help="the same job written the TensorFlow 1 way, in graph mode through "
        "tf_accum.compat.v1: placeholders for the gradients and steps, worker threads "
        "calling Session.run on one session, the chief taking with a RunOptions timeout",
    )
    running.add_argument(
        "--tf1-cluster",
        action="store_true",
        help="the TF1 program as TF1 ran it: a ClusterSpec, one process per task (a ps task "
        "holding the weights, the global step and the accumulator; --workers worker "
        "processes; this process the chief), each with its tf.train.Server and sessions on "
        "its target, on the Ray cluster of --address; needs the ray extra",
    )
    output = parser.add_argument_group("output")
    plots = output.add_mutually_exclusive_group()
    plots.add_argument(
        "--plot",
        metavar="PATH",
        default=DEFAULT_PLOT,
        help="where to save the figure (loss, accepted and stale gradients, and the chief's "
        "wait, per step) as PNG; needs matplotlib (default %(default)s)",
    )
    plots.add_argument(
        "--no-plot", dest="plot", action="store_const", const=None, help="save no figure"
    )
    output.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar or progress lines, and none of Ray's own log lines with "
        "--processes; the summary and the figure's path are still printed",
    )
    return parser


def config_from_args(args: argparse.Namespace) -> JobConfig:
    """The JobConfig for parsed options: every JobConfig field named like its option."""
    names = {f.name for f in dataclasses.fields(JobConfig)}
    values = {k: v for k, v in vars(args).items() if k in names}
    if values.get("processes") and values.get("workers") == JobConfig.workers:
        values["workers"] = values["processes"]  # --processes N: N workers, each a process
    if values.get("replicas_to_aggregate") is None:
        # one fewer than the workers, so the slowest one's gradients go stale
        values["replicas_to_aggregate"] = max(1, values.get("workers", JobConfig.workers) - 1)
    return JobConfig(**values)


def main(argv: Sequence[str] | None = None, stdout: TextIO | None = None) -> RunResult:
    """Run the job as ``python -m tf_accum`` does; returns the finished run."""
    out = sys.stdout if stdout is None else stdout
    parser = build_parser()
    config = config_from_args(parser.parse_args(argv))
    try:
        config.check()
    except ValueError as exc:
        parser.error(str(exc))
    import importlib.util

    if config.plot is not None and importlib.util.find_spec("matplotlib") is None:
        parser.error(
            "--plot needs matplotlib: install the demo extra (pip install 'tf-accum[demo]') "
            "or pass --no-plot"
        )
    if (config.processes or config.tf1_cluster) and importlib.util.find_spec("ray") is None:
        option = "--processes" if config.processes else "--tf1-cluster"
        parser.error(f"{option} needs Ray: install the ray extra (pip install 'tf-accum[ray]')")
    result = run(config, make_progress(config.steps, config.quiet))
    print(summary(result), file=out)
    if config.plot is not None:
        from tf_accum.examples.figure import save_figure

        path = Path(config.plot).resolve()
        save_figure(result, path)
        print(f"figure: {path}", file=out)
    return result
