"""``tape.data``: torch.utils.data's ``Dataset``, ``TensorDataset`` and a single-process ``DataLoader``.

A ``DataLoader`` cuts a dataset into batches of ``batch_size`` indices -- in order, or in a permutation drawn
afresh for every pass (``shuffle=True``) from ``generator`` (a ``tape.Generator``; else the default generator that
``tape.manual_seed`` seeds), so a seeded run is reproducible -- drops the last short batch with ``drop_last``, and
joins each batch's samples with ``collate_fn`` (``default_collate``: Tensors, numpy arrays and Python numbers stacked
into one Tensor along a new first dim; tuples, lists and dicts collated field by field). The permutation is numpy's
(PCG64), so a seed gives other batches than torch's for the same seed.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np

import ops

from .. import random
from ..checks import integer, require_bool
from ..tensors import Tensor

__all__ = ["Dataset", "TensorDataset", "DataLoader", "default_collate"]


class Dataset:
    """A map-style dataset: ``dataset[i]`` is sample i, ``len(dataset)`` their number (torch's protocol)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} does not implement __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not implement __len__")


class TensorDataset(Dataset):
    """Samples ``(t[i] for t in tensors)`` of tensors (or arrays) that share their first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor")
        self.tensors = tuple(t if isinstance(t, Tensor) else Tensor(np.asarray(t)) for t in tensors)
        sizes = [t.shape[0] if t.ndim else None for t in self.tensors]
        if None in sizes or len(set(sizes)) != 1:
            shapes = ", ".join(str(t.shape) for t in self.tensors)
            raise ValueError(f"TensorDataset: every tensor must have the same first dimension, got shapes {shapes}")

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


def default_collate(batch: list):
    """torch's default_collate for the kinds minitape has: Tensors and numpy arrays stacked (``ops.stack``: a
    gradient flows back to samples that require one), Python ints as int64 and floats as float64 (torch's), bools as
    bool; dicts of them key by key, tuples and lists field by field (a list, as torch's; a namedtuple stays one);
    strings kept as a list."""
    first = batch[0]
    if isinstance(first, Tensor):
        return ops.stack(list(batch), 0)
    if isinstance(first, np.ndarray | np.generic):
        return Tensor(np.stack([np.asarray(b) for b in batch]))
    if isinstance(first, bool | np.bool_):
        return Tensor(np.array(batch, dtype=np.bool_))
    if isinstance(first, numbers.Integral):
        return Tensor(np.array(batch, dtype=np.int64))
    if isinstance(first, numbers.Real):
        return Tensor(np.array(batch, dtype=np.float64))
    if isinstance(first, str):
        return list(batch)
    if isinstance(first, Mapping):
        return {key: default_collate([b[key] for b in batch]) for key in first}
    if isinstance(first, Sequence):
        if any(len(b) != len(first) for b in batch):
            raise RuntimeError("default_collate: each sample in a batch must have the same number of fields")
        fields = [default_collate(list(field)) for field in zip(*batch)]
        return type(first)(*fields) if hasattr(first, "_fields") else fields  # a list for tuples too, as torch's
    raise TypeError(
        f"default_collate: a batch must hold Tensors, numpy arrays, numbers, strings, dicts or sequences; "
        f"got {type(first).__name__}"
    )


class DataLoader:
    """Batches of a map-style dataset, as torch.utils.data.DataLoader with ``num_workers=0``."""

    def __init__(
        self,
        dataset,
        batch_size: int | None = 1,
        shuffle: bool = False,
        *,
        drop_last: bool = False,
        collate_fn=None,
        generator=None,
    ):
        if batch_size is not None:
            batch_size = integer("DataLoader", "batch_size", batch_size, at_least=1)
        require_bool("DataLoader", "shuffle", shuffle)
        require_bool("DataLoader", "drop_last", drop_last)
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, bool(shuffle), drop_last
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        self.generator = generator

    def _order(self) -> np.ndarray:
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        return random.as_generator("DataLoader", self.generator).permutation(n)

    def __iter__(self):
        order = self._order()
        if self.batch_size is None:  # torch's automatic batching off: one sample at a time, not collated
            for i in order:
                yield self.dataset[int(i)]
            return
        stop = len(order) - len(order) % self.batch_size if self.drop_last else len(order)
        for start in range(0, stop, self.batch_size):
            yield self.collate_fn([self.dataset[int(i)] for i in order[start : start + self.batch_size]])

    def __len__(self) -> int:
        n = len(self.dataset)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
