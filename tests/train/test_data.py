"""tape.data (tape/train/data.py) against torch.utils.data: batches, lengths, drop_last and default_collate equal
torch's; a seeded shuffle is reproducible, a permutation per pass, and new each pass."""

import numpy as np
import pytest

import tape
from tape.train.data import DataLoader, Dataset, TensorDataset, default_collate


def _as_numpy(x):
    if isinstance(x, dict):
        return {k: _as_numpy(v) for k, v in x.items()}
    if isinstance(x, tuple | list):
        return type(x)(_as_numpy(v) for v in x)
    return x.numpy() if hasattr(x, "numpy") else x


def _assert_same(ours, theirs):
    assert type(ours) is type(theirs) or (hasattr(ours, "dtype") and hasattr(theirs, "dtype"))
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs)
        for k in theirs:
            _assert_same(ours[k], theirs[k])
    elif isinstance(theirs, tuple | list):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _assert_same(a, b)
    else:
        np.testing.assert_array_equal(ours, theirs, strict=True)


@pytest.mark.parametrize("n,batch_size,drop_last", [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, False)])
def test_in_order_batches_equal_torch(torch, n, batch_size, drop_last):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((n, 2, 3)), rng.integers(0, 5, n)
    ours = DataLoader(TensorDataset(tape.tensor(x), y), batch_size=batch_size, drop_last=drop_last)
    theirs = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=batch_size, drop_last=drop_last
    )
    assert len(ours) == len(theirs)
    got, expected = [_as_numpy(b) for b in ours], [_as_numpy(b) for b in theirs]
    assert len(got) == len(expected) == len(ours)
    for a, b in zip(got, expected):
        _assert_same(tuple(a), tuple(b))


def test_default_collate_equals_torchs(torch):
    from torch.utils.data import default_collate as torch_collate

    samples = [
        {"x": np.arange(3, dtype=np.float32) + i, "n": i, "w": 0.5 * i, "flag": i % 2 == 0, "pair": (i, [1.5, i])}
        for i in range(4)
    ]
    _assert_same(_as_numpy(default_collate(samples)), _as_numpy(torch_collate(samples)))
    names = default_collate(["a", "b"])
    assert names == torch_collate(["a", "b"])


def test_collating_tensors_keeps_the_gradient():
    leaves = [tape.tensor(np.full(2, float(i)), requires_grad=True) for i in range(3)]
    batch = default_collate(leaves)
    (batch * tape.tensor(np.array([[1.0, 2.0]]))).sum().backward()
    for leaf in leaves:
        np.testing.assert_array_equal(leaf.grad.numpy(), [1.0, 2.0])


def test_a_seeded_shuffle_is_reproducible_and_a_new_permutation_each_pass():
    data = TensorDataset(np.arange(20))

    def epochs(loader, k=3):
        return [np.concatenate([b[0].numpy() for b in loader]) for _ in range(k)]

    first = epochs(DataLoader(data, batch_size=6, shuffle=True, generator=tape.Generator(5)))
    again = epochs(DataLoader(data, batch_size=6, shuffle=True, generator=tape.Generator(5)))
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    for order in first:
        np.testing.assert_array_equal(np.sort(order), np.arange(20))  # every sample once per pass
    assert not np.array_equal(first[0], first[1]) and not np.array_equal(first[0], np.arange(20))
    tape.manual_seed(3)
    default = epochs(DataLoader(data, batch_size=6, shuffle=True), 1)
    tape.manual_seed(3)
    np.testing.assert_array_equal(default[0], epochs(DataLoader(data, batch_size=6, shuffle=True), 1)[0])
    dropped = DataLoader(data, batch_size=6, shuffle=True, drop_last=True, generator=tape.Generator(1))
    assert [len(b[0]) for b in dropped] == [6, 6, 6] == [6] * len(dropped)


def test_a_custom_dataset_collate_and_unbatched_loading(torch):
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return np.array([i, i * i], dtype=np.int64)

    loader = DataLoader(Squares(), batch_size=2, collate_fn=lambda b: np.stack(b).sum())
    assert list(loader) == [0 + 0 + 1 + 1, 2 + 4 + 3 + 9, 4 + 16]
    unbatched = list(DataLoader(Squares(), batch_size=None))
    assert len(unbatched) == len(DataLoader(Squares(), batch_size=None)) == 5
    np.testing.assert_array_equal(unbatched[3], [3, 9])


def test_bad_input_is_refused_with_the_argument_named():
    with pytest.raises(ValueError, match=r"TensorDataset: every tensor must have the same first dimension, got shapes"):
        TensorDataset(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="DataLoader: argument 'batch_size' expected an int >= 1, got 0"):
        DataLoader(TensorDataset(np.zeros(3)), batch_size=0)
    # before: batch_size=True gave batches of 1, shuffle="no" shuffled (the flags were read as truthy)
    with pytest.raises(TypeError, match="DataLoader: argument 'batch_size' expected an int >= 1, got bool True"):
        DataLoader(TensorDataset(np.zeros(3)), batch_size=True)
    for flag in ("shuffle", "drop_last"):
        with pytest.raises(TypeError, match=f"DataLoader: argument '{flag}' expected a bool, got str 'no'"):
            DataLoader(TensorDataset(np.zeros(3)), **{flag: "no"})
    with pytest.raises(TypeError, match="default_collate: a batch must hold .*got object"):
        default_collate([object()])
    with pytest.raises(NotImplementedError, match="Dataset does not implement __len__"):
        len(Dataset())


def test_bytes_are_kept_as_a_list_and_unbatched_loading_refuses_drop_last(torch):
    """Before: bytes samples were collated into int tensors of their byte values (torch keeps them as a list), and
    batch_size=None with drop_last=True quietly ignored drop_last (torch refuses the pair)."""
    from torch.utils.data import default_collate as torch_collate

    assert default_collate([b"ab", b"cd"]) == torch_collate([b"ab", b"cd"]) == [b"ab", b"cd"]
    with pytest.raises(ValueError, match="DataLoader: batch_size=None .* mutually exclusive with drop_last"):
        DataLoader(TensorDataset(np.zeros(3)), batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="mutually exclusive with drop_last"):
        torch.utils.data.DataLoader([1, 2, 3], batch_size=None, drop_last=True)
