"""``tf.train.Saver``: a graph's variables saved to, and restored from, checkpoint files.

As in TensorFlow, the Saver builds its ops into the graph when it is made
(under the name scope ``save``): ``save/SaveV2`` writes the variables' values,
read where each variable lives (a ps task's variables are read on that task),
to the file named by ``save/Const``; ``save/RestoreV2`` reads them back and
``save/restore_all`` assigns them. The files are TensorFlow's (format V2,
``tf_accum.graph.checkpoint_format``) and the state file beside them too
(``tf_accum.graph.checkpoint_management``), so a job can move between
TensorFlow and tf_accum. The meta graph file is not written (docs/departures.md T24).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from tf_accum import errors
from tf_accum.dtypes import DType
from tf_accum.graph import mode
from tf_accum.graph.checkpoint_format import CheckpointReader, write_checkpoint
from tf_accum.graph.checkpoint_management import (
    checkpoint_exists,
    get_checkpoint_mtimes,
    remove_checkpoint,
    update_checkpoint_state,
)
from tf_accum.graph.graph import GLOBAL_VARIABLES, Graph, Operation, Tensor
from tf_accum.graph.ops import constant, group, identity, placeholder_with_default
from tf_accum.graph.tensor_shape import TensorShape
from tf_accum.graph.variables import Variable

_log = logging.getLogger(__name__)

Array = np.ndarray[Any, Any]
SAVEABLE_OBJECTS = "saveable_objects"


class SaverDef:
    """What names a Saver's ops have, as TensorFlow's ``SaverDef`` message holds them."""

    V1 = 1
    V2 = 2

    def __init__(
        self,
        filename_tensor_name: str = "",
        save_tensor_name: str = "",
        restore_op_name: str = "",
        max_to_keep: int = 0,
        sharded: bool = False,
        keep_checkpoint_every_n_hours: float = 0.0,
        version: int = 2,
    ) -> None:
        self.filename_tensor_name = filename_tensor_name
        self.save_tensor_name = save_tensor_name
        self.restore_op_name = restore_op_name
        self.max_to_keep = max_to_keep
        self.sharded = sharded
        self.keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self.version = version

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"SaverDef({fields})"


def _text(value: Any) -> str:
    """A string tensor's value (a 0-d object array, bytes or str) as str."""
    if isinstance(value, np.ndarray):
        value = value.item() if value.shape == () else value.reshape(-1)[0]
    if isinstance(value, bytes):
        return value.decode()
    return str(value)


def _variables_by_name(var_list: Any) -> dict[str, Variable]:
    """The variables to save, by the name in the checkpoint.

    Raises:
        TypeError: something that is not a variable.
        ValueError: two variables with the same name.
    """
    if isinstance(var_list, dict):
        named = {}
        for name, variable in var_list.items():
            if not isinstance(variable, Variable):
                raise TypeError(
                    "names_to_saveables must be a dict mapping string names to "
                    f"Tensors/Variables. Not a variable: {variable}"
                )
            named[str(name)] = variable
        return named
    if isinstance(var_list, Variable):
        var_list = [var_list]
    named = {}
    for variable in var_list:
        if not isinstance(variable, Variable):
            raise TypeError(f"Variable to save is not a Variable: {variable}")
        name = variable.name[: -len(":0")] if variable.name.endswith(":0") else variable.name
        if name in named:
            raise ValueError(f"At least two variables have the same name: {name}")
        named[name] = variable
    return named


class Saver:
    """Saves and restores variables (``tf.compat.v1.train.Saver``).

    Args:
        var_list: the variables: a list (saved under their names), a dict of
            checkpoint names to variables, or None (every global variable).
        max_to_keep: how many recent checkpoints ``save`` keeps; older ones are
            deleted (None or 0: all are kept).
        keep_checkpoint_every_n_hours: besides those, keep one checkpoint per
            this many hours.
        name: the name scope of the ops (default ``save``).
        allow_empty: with no variables, make a Saver that does nothing instead of failing.
        save_relative_paths: the state file names checkpoints relative to its directory.
        filename: the default checkpoint path of the ops (``save/Const``).
        defer_build: build the ops at ``build()`` instead of now.
        sharded, restore_sequentially, reshape, builder, write_version,
        pad_step_number: accepted; one data file is written, in format V2
        (``pad_step_number`` pads the step to 8 digits as TensorFlow does).

    Raises:
        ValueError: no variables to save (without ``allow_empty``), or two with one name.
        TypeError: something in ``var_list`` that is not a variable.
        RuntimeError: eagerly, without a ``var_list``.
    """

    def __init__(
        self,
        var_list: Any = None,
        reshape: bool = False,
        sharded: bool = False,
        max_to_keep: int | None = 5,
        keep_checkpoint_every_n_hours: float = 10000.0,
        name: str | None = None,
        restore_sequentially: bool = False,
        saver_def: Any = None,
        builder: Any = None,
        defer_build: bool = False,
        allow_empty: bool = False,
        write_version: int = SaverDef.V2,
        pad_step_number: bool = False,
        save_relative_paths: bool = False,
        filename: str | None = None,
    ) -> None:
        if saver_def is not None:
            raise NotImplementedError(
                "tf_accum's Saver cannot be rebuilt from a SaverDef (no meta graph import)"
            )
        if write_version != SaverDef.V2:
            _log.warning("tf_accum writes checkpoints in format V2 only; V1 was asked for")
        self._graph = mode.building_graph()
        if self._graph is None and var_list is None:
            raise RuntimeError(
                "When eager execution is enabled, `var_list` must specify a list or dict of "
                "variables to save"
            )
        self._var_list = var_list
        self._name = name
        self._filename = filename
        self._allow_empty = allow_empty
        self._pad_step_number = pad_step_number
        self._save_relative_paths = save_relative_paths
        self._lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._last_checkpoints: list[tuple[str, float]] = []
        self._to_delete: list[tuple[str, float]] = []
        hours = keep_checkpoint_every_n_hours
        self._next_checkpoint_time = time.time() + hours * 3600
        self.saver_def = SaverDef(
            max_to_keep=max_to_keep or 0,
            sharded=sharded,
            keep_checkpoint_every_n_hours=hours,
            version=SaverDef.V2,
        )
        self._variables: dict[str, Variable] = {}
        self._is_empty = False
        self._is_built = False
        if not defer_build:
            self.build()

    def build(self) -> None:
        """Build the save and restore ops (done by the constructor unless ``defer_build``).

        Raises:
            ValueError: no variables to save (without ``allow_empty``).
        """
        if self._is_built:
            return
        var_list = self._var_list
        if var_list is None:
            graph = self._graph or mode.get_default_graph()
            var_list = graph.get_collection(GLOBAL_VARIABLES) + graph.get_collection(
                SAVEABLE_OBJECTS
            )
        if not var_list:
            if not self._allow_empty:
                raise ValueError("No variables to save")
            self._is_empty = True
            self._is_built = True
            return
        self._variables = _variables_by_name(var_list)
        if self._graph is not None:
            self._build_ops(self._graph)
        self._is_built = True

    def _build_ops(self, graph: Graph) -> None:
        names = list(self._variables)
        variables = [self._variables[n] for n in names]
        dtypes = [v.dtype for v in variables]
        with graph.as_default(), graph.name_scope(self._name or "save") as scope:
            filename = placeholder_with_default(self._filename or "model", (), name="filename")
            prefix = placeholder_with_default(filename, (), name="Const")
            with graph.name_scope(f"{scope}SaveV2/"):
                save_names = constant(names, name="tensor_names")
                save_slices = constant([""] * len(names), name="shape_and_slices")
            values = [v.graph_element for v in variables]
            save = graph.create_op(
                "SaveV2",
                [prefix, save_names, save_slices, *values],
                [],
                _save_kernel(dtypes),
                name="SaveV2",
                attrs={"dtypes": dtypes},
            )
            with graph.control_dependencies([save]):
                saved = identity(prefix, name="control_dependency")
            with graph.name_scope(f"{scope}RestoreV2/"):
                restore_names = constant(names, name="tensor_names")
                restore_slices = constant([""] * len(names), name="shape_and_slices")
            restore = graph.create_op(
                "RestoreV2",
                [prefix, restore_names, restore_slices],
                [(dtype, TensorShape(None)) for dtype in dtypes],
                _restore_kernel(dtypes),
                name="RestoreV2",
                attrs={"dtypes": dtypes},
            )
            assigns = []
            for variable, restored in zip(variables, restore.outputs, strict=True):
                assigns.append(variable.assign(identity(restored), read_value=False))
            restore_all = group(*assigns, name="restore_all")
        assert isinstance(restore_all, Operation)
        self.saver_def.filename_tensor_name = prefix.name
        self.saver_def.save_tensor_name = saved.name
        self.saver_def.restore_op_name = restore_all.name
        self._prefix: Tensor = prefix
        self._saved: Tensor = saved
        self._restore_all: Operation = restore_all

    # --- the checkpoints kept ---

    @property
    def last_checkpoints(self) -> list[str]:
        """The checkpoints this Saver still keeps, oldest first."""
        with self._lock:
            return [path for path, _ in self._last_checkpoints]

    def set_last_checkpoints(self, last_checkpoints: list[str]) -> None:
        """Set the kept checkpoints (never deleted by ``max_to_keep``)."""
        if not isinstance(last_checkpoints, list):
            raise TypeError("last_checkpoints must be a list")
        with self._lock:
            self._last_checkpoints = [(path, float("inf")) for path in last_checkpoints]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time: list[Any]) -> None:
        """Set the kept checkpoints and the times they were saved at."""
        if not isinstance(last_checkpoints_with_time, list):
            raise TypeError("last_checkpoints_with_time must be a list")
        with self._lock:
            self._last_checkpoints = [(str(p), float(t)) for p, t in last_checkpoints_with_time]

    def recover_last_checkpoints(self, checkpoint_paths: Sequence[str]) -> None:
        """Keep those of ``checkpoint_paths`` that exist (after a restart), with their
        files' times, so that ``max_to_keep`` deletes them in turn."""
        found = []
        for path in checkpoint_paths:
            times = get_checkpoint_mtimes([path])
            if times:
                found.append((path, times[0]))
        self.set_last_checkpoints_with_time(found)

    def _record(self, path: str) -> list[tuple[str, float]]:
        """Add ``path`` to the kept checkpoints; those to delete now."""
        if not self.saver_def.max_to_keep:
            return []
        with self._lock:
            self._last_checkpoints = [c for c in self._last_checkpoints if c[0] != path]
            self._last_checkpoints.append((path, time.time()))
            if len(self._last_checkpoints) > self.saver_def.max_to_keep:
                self._to_delete.append(self._last_checkpoints.pop(0))
            if not self._to_delete:
                return []
            oldest = self._to_delete.pop(0)
            if oldest[1] > self._next_checkpoint_time:
                # kept: one every keep_checkpoint_every_n_hours
                self._next_checkpoint_time += self.saver_def.keep_checkpoint_every_n_hours * 3600
                return []
            return [oldest]

    # --- saving and restoring ---

    def save(
        self,
        sess: Any,
        save_path: Any,
        global_step: Any = None,
        latest_filename: str | None = None,
        meta_graph_suffix: str = "meta",
        write_meta_graph: bool = True,
        write_state: bool = True,
        strip_default_attrs: bool = False,
        save_debug_info: bool = False,
    ) -> str | None:
        """Save the variables' values in ``sess`` as checkpoint ``save_path``
        (``save_path-<global_step>`` with a ``global_step``: a number, or a
        variable or tensor whose value it is).

        With ``write_state``, the directory's state file (``latest_filename``,
        default ``checkpoint``) names it as the latest, and checkpoints beyond
        ``max_to_keep`` are deleted. ``write_meta_graph`` writes nothing.

        Returns:
            The checkpoint's prefix (None for an empty Saver).

        Raises:
            ValueError: ``latest_filename`` with a directory, ``save_path`` that is
                the state file, or a directory that does not exist.
            TypeError: ``sess`` is not a session.
            RuntimeError: ``defer_build`` and ``build()`` was not called.
        """
        if not self._is_built:
            raise RuntimeError("`build()` should be called before save if defer_build==True")
        latest_filename = latest_filename or "checkpoint"
        if os.path.split(latest_filename)[0]:
            raise ValueError("'latest_filename' must not contain path components")
        save_path = _text(os.fspath(save_path) if isinstance(save_path, os.PathLike) else save_path)
        if global_step is not None:
            if not isinstance(global_step, (int, np.integer)):
                from tf_accum.graph.global_step import global_step as step_value

                global_step = step_value(sess, global_step)
            step = int(global_step)
            suffix = f"{step:08d}" if self._pad_step_number else str(step)
            checkpoint_file = f"{save_path}-{suffix}"
        else:
            checkpoint_file = save_path
            if os.path.basename(save_path) == latest_filename and not self.saver_def.sharded:
                raise ValueError(
                    f"'latest_filename' collides with 'save_path': '{latest_filename}' and "
                    f"'{save_path}'"
                )
        if self._graph is not None and not callable(getattr(sess, "run", None)):
            raise TypeError(f"'sess' must be a Session; {sess}")
        save_dir = os.path.dirname(save_path)
        if self._is_empty:
            return None
        try:
            if self._graph is None:
                _write(checkpoint_file, self._variables)
                path = checkpoint_file
            else:
                path = _text(sess.run(self._saved, {self._prefix: checkpoint_file}))
            if write_state:
                # one save's bookkeeping at a time: the state file written last names
                # the checkpoints kept after the last save recorded
                with self._state_lock:
                    doomed = self._record(path)
                    update_checkpoint_state(
                        save_dir,
                        path,
                        self.last_checkpoints,
                        latest_filename,
                        save_relative_paths=self._save_relative_paths,
                    )
                    for old, _ in doomed:
                        try:
                            remove_checkpoint(old, meta_graph_suffix=meta_graph_suffix)
                        except OSError as error:
                            _log.warning("Ignoring: %s", error)
        except (errors.FailedPreconditionError, errors.NotFoundError) as error:
            if not os.path.isdir(save_dir or "."):
                raise ValueError(
                    f"Parent directory of {save_path} doesn't exist, can't save."
                ) from None
            raise error
        return path

    def restore(self, sess: Any, save_path: Any) -> None:
        """Set the variables in ``sess`` to their values in checkpoint ``save_path``
        (uninitialised variables become initialised).

        Raises:
            ValueError: ``save_path`` is None or no checkpoint.
            NotFoundError: a variable the checkpoint does not have.
            InvalidArgumentError: a variable whose dtype differs from the checkpoint's.
        """
        if self._is_empty:
            return
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        prefix = _text(os.fspath(save_path) if isinstance(save_path, os.PathLike) else save_path)
        if not checkpoint_exists(prefix):
            raise ValueError(f"The passed save_path is not a valid checkpoint: {prefix}")
        _log.info("Restoring parameters from %s", prefix)
        try:
            if self._graph is None:
                values = _read(prefix, list(self._variables), self._dtypes())
                for variable, value in zip(self._variables.values(), values, strict=True):
                    variable.assign(value)
            else:
                sess.run(self._restore_all, {self._prefix: prefix})
        except errors.NotFoundError as error:
            raise _restore_error(
                error, "a Variable name or other graph key that is missing"
            ) from None
        except errors.InvalidArgumentError as error:
            raise _restore_error(
                error, "a mismatch between the current graph and the graph"
            ) from None

    def _dtypes(self) -> list[DType]:
        return [v.dtype for v in self._variables.values()]

    def as_saver_def(self) -> SaverDef:
        return self.saver_def

    def to_proto(self, export_scope: Any = None) -> SaverDef:
        return self.saver_def


def _restore_error(error: errors.OpError, cause: str) -> errors.OpError:
    message = (
        f"Restoring from checkpoint failed. This is most likely due to {cause} from the "
        "checkpoint. Please ensure that you have not altered the graph expected based on the "
        f"checkpoint. Original error:\n\n{error.message}"
    )
    kind: Any = type(error)
    wrapped: errors.OpError = kind(error.node_def, error.op, message)
    return wrapped


def _write(prefix: str, variables: dict[str, Variable]) -> None:
    write_checkpoint(prefix, {name: (v.numpy(), v.dtype) for name, v in variables.items()})


def _read(prefix: str, names: list[str], dtypes: list[DType]) -> list[Array]:
    """The tensors ``names`` of checkpoint ``prefix``, checked against ``dtypes``.

    Raises:
        NotFoundError: no such checkpoint, or a name it lacks.
        InvalidArgumentError: a tensor of another dtype.
    """
    reader = CheckpointReader(prefix)
    values = []
    for name, dtype in zip(names, dtypes, strict=True):
        stored = reader.dtype(name)
        if stored != dtype:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"tensor_name = {name}; expected dtype {dtype.kernel_name} does not equal "
                f"original dtype {stored.kernel_name}",
            )
        values.append(reader.tensor(name))
    return values


def _save_kernel(dtypes: list[DType]) -> Any:
    def save(context: Any, inputs: list[Any]) -> tuple[()]:
        prefix, names, _slices, *values = inputs
        names = [_text(n) for n in np.asarray(names).reshape(-1)]
        write_checkpoint(
            _text(prefix),
            {
                name: (value, dtype)
                for name, value, dtype in zip(names, values, dtypes, strict=True)
            },
        )
        return ()

    return save


def _restore_kernel(dtypes: list[DType]) -> Any:
    def restore(context: Any, inputs: list[Any]) -> list[Array]:
        prefix, names, _slices = inputs
        names = [_text(n) for n in np.asarray(names).reshape(-1)]
        return _read(_text(prefix), names, dtypes)

    return restore


__all__ = ["Saver", "SaverDef"]
