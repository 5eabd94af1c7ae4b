"""``python -m tf_accum.launch [options] program.py [--] [program arguments]``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from tf_accum import errors
from tf_accum.launch.job import (
    Interrupted,
    JobSpec,
    Output,
    StopRequests,
    install_signal_handlers,
    run,
)

DESCRIPTION = """\
Run a TF1 program as a ps/worker job: one process per task, each started
with --job_name, --task_index, --ps_hosts and --worker_hosts (then the
program's own arguments) and with TF_CONFIG, TF_ACCUM_RAY_ADDRESS and
TF_ACCUM_JOB (the same for every task of one run, new for each run) in its
environment, and with its BLAS/OpenMP threads limited to its share of the
cores (see --no-thread-limit). Output lines are prefixed with the task's
name ([ps0], [worker1]). The ps tasks are ended once every worker has
exited; a failing task or Ctrl-C ends them all. The exit status is the
workers' worst."""

EPILOG = """\
Without --address (or TF_ACCUM_RAY_ADDRESS), the job gets a Ray head of its
own on this machine, listening on loopback only, stopped when the job ends."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tf_accum.launch",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--ps", type=int, default=1, help="number of ps tasks (default: 1)")
    parser.add_argument(
        "--workers", type=int, default=2, help="number of worker tasks (default: 2)"
    )
    parser.add_argument(
        "--address",
        default=os.environ.get("TF_ACCUM_RAY_ADDRESS") or None,
        help="the Ray cluster the tasks join: host:port of its head's GCS, ray://host:port, "
        "or auto (default: TF_ACCUM_RAY_ADDRESS, else, or with 'local', a head started for "
        "the job)",
    )
    parser.add_argument(
        "--no-flags",
        dest="flags",
        action="store_false",
        help="pass no task flags: each task finds its role in TF_CONFIG only "
        "(for programs that refuse arguments they do not know)",
    )
    parser.add_argument(
        "--no-thread-limit",
        dest="thread_limit",
        action="store_false",
        help="leave the tasks' BLAS/OpenMP thread counts to the libraries (one thread per "
        "core in every task); by default each task gets OPENBLAS_NUM_THREADS, "
        "OMP_NUM_THREADS and MKL_NUM_THREADS set to its node's cores // the job's tasks "
        "on that node (at least 1), unless the environment sets any of them",
    )
    parser.add_argument(
        "--spread",
        action="store_true",
        help="start the tasks on the Ray cluster's nodes, round robin (ps tasks first), "
        "instead of on this machine; the program, Python and tf_accum must be at the same "
        "paths on every node",
    )
    parser.add_argument("program", help="the TF1 program: a Python file")
    parser.add_argument(
        "arguments",
        nargs=argparse.REMAINDER,
        help="the program's own arguments (after --, or after the program's name)",
    )
    return parser


def parse(argv: Sequence[str] | None = None) -> JobSpec:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.ps < 0:
        parser.error(f"--ps must be 0 or more, not {args.ps}")
    if args.workers < 1:
        parser.error(f"--workers must be 1 or more, not {args.workers}")
    if not os.path.isfile(args.program):
        parser.error(f"no program file at {args.program!r}")
    arguments = list(args.arguments)
    if arguments[:1] == ["--"]:
        arguments = arguments[1:]
    # "local" (a cluster inside each process) would give every task a cluster of its
    # own: the job gets one head instead
    address = None if args.address == "local" else args.address
    return JobSpec(
        os.path.abspath(args.program) if args.spread else args.program,
        arguments,
        args.ps,
        args.workers,
        address,
        args.flags,
        args.spread,
        args.thread_limit,
    )


def main(argv: Sequence[str] | None = None) -> int:
    spec = parse(argv)
    output = Output(sys.stdout.buffer, sys.stderr.buffer)
    stop = StopRequests()
    install_signal_handlers(stop)
    try:
        return run(spec, stop, output)
    except Interrupted as interrupted:
        output.say("stopped: every task was ended")
        return 128 + interrupted.signum
    except errors.OpError as error:
        output.say(f"error: {error.message}")
        return 1
    except RuntimeError as error:  # a task that could not start on the cluster
        output.say(f"error: {error}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
