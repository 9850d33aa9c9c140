"""``torch.save`` / ``torch.load`` without pickle: an object made of Tensors (Parameters stay Parameters), numpy
arrays, dtypes, numbers, strings, None and dicts / lists / tuples of them -- state dicts, optimizer states, a
training checkpoint's dict -- and whole Modules (class name and attributes) are written as a zip archive of
``.npy`` members: the object's structure as JSON (stored as bytes in a uint8 member) and one member per tensor or
array. Reading uses tape/train/checkpoint.py's
checked reader (no pickle, no object arrays, sizes checked before allocating), so loading a file never runs code:
torch's ``weights_only=True`` guarantee, always. A module loads only when its class was allowed with
``safe_globals([...])`` / ``add_safe_globals`` (torch's weights_only rule; classes are matched by name among those
given, nothing is imported); any other object is refused when saving, naming its type; torch's own pickle-based
files are refused when loading."""

from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np

from tape.devices import device, on_cpu
from tape.tensors import Tensor
from tape.train.checkpoint import CheckpointError, _read_member, _write_archive
from tape.train.nn import Module, Parameter

__all__ = ["save", "load", "safe_globals", "add_safe_globals", "get_safe_globals"]

_MARK = "__minitape_torch_save__.npy"
_STRUCTURE = "structure.npy"
_VERSION = 1


def _encode(obj, arrays: list, path: str, memo: dict):
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if id(obj) in memo:  # a tensor or module met before (tied weights): the same object again on load
        return {"~": "ref", "i": memo[id(obj)]}
    if isinstance(obj, Tensor | Module):
        memo[id(obj)] = len(memo)
        return {"n": memo[id(obj)], **_encode_object(obj, arrays, path, memo)}
    if isinstance(obj, np.ndarray | np.generic):
        arrays.append(np.array(obj))
        return {"~": "array" if isinstance(obj, np.ndarray) else "scalar", "i": len(arrays) - 1}
    if isinstance(obj, np.dtype):
        return {"~": "dtype", "name": obj.name}
    if isinstance(obj, device):
        return {"~": "device", "name": str(obj)}
    if isinstance(obj, list | tuple | set):
        items = [_encode(x, arrays, f"{path}[{i}]", memo) for i, x in enumerate(obj)]
        return items if type(obj) is list else {"~": type(obj).__name__, "items": items}
    if isinstance(obj, dict):
        pairs = [[_encode(k, arrays, path, memo), _encode(v, arrays, f"{path}[{k!r}]", memo)] for k, v in obj.items()]
        return {"~": "dict", "items": pairs}
    raise TypeError(
        f"torch.save: minitape writes tensors, arrays, numbers, strings, None and dicts / lists / tuples of them "
        f"(never pickled objects) and whole Modules; {path} is a {_name(type(obj))}"
    )


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _encode_object(obj, arrays: list, path: str, memo: dict) -> dict:
    """A tensor's values, or a module's class name and attributes."""
    if isinstance(obj, Tensor):
        arrays.append(np.array(obj.detach().numpy()))
        kind = "parameter" if isinstance(obj, Parameter) else "tensor"
        return {"~": kind, "i": len(arrays) - 1, "requires_grad": bool(obj.requires_grad)}
    return {"~": "module", "class": _name(type(obj)), "dict": _encode(dict(vars(obj)), arrays, path, memo)}


def save(obj, f, pickle_module=None, pickle_protocol: int = 2, _use_new_zipfile_serialization: bool = True) -> None:
    """Write ``obj`` to ``f`` (a path or a binary file object)."""
    if pickle_module is not None:
        raise TypeError("torch.save: pickle_module is not supported (minitape never pickles)")
    arrays: list[np.ndarray] = []
    structure = json.dumps({"version": _VERSION, "object": _encode(obj, arrays, "obj", {})}, allow_nan=True)
    members: list[tuple[str, np.ndarray]] = [(_MARK, np.array(_VERSION, dtype=np.int64))]
    members.append((_STRUCTURE, np.frombuffer(structure.encode(), np.uint8)))
    members += [(f"tensors/{i}.npy", a) for i, a in enumerate(arrays)]
    if isinstance(f, str | os.PathLike):
        with open(f, "wb") as out:
            _write_archive(out, members)
    else:
        _write_archive(f, members)


def _decode(node, arrays: dict, memo: dict):
    if not isinstance(node, dict):
        return [_decode(x, arrays, memo) for x in node] if isinstance(node, list) else node
    kind = node["~"]
    if kind == "ref":
        return memo[node["i"]]
    if kind in ("tensor", "parameter"):
        make = Parameter if kind == "parameter" else Tensor
        memo[node["n"]] = make(arrays[node["i"]], requires_grad=node["requires_grad"])
        return memo[node["n"]]
    if kind == "module":
        return _decode_module(node, arrays, memo)
    if kind in ("array", "scalar"):
        return arrays[node["i"]] if kind == "array" else arrays[node["i"]][()]
    if kind == "dtype":
        return np.dtype(node["name"])
    if kind == "device":
        return device(node["name"])
    if kind in ("tuple", "set"):
        return {"tuple": tuple, "set": set}[kind](_decode(x, arrays, memo) for x in node["items"])
    if kind == "dict":
        return {_hashable(_decode(k, arrays, memo)): _decode(v, arrays, memo) for k, v in node["items"]}
    raise CheckpointError(f"torch.load: unknown entry kind {kind!r}")


def _decode_module(node: dict, arrays: dict, memo: dict):
    """A module of a class allowed by ``safe_globals`` / ``add_safe_globals`` (torch's weights_only rule): made
    with ``__new__`` and given its saved attributes -- no ``__init__``, no other code of the file runs."""
    allowed = {_name(cls): cls for cls in _SAFE if isinstance(cls, type) and issubclass(cls, Module)}
    cls = allowed.get(node["class"])
    if cls is None:
        short = node["class"].rpartition(".")[2]
        raise CheckpointError(
            f"torch.load: Weights only load failed: Unsupported global: GLOBAL {node['class']} was not an allowed "
            f"global by default. Please use `torch.serialization.add_safe_globals([{short}])` or the "
            f"`torch.serialization.safe_globals([{short}])` context manager to allowlist this global (minitape "
            f"never loads a class it was not given, also with weights_only=False)"
        )
    module = cls.__new__(cls)
    memo[node["n"]] = module
    for name, value in _decode(node["dict"], arrays, memo).items():
        object.__setattr__(module, name, value)
    return module


def _hashable(key):
    return tuple(key) if isinstance(key, list) else key


def _archive(f) -> tuple[zipfile.ZipFile, int, str]:
    where = os.fspath(f) if isinstance(f, str | os.PathLike) else repr(f)
    if isinstance(f, str | os.PathLike):
        with open(f, "rb") as file:
            data = file.read()
    else:
        data = f.read()
    if data[:1] == b"\x80":
        raise CheckpointError(f"torch.load: {where} is a pickle file; minitape never unpickles")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise CheckpointError(f"torch.load: {where} is not a file written by tape.torch.save") from None
    if _MARK not in zf.namelist():
        raise CheckpointError(
            f"torch.load: {where} is not a file written by tape.torch.save (a file torch.save wrote holds pickled "
            f"data, which minitape never loads: in torch, save its state_dict's tensors with tape.torch-readable "
            f"numbers, e.g. numpy arrays, or load it with torch and convert)"
        )
    return zf, len(data), where


def load(f, map_location=None, pickle_module=None, *, weights_only: bool | None = None, mmap=None, **kwargs):
    """Read what ``save`` wrote. ``map_location`` may name the CPU (or be a function / dict, ignored: there is one
    device); ``weights_only`` is accepted either way -- loading never runs code."""
    if isinstance(map_location, str | device):
        on_cpu("torch.load", "map_location", map_location)
    zf, size, where = _archive(f)
    with zf:
        arrays = {}
        for info in zf.infolist():
            name = info.filename
            if name.startswith("tensors/") and name.endswith(".npy") and name[8:-4].isdigit():
                arrays[int(name[8:-4])] = _read_member(zf, info, where, size)
            elif name not in (_MARK, _STRUCTURE):
                raise CheckpointError(f"torch.load: {where} holds an unexpected member {name!r}")
        raw = _read_member(zf, zf.getinfo(_STRUCTURE), where, size)
    structure = json.loads(raw.tobytes().decode())
    return _decode(structure["object"], arrays, {})


_SAFE: list = []


def add_safe_globals(safe_globals: list) -> None:
    """Accepted for torch's API; minitape's files hold no classes, so nothing needs allowing."""
    _SAFE.extend(safe_globals)


def get_safe_globals() -> list:
    return list(_SAFE)


class safe_globals:  # noqa: N801  -- torch's name
    """Context manager accepted for torch's API (see ``add_safe_globals``)."""

    def __init__(self, safe_globals: list):
        self.safe_globals = list(safe_globals)

    def __enter__(self):
        self._before = len(_SAFE)
        _SAFE.extend(self.safe_globals)

    def __exit__(self, *exc) -> None:
        del _SAFE[self._before :]
