"""torch.utils.data's dataset classes (tape/train/datasets.py) against torch's: Subset, ConcatDataset (and ``+``),
StackDataset, IterableDataset and ChainDataset through a DataLoader, random_split's lengths and fractions, and
get_worker_info. Each was an AttributeError before."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the oracle

import tape.torch as ours  # noqa: E402
from tape.torch.utils import data as D  # noqa: E402

T = torch.utils.data


def _values(batches):
    """Batches as nested Python lists, whichever library made them."""

    def plain(x):
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [plain(v) for v in x]
        return x.tolist() if hasattr(x, "tolist") else x

    return [plain(b) for b in batches]


def _both(build, **loader):
    """build(data_module, namespace) -> dataset, loaded by each library's DataLoader."""
    got = _values(D.DataLoader(build(D, ours), **loader))
    want = _values(T.DataLoader(build(T, torch), **loader))
    assert got == want
    return got


def test_map_style_wrappers_load_as_torchs():
    def base(m, ns):
        return m.TensorDataset(ns.arange(10), ns.arange(10) * 2)

    _both(lambda m, ns: m.Subset(base(m, ns), [7, 2, 2, 0]), batch_size=3)
    _both(lambda m, ns: m.ConcatDataset([base(m, ns), m.Subset(base(m, ns), [1, 4])]), batch_size=4)
    _both(lambda m, ns: base(m, ns) + m.Subset(base(m, ns), [9]), batch_size=5, drop_last=True)
    _both(lambda m, ns: m.StackDataset(base(m, ns), m.Subset(base(m, ns), list(range(9, -1, -1)))), batch_size=4)
    _both(lambda m, ns: m.StackDataset(a=base(m, ns), b=base(m, ns)), batch_size=6)
    for m in (D, T):
        joined = m.ConcatDataset([base(m, torch if m is T else ours)] * 2)
        assert [int(joined[k][0]) for k in (-1, -11, 10)] == [9, 9, 0]


class _Counting:
    """An IterableDataset yielding 0 .. n-1 (made for either library)."""

    @staticmethod
    def make(m, n):
        class Counting(m.IterableDataset):
            def __iter__(self):
                return iter(range(n))

        return Counting()


@pytest.mark.parametrize("loader", [dict(batch_size=2), dict(batch_size=2, drop_last=True), dict(batch_size=None)])
def test_iterable_datasets_load_in_order_as_torchs(loader):
    _both(lambda m, ns: _Counting.make(m, 5), **loader)
    _both(lambda m, ns: m.ChainDataset([_Counting.make(m, 3), _Counting.make(m, 2)]), **loader)
    _both(lambda m, ns: _Counting.make(m, 2) + _Counting.make(m, 3), **loader)


def test_an_iterable_dataset_refuses_shuffle_and_samplers():
    with pytest.raises(ValueError, match="DataLoader: an IterableDataset .* got shuffle=True"):
        D.DataLoader(_Counting.make(D, 3), shuffle=True)
    with pytest.raises(ValueError):
        T.DataLoader(_Counting.make(T, 3), shuffle=True)
    with pytest.raises(TypeError, match="has no len"):
        len(_Counting.make(D, 3))


@pytest.mark.parametrize("lengths", [[7, 3], [0.5, 0.5], [0.3, 0.3, 0.4], [0.33, 0.33, 0.34], [1.0, 0.0]])
def test_random_split_sizes_and_cover_as_torchs(lengths):
    """Sizes as torch's rounding gives them; every index once (the permutation is numpy's: not torch's order)."""
    data = list(range(10))
    parts = D.random_split(data, lengths, generator=ours.Generator().manual_seed(0))
    theirs = T.random_split(data, lengths, generator=torch.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [len(p) for p in theirs]
    assert sorted(x for p in parts for x in p) == data
    again = D.random_split(data, lengths, generator=ours.Generator().manual_seed(0))
    assert [list(p) for p in again] == [list(p) for p in parts]  # seeded: reproducible


def test_random_split_refuses_what_torch_refuses():
    for bad in ([5, 4], [0.5, 0.6]):
        with pytest.raises(ValueError):
            T.random_split(list(range(10)), bad)
        with pytest.raises(ValueError, match="random_split: sum of input lengths"):
            D.random_split(list(range(10)), bad)
    # torch splits lengths [-1, 11] into parts of 9 and 1 without a word; a negative length is refused here
    assert [len(p) for p in T.random_split(list(range(10)), [-1, 11])] == [9, 1]
    with pytest.raises(ValueError, match=r"random_split: .*non-negative ints .*got \[-1, 11\]"):
        D.random_split(list(range(10)), [-1, 11])
    assert D.get_worker_info() is T.get_worker_info() is None
    assert np.array_equal(D.Subset(np.arange(5), [4, 1])[[0, 1]], [4, 1])
