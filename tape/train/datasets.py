"""torch.utils.data's dataset classes and ``random_split``: map-style ``Dataset`` (``a + b`` concatenates),
``TensorDataset``, ``Subset``, ``ConcatDataset``, ``StackDataset``; iterable-style ``IterableDataset`` and
``ChainDataset``; ``random_split`` (lengths or fractions, torch's rounding); ``get_worker_info`` (None: the loader
runs in this process). Index arithmetic only: samples are whatever the wrapped datasets return."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence

import numpy as np

from .. import random
from ..tensors import Tensor

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "Subset",
    "ConcatDataset",
    "ChainDataset",
    "StackDataset",
    "random_split",
    "get_worker_info",
]


class Dataset:
    """A map-style dataset: ``dataset[i]`` is sample i, ``len(dataset)`` their number (torch's protocol);
    ``a + b`` is ``ConcatDataset([a, b])``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} does not implement __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not implement __len__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """An iterable-style dataset: subclasses give ``__iter__``; a DataLoader batches what it yields, in order
    (no sampler, no shuffle). ``a + b`` chains them."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement __iter__")

    def __add__(self, other):  # torch's: chaining, not concatenation
        return ChainDataset([self, other])

    def __len__(self) -> int:
        raise TypeError(f"{type(self).__name__} has no len(): an IterableDataset's length is what it yields")


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


class Subset(Dataset):
    """``dataset`` at the given ``indices``: ``subset[i]`` is ``dataset[indices[i]]``."""

    def __init__(self, dataset, indices: Sequence[int]):
        self.dataset, self.indices = dataset, [int(i) for i in indices]

    def __getitem__(self, index):
        if isinstance(index, list):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Map-style datasets one after another: index ``i`` falls in the dataset whose cumulative size passes it
    (negative indices count from the end, as torch's)."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset: does not support IterableDataset (use ChainDataset)")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int):
        if index < 0:
            if -index > len(self):
                raise ValueError("ConcatDataset: absolute value of index should not exceed dataset length")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        if which == len(self.datasets):
            raise IndexError(f"ConcatDataset: index {index} out of range for {len(self)} samples")
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError("ChainDataset: only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


class StackDataset(Dataset):
    """Datasets of one length side by side: sample i is the tuple (positional) or dict (keywords) of theirs."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("StackDataset: supports either positional or keyword datasets, not both")
        self.datasets = args or kwargs
        sizes = {len(d) for d in (args or kwargs.values())}
        if len(sizes) != 1:
            raise ValueError(f"StackDataset: size mismatch between datasets, got lengths {sorted(sizes)}")
        self._length = sizes.pop()

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self) -> int:
        return self._length


def random_split(dataset, lengths: Sequence, generator=None) -> list[Subset]:
    """``dataset`` split into non-overlapping ``Subset``s of the given lengths, or fractions summing to 1 (torch's
    rounding: each ``floor(n * fraction)``, the remainder given one by one from the first). The permutation is
    numpy's from ``generator`` (a ``tape.Generator``; else the default one), so a seed splits otherwise than
    torch's."""
    n = len(dataset)
    lengths = list(lengths)
    if lengths and math.isclose(sum(lengths), 1.0) and sum(lengths) <= 1:
        for k, fraction in enumerate(lengths):
            if not 0 <= fraction <= 1:
                raise ValueError(f"random_split: fraction at index {k} is not between 0 and 1, got {fraction}")
        counts = [int(math.floor(n * f)) for f in lengths]
        for k in range(n - sum(counts)):
            counts[k % len(counts)] += 1
        lengths = counts
    if any(isinstance(x, bool) or int(x) != x or x < 0 for x in lengths) or sum(lengths) != n:
        raise ValueError(
            f"random_split: sum of input lengths ({sum(lengths)}) does not equal the length of the input dataset "
            f"({n}); give non-negative ints summing to it or fractions summing to 1, got {lengths}"
        )
    order = random.as_generator("random_split", generator).permutation(n)
    ends = list(itertools.accumulate(int(x) for x in lengths))
    return [Subset(dataset, order[end - int(x) : end].tolist()) for x, end in zip(lengths, ends)]


def get_worker_info():
    """None: minitape's DataLoader runs in the calling process (torch returns None in the main process)."""
    return None
