"""``tape.data``: torch.utils.data's single-process ``DataLoader`` and ``default_collate``, with the datasets
(tape/train/datasets.py) and samplers (tape/train/samplers.py).

A ``DataLoader`` cuts a dataset into batches of ``batch_size`` indices -- in order, or in a permutation drawn
afresh for every pass (``shuffle=True``) from ``generator`` (a ``tape.Generator``; else the default generator that
``tape.manual_seed`` seeds), so a seeded run is reproducible -- drops the last short batch with ``drop_last``, and
joins each batch's samples with ``collate_fn`` (``default_collate``: Tensors, numpy arrays and Python numbers stacked
into one Tensor along a new first dim; tuples, lists and dicts collated field by field). The permutation is numpy's
(PCG64), so a seed gives other batches than torch's for the same seed.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np

import ops

from .. import random
from ..checks import integer, require_bool
from ..tensors import Tensor
from .datasets import *  # noqa: F403  -- torch.utils.data's datasets and random_split
from .datasets import IterableDataset
from .datasets import __all__ as _datasets
from .samplers import *  # noqa: F403  -- torch.utils.data's samplers
from .samplers import BatchSampler
from .samplers import __all__ as _samplers

__all__ = ["DataLoader", "default_collate", *_datasets, *_samplers]


def default_collate(batch: list):
    """torch's default_collate for the kinds minitape has: Tensors and numpy arrays stacked (``ops.stack``: a
    gradient flows back to samples that require one), Python ints as int64 and floats as float64 (torch's), bools as
    bool; dicts of them key by key, tuples and lists field by field (a list, as torch's; a namedtuple stays one);
    strings and bytes kept as a list."""
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
    if isinstance(first, str | bytes):
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
        shuffle: bool | None = False,
        sampler=None,
        batch_sampler=None,
        num_workers: int = 0,
        collate_fn=None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        **worker_options,
    ):
        if batch_size is not None:
            batch_size = integer("DataLoader", "batch_size", batch_size, at_least=1)
        shuffle = bool(shuffle) if shuffle is None else shuffle
        require_bool("DataLoader", "shuffle", shuffle)
        require_bool("DataLoader", "drop_last", drop_last)
        _check_loader_options(shuffle, sampler, batch_sampler, batch_size, drop_last, num_workers, worker_options)
        if isinstance(dataset, IterableDataset) and (shuffle or sampler is not None or batch_sampler is not None):
            given = "shuffle=True" if shuffle else "a sampler" if sampler is not None else "a batch_sampler"
            raise ValueError(
                f"DataLoader: an IterableDataset gives its samples in its own order; expected no shuffle, sampler "
                f"or batch_sampler, got {given}"
            )
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, bool(shuffle), drop_last
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        self.generator = generator
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.num_workers, self.pin_memory = num_workers, pin_memory  # one process, one device: kept, not used

    def _iterable_batches(self):
        """Batches of what an IterableDataset yields, in order (torch's, with one process)."""
        samples = iter(self.dataset)
        if self.batch_size is None:
            yield from samples
            return
        while batch := list(itertools.islice(samples, self.batch_size)):
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield self.collate_fn(batch)

    def _order(self):
        if self.sampler is not None:
            return self.sampler
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        return random.as_generator("DataLoader", self.generator).permutation(n)

    def __iter__(self):
        if isinstance(self.dataset, IterableDataset):
            yield from self._iterable_batches()
            return
        if self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield self.collate_fn([self.dataset[int(i)] for i in indices])
            return
        order = self._order()
        if self.batch_size is None:  # torch's automatic batching off: one sample at a time, not collated
            for i in order:
                yield self.dataset[int(i)]
            return
        for indices in BatchSampler(order, self.batch_size, self.drop_last):
            yield self.collate_fn([self.dataset[int(i)] for i in indices])

    def __len__(self) -> int:
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        n = len(self.dataset) if self.sampler is None else len(self.sampler)
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)


def _check_loader_options(shuffle, sampler, batch_sampler, batch_size, drop_last, num_workers, worker_options) -> None:
    """torch's rules for combining DataLoader's arguments; worker processes are not there (one process)."""
    if sampler is not None and shuffle:
        raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
    if batch_size is None and drop_last:
        raise ValueError(
            "DataLoader: batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
        )
    if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
        raise ValueError(
            "DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
        )
    if integer("DataLoader", "num_workers", num_workers, at_least=0) > 0:
        raise ValueError(
            f"DataLoader: num_workers={num_workers}: minitape's loader runs in this process only; pass num_workers=0"
        )
    unknown = set(worker_options) - {"prefetch_factor", "persistent_workers", "pin_memory_device", "in_order"}
    if unknown:
        raise TypeError(f"DataLoader: unexpected keyword argument '{sorted(unknown)[0]}'")
