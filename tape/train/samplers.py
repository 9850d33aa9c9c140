"""torch.utils.data's samplers: ``SequentialSampler``, ``RandomSampler`` (without or with replacement; with it, the
indices are drawn lazily in chunks, so ``num_samples=10**10`` builds no index list), ``SubsetRandomSampler``,
``WeightedRandomSampler`` and ``BatchSampler``. Random ones draw from ``generator`` (a ``tape.Generator``) or the
default generator, with numpy's streams: a seed gives other indices than torch's."""

from __future__ import annotations

import numpy as np

from .. import random
from ..checks import integer, require_bool

__all__ = [
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "BatchSampler",
]

_CHUNK = 32  # indices drawn at a time with replacement (torch's chunk)


class Sampler:
    """Base class: an iterable of dataset indices (torch's protocol; ``__len__`` where the count is known)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random order of the dataset (``num_samples`` beyond its length: further permutations, as torch's), or with
    ``replacement=True`` ``num_samples`` independent uniform draws, made lazily."""

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None, generator=None):
        require_bool("RandomSampler", "replacement", replacement)
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = (
            None if num_samples is None else integer("RandomSampler", "num_samples", num_samples, at_least=1)
        )

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, rng = len(self.data_source), random.as_generator("RandomSampler", self.generator)
        if self.replacement:
            for start in range(0, self.num_samples, _CHUNK):
                yield from rng.integers(0, n, size=min(_CHUNK, self.num_samples - start)).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n)[: self.num_samples % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order, drawn afresh each pass."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        order = random.as_generator("SubsetRandomSampler", self.generator).permutation(len(self.indices))
        return (self.indices[int(i)] for i in order)

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        self.weights = np.asarray(weights, dtype=np.float64)
        if self.weights.ndim != 1 or (self.weights < 0).any() or not self.weights.sum() > 0:
            raise ValueError("WeightedRandomSampler: weights must be a 1-D sequence of non-negative numbers, not all 0")
        self.num_samples = integer("WeightedRandomSampler", "num_samples", num_samples, at_least=1)
        require_bool("WeightedRandomSampler", "replacement", replacement)
        self.replacement, self.generator = replacement, generator

    def __iter__(self):
        rng = random.as_generator("WeightedRandomSampler", self.generator)
        p = self.weights / self.weights.sum()
        return iter(rng.choice(len(p), size=self.num_samples, replace=self.replacement, p=p).tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``, the last one shorter unless ``drop_last``."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        self.sampler, self.batch_size = sampler, integer("BatchSampler", "batch_size", batch_size, at_least=1)
        require_bool("BatchSampler", "drop_last", drop_last)
        self.drop_last = drop_last

    def __iter__(self):
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
