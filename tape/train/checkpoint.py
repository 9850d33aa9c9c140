"""Checkpoints: a state dict (name -> numeric array) saved as an ``.npz`` file, safely.

- ``save`` writes to a temporary file in the target's directory, flushes it to disk and renames it over
  the target (``os.replace`` is atomic), so a crash mid-write never leaves a half-written checkpoint in
  place: the target holds either the old file or the complete new one.
- ``load`` reads with ``np.load(allow_pickle=False)``: a file carrying a pickle payload (object arrays)
  is refused, never executed. A file that is not a zip archive, is truncated or corrupted, or is an
  ``.npz`` that minitape did not write, raises ``CheckpointError`` saying so.

Loading the arrays into a model (and the errors for a missing, extra or mis-shaped parameter) is
``Module.load_state_dict``: ``model.load_state_dict(checkpoint.load(path))``.
"""

from __future__ import annotations

import os
import tempfile
import zipfile

import numpy as np

from ..tensors import Tensor

__all__ = ["save", "load", "CheckpointError", "FORMAT_KEY"]

FORMAT_KEY = "__minitape_checkpoint__"
FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """The file is not a readable minitape checkpoint (missing, corrupted, truncated, foreign or unsafe)."""


def _as_array(name: str, value) -> np.ndarray:
    array = value.data if isinstance(value, Tensor) else np.asarray(value)
    if array.dtype.kind not in "fiub":
        raise TypeError(f"checkpoint.save: entry '{name}' has dtype {array.dtype}; only numeric and bool arrays "
                        f"can be saved (no object arrays, which would need pickling)")
    return array


def save(state_dict: dict, path: str | os.PathLike) -> str:
    """Write ``state_dict`` (str -> array or Tensor) to ``path`` atomically; returns the path."""
    path = os.fspath(path)
    if not isinstance(state_dict, dict):
        raise TypeError(f"checkpoint.save: expected a dict of arrays (e.g. model.state_dict()), got "
                        f"{type(state_dict).__name__}")
    arrays = {}
    for name, value in state_dict.items():
        if not isinstance(name, str) or not name or name == FORMAT_KEY:
            raise ValueError(f"checkpoint.save: invalid entry name {name!r}")
        arrays[name] = _as_array(name, value)
    arrays[FORMAT_KEY] = np.array(FORMAT_VERSION, dtype=np.int64)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes the file private (0600); give it a normal file's mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def load(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read a checkpoint written by ``save``: {name: array}, in the order they were saved."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint.load: no such file: {path}")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic[:1] == b"\x80":
        raise CheckpointError(f"checkpoint.load: {path} is a pickle file; refusing to load it (checkpoints are "
                              f".npz archives of numeric arrays, read without unpickling)")
    if magic != b"PK\x03\x04":
        raise CheckpointError(f"checkpoint.load: {path} is not a minitape checkpoint (not an .npz/zip archive; "
                              f"starts with {magic!r})")
    try:
        with np.load(path, allow_pickle=False) as archive:
            names = list(archive.files)
            if FORMAT_KEY not in names:
                raise CheckpointError(f"checkpoint.load: {path} is an .npz archive but not a minitape checkpoint "
                                      f"(no '{FORMAT_KEY}' entry); entries: {names[:8]}")
            state = {name: archive[name] for name in names}  # reads (and CRC-checks) every entry now
    except CheckpointError:
        raise
    except ValueError as e:
        if "pickle" in str(e).lower():
            raise CheckpointError(f"checkpoint.load: {path} contains object arrays (a pickle payload); refusing "
                                  f"to load it -- checkpoints hold numeric arrays only") from None
        raise CheckpointError(f"checkpoint.load: {path} is corrupted or not a checkpoint: {e}") from None
    except (zipfile.BadZipFile, EOFError, OSError, KeyError) as e:
        raise CheckpointError(f"checkpoint.load: {path} is truncated, corrupted or not a checkpoint "
                              f"({type(e).__name__}: {e})") from None
    version = state.pop(FORMAT_KEY)
    if version.shape != () or version.dtype.kind not in "iu" or int(version) > FORMAT_VERSION:
        raise CheckpointError(f"checkpoint.load: {path} has an unsupported checkpoint format version {version}")
    for name, array in state.items():
        if array.dtype.kind not in "fiub":
            raise CheckpointError(f"checkpoint.load: entry '{name}' of {path} has dtype {array.dtype}; refusing it")
    return state
