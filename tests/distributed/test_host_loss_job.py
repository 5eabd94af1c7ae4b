"""The main job survives its accumulator host being SIGKILLed mid-run.

``python -m tf_accum --processes 2`` trains; once its host actor and workers
run and steps go by, the host's process is SIGKILLed. Ray restarts the host
empty; the chief notices, makes the accumulator again, sets the global step,
the workers go on, and the job finishes every step and says what happened.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from tests.distributed.test_host_loss_exit import HOST, wait_for_training
from tests.test_main_job_processes import (
    NEEDS_RAY,
    command_line,
    finish,
    processes_marked,
    start_job,
)

STEPS = 400


@NEEDS_RAY
def test_the_job_finishes_its_steps_after_its_host_is_sigkilled(tmp_path: Path) -> None:
    args = ["--processes", "2", "--steps", str(STEPS), "--compute-ms", "5", "--no-plot", "--quiet"]
    job, marker = start_job(tmp_path, *args)
    try:
        (host,) = {pid for pid in wait_for_training(job, marker) if HOST in command_line(pid)}
        time.sleep(3.0)  # let it train a while (the kill must land mid-run, not at its end)
        assert job.poll() is None, "the job ended before its host could be killed"
        os.kill(host, signal.SIGKILL)
    finally:
        out, err, left = finish(job, marker)
    assert job.returncode == 0, out + err[-3000:]
    # the summary table ends the output (Ray's raylet reports the dead worker above it)
    table = out[out.index("\nmodel  ") + 1 :] if "\nmodel  " in out else out
    fields = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in table.splitlines())
    assert fields["steps"] == str(STEPS)
    said = re.fullmatch(r"host lost at step (\d+), accumulator re-created", fields["recovered"])
    assert said is not None, fields["recovered"]
    lost_at = int(said.group(1))
    assert 0 <= lost_at < STEPS
    applied = int(fields["gradients applied"])
    accepted = int(fields["taken by the chief"].split()[0])
    stale = int(fields["dropped as stale"].split()[0])
    assert accepted >= STEPS  # every step took at least one gradient, after the loss too
    assert applied == accepted + stale + int(fields["after the last take"])
    assert not left, f"processes the job started are still running: {left}"
    assert not processes_marked(marker)
