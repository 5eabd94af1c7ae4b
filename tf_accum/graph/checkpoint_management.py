"""A directory's checkpoints: the ``checkpoint`` state file, the latest checkpoint, reading one.

The state file is TensorFlow's: a ``CheckpointState`` message in protobuf's
text format, naming the latest checkpoint and the ones still kept, so
TensorFlow and tf_accum find each other's latest checkpoint.
"""

from __future__ import annotations

import glob
import logging
import os
import uuid
from typing import Any

from tf_accum.graph.checkpoint_format import INDEX_SUFFIX, CheckpointReader
from tf_accum.graph.proto_messages import message_class

_log = logging.getLogger(__name__)

STATE_FILENAME = "checkpoint"


def _state_path(save_dir: str, latest_filename: str | None) -> str:
    return os.path.join(save_dir, latest_filename or STATE_FILENAME)


def checkpoint_exists(checkpoint_prefix: Any) -> bool:
    """Whether a checkpoint ``checkpoint_prefix`` exists (its ``.index`` file, or a
    file of that name: a glob pattern matches too)."""
    prefix = os.fspath(checkpoint_prefix)
    if isinstance(prefix, bytes):
        prefix = prefix.decode()
    return bool(glob.glob(prefix + INDEX_SUFFIX) or glob.glob(prefix))


def get_checkpoint_mtimes(checkpoint_prefixes: list[str]) -> list[float]:
    """The modification times of the checkpoints that exist (of their index files)."""
    times = []
    for prefix in checkpoint_prefixes:
        for pattern in (prefix + INDEX_SUFFIX, prefix):
            found = glob.glob(pattern)
            if found:
                times.append(os.stat(found[0]).st_mtime_ns / 1e9)
                break
    return times


def remove_checkpoint(
    checkpoint_prefix: str, checkpoint_format_version: int = 2, meta_graph_suffix: str = "meta"
) -> None:
    """Delete a checkpoint's files (its index, data files and meta graph), those that exist."""
    paths = [f"{checkpoint_prefix}.{meta_graph_suffix}", checkpoint_prefix + INDEX_SUFFIX]
    paths += glob.glob(glob.escape(checkpoint_prefix) + ".data-?????-of-?????")
    for path in paths:
        if os.path.exists(path):
            os.remove(path)


def state_message(
    save_dir: str,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: list[str] | None = None,
    all_model_checkpoint_timestamps: list[float] | None = None,
    last_preserved_timestamp: float | None = None,
) -> Any:
    """A ``CheckpointState``; paths are made relative to ``save_dir`` when it is relative.

    Raises:
        ValueError: timestamps given for another number of paths.
    """
    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths.append(model_checkpoint_path)
    if all_model_checkpoint_timestamps and len(all_model_checkpoint_timestamps) != len(paths):
        raise ValueError(
            "Checkpoint timestamps, if provided, must match checkpoint paths (got paths "
            f"{paths} and timestamps {all_model_checkpoint_timestamps})"
        )
    if not os.path.isabs(save_dir):
        if not os.path.isabs(model_checkpoint_path):
            model_checkpoint_path = os.path.relpath(model_checkpoint_path, save_dir)
        paths = [p if os.path.isabs(p) else os.path.relpath(p, save_dir) for p in paths]
    state = message_class("CheckpointState")(
        model_checkpoint_path=model_checkpoint_path, all_model_checkpoint_paths=paths
    )
    if all_model_checkpoint_timestamps:
        state.all_model_checkpoint_timestamps.extend(all_model_checkpoint_timestamps)
    if last_preserved_timestamp is not None:
        state.last_preserved_timestamp = last_preserved_timestamp
    return state


def update_checkpoint_state(
    save_dir: str,
    model_checkpoint_path: str,
    all_model_checkpoint_paths: list[str] | None = None,
    latest_filename: str | None = None,
    all_model_checkpoint_timestamps: list[float] | None = None,
    last_preserved_timestamp: float | None = None,
    save_relative_paths: bool = False,
) -> None:
    """Write the state file of ``save_dir`` (atomically: a reader sees the old or the new one).

    Raises:
        RuntimeError: the checkpoint's path is the state file's.
    """
    paths = list(all_model_checkpoint_paths or [])
    latest = model_checkpoint_path
    if save_relative_paths:
        if os.path.isabs(latest):
            latest = os.path.relpath(latest, save_dir)
        paths = [os.path.relpath(p, save_dir) if os.path.isabs(p) else p for p in paths]
    state = state_message(
        save_dir, latest, paths, all_model_checkpoint_timestamps, last_preserved_timestamp
    )
    path = _state_path(save_dir, latest_filename)
    if path == state.model_checkpoint_path:
        raise RuntimeError(
            f"Save path '{model_checkpoint_path}' conflicts with path used for checkpoint "
            "state.  Please use a different save path."
        )
    from google.protobuf import text_format

    temporary = f"{path}.tmp{uuid.uuid4().hex}"
    with open(temporary, "w") as file:
        file.write(text_format.MessageToString(state))
    os.replace(temporary, path)


def get_checkpoint_state(checkpoint_dir: Any, latest_filename: str | None = None) -> Any:
    """The ``CheckpointState`` of ``checkpoint_dir`` (relative paths made relative to it),
    or None if it has no state file or an unreadable one (logged as a warning).

    Raises:
        ValueError: the state file names no checkpoint.
    """
    checkpoint_dir = os.fspath(checkpoint_dir)
    path = _state_path(checkpoint_dir, latest_filename)
    if not os.path.isfile(path):
        return None
    from google.protobuf import text_format

    state = message_class("CheckpointState")()
    try:
        with open(path) as file:
            text_format.Merge(file.read(), state)
    except (OSError, UnicodeDecodeError, text_format.ParseError) as error:
        _log.warning("%s: %s", type(error).__name__, error)
        _log.warning("%s: Checkpoint ignored", path)
        return None
    if not state.model_checkpoint_path:
        raise ValueError(f"Invalid checkpoint state loaded from {checkpoint_dir}")
    if not os.path.isabs(state.model_checkpoint_path):
        state.model_checkpoint_path = os.path.join(checkpoint_dir, state.model_checkpoint_path)
    for i, kept in enumerate(state.all_model_checkpoint_paths):
        if not os.path.isabs(kept):
            state.all_model_checkpoint_paths[i] = os.path.join(checkpoint_dir, kept)
    return state


def latest_checkpoint(checkpoint_dir: Any, latest_filename: str | None = None) -> str | None:
    """The prefix of the latest checkpoint in ``checkpoint_dir``, or None.

    None also when the state file names a checkpoint whose files are gone
    (logged as an error).
    """
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None or not state.model_checkpoint_path:
        return None
    prefix: str = state.model_checkpoint_path
    if checkpoint_exists(prefix):
        return prefix
    _log.error("Couldn't match files for checkpoint %s", prefix)
    return None


def _checkpoint_prefix(ckpt_dir_or_file: Any) -> str:
    path = os.fspath(ckpt_dir_or_file)
    if isinstance(path, bytes):
        path = path.decode()
    path = str(path)
    if os.path.isdir(path):
        found = latest_checkpoint(path)
        if found is None:
            raise ValueError(
                f"Couldn't find 'checkpoint' file or checkpoints in given directory {path}"
            )
        return found
    return path


def load_checkpoint(ckpt_dir_or_file: Any) -> CheckpointReader:
    """A reader of a checkpoint (``get_tensor``, ``get_variable_to_shape_map``, ...):
    ``ckpt_dir_or_file`` is a checkpoint's prefix, or a directory (its latest checkpoint).

    Raises:
        ValueError: a directory without checkpoints.
        NotFoundError: no such checkpoint.
    """
    return CheckpointReader(_checkpoint_prefix(ckpt_dir_or_file))


def load_variable(ckpt_dir_or_file: Any, name: str) -> Any:
    """The value of tensor ``name`` (a trailing ``:0`` is dropped) in a checkpoint.

    Raises:
        NotFoundError: no such checkpoint, or no such tensor in it.
    """
    if name.endswith(":0"):
        name = name[:-2]
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)


def list_variables(ckpt_dir_or_file: Any) -> list[tuple[str, list[int]]]:
    """The (name, shape) of every tensor of a checkpoint, sorted by name."""
    reader = load_checkpoint(ckpt_dir_or_file)
    shapes = reader.get_variable_to_shape_map()
    return [(name, shapes[name]) for name in sorted(shapes)]


__all__ = [
    "checkpoint_exists",
    "get_checkpoint_mtimes",
    "get_checkpoint_state",
    "latest_checkpoint",
    "list_variables",
    "load_checkpoint",
    "load_variable",
    "remove_checkpoint",
    "update_checkpoint_state",
]
