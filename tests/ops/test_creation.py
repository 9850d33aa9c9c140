"""Creation and random functions (tape/creation.py, ops/creation.py) against torch: values, shapes, dtypes and
refusals; for the random ones, reproducibility under tape.manual_seed and their distributions (moments and
ranges), never torch's stream."""

import numpy as np
import pytest

import ops
import tape

DETERMINISTIC = [
    ("arange", (5,), {}),
    ("arange", (1, 4, 0.5), {}),
    ("arange", (0, 1, 0.3), {}),
    ("arange", (10, 0, -3), {}),
    ("arange", (-1.5, 2.25, 0.25), {"dtype": "float64"}),
    ("arange", (0, 7, 2), {"dtype": "float32"}),
    ("zeros", (2, 3), {}),
    ("zeros", ((2, 0),), {"dtype": "int64"}),
    ("ones", ([3],), {"dtype": "float64"}),
    ("ones", (2,), {"dtype": "bool"}),
    ("full", ((2,), 3), {}),
    ("full", ((2, 1), 3.5), {}),
    ("full", ((2,), True), {}),
    ("full", ((2,), 7), {"dtype": "float64"}),
    ("eye", (3,), {}),
    ("eye", (2, 4), {"dtype": "int64"}),
    ("tril_indices", (3, 4), {}),
    ("tril_indices", (4, 3, -1), {}),
    ("tril_indices", (3, 3, 5), {"dtype": "int32"}),
    ("tril_indices", (0, 3), {}),
    ("triu_indices", (3, 4, 1), {}),
    ("triu_indices", (4, 2, -2), {}),
    ("triu_indices", (2, 0), {}),
    ("linspace", (0, 1, 5), {}),
    ("linspace", (-3.3, 7.1, 13), {}),
    ("linspace", (-3.3, 7.1, 13), {"dtype": "float64"}),
    ("linspace", (0, 10, 5), {"dtype": "int64"}),
    ("linspace", (0, 1, 1), {}),
    ("linspace", (0, 1, 0), {}),
    ("linspace", (0.1, 0.7, 101), {}),
    ("linspace", (1e-3, 2.5, 77), {"dtype": "float64"}),
    ("logspace", (0, 2, 3), {}),
    ("logspace", (-1, 1.5, 6), {"base": 2.0, "dtype": "float64"}),
]


def _torch_kwargs(torch, kwargs):
    return {k: getattr(torch, v) if k == "dtype" else v for k, v in kwargs.items()}


@pytest.mark.parametrize("name,args,kwargs", DETERMINISTIC, ids=lambda v: repr(v))
def test_deterministic_creation_matches_torch(torch, name, args, kwargs):
    ours = getattr(tape, name)(*args, **kwargs)
    theirs = getattr(torch, name)(*args, **_torch_kwargs(torch, kwargs)).numpy()
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    if ours.dtype.kind == "f" and name == "logspace":  # pow in another order: one rounding apart
        np.testing.assert_allclose(ours.numpy(), theirs, rtol=2 * np.finfo(ours.dtype).eps)
    else:
        np.testing.assert_array_equal(ours.numpy(), theirs)


BAD = [
    (lambda: tape.tril_indices(-1, 3), ValueError, "tril_indices: argument 'row' expected an int >= 0"),
    (lambda: tape.triu_indices(3, 3, 1.0), TypeError, "triu_indices: argument 'offset' expected an int"),
    (lambda: tape.triu_indices(3, 3, dtype="float32"), ValueError, "triu_indices: argument 'dtype' expected an int"),
    (lambda: tape.arange(0, 5, 0), ValueError, "arange: argument 'step'"),
    (lambda: tape.arange(5, 0), ValueError, "arange: argument 'end'"),
    (lambda: tape.zeros(-1), ValueError, "zeros: argument 'size'"),
    (lambda: tape.zeros(2.0), TypeError, "zeros: argument 'size' expected ints"),
    (lambda: tape.ones(2, dtype="complex64"), TypeError, "ones: argument 'dtype'"),
    (lambda: tape.rand(2, dtype="int64"), TypeError, "rand: argument 'dtype' expected a floating dtype"),
    (lambda: tape.randint(5, 2, (3,)), ValueError, "randint: argument 'high'"),
    (lambda: tape.randint(5), TypeError, "randint: expected"),
    (lambda: tape.zeros(2, dtype="int64", requires_grad=True), TypeError, "zeros: argument 'requires_grad'"),
    (lambda: tape.normal(0.0, 1.0), ValueError, "normal: argument 'size'"),
    (lambda: tape.normal(0.0, -1.0, (2,)), ValueError, "normal: argument 'std'"),
    (lambda: tape.rand(2, generator="x"), TypeError, "rand: argument 'generator'"),
    (lambda: ops.multinomial(tape.tensor([0.0, 0.0]), 1), ValueError, "multinomial: argument 'input'"),
    (lambda: ops.multinomial(tape.tensor([-1.0, 1.0]), 1), ValueError, "multinomial: argument 'input'"),
    (lambda: ops.multinomial(tape.tensor([np.inf, 1.0]), 1), ValueError, "multinomial: argument 'input'"),
    (lambda: ops.multinomial(tape.tensor([1.0, 1.0]), 3), ValueError, "multinomial: argument 'num_samples'"),
    (lambda: ops.multinomial(tape.tensor([1.0, 1.0]), 0), ValueError, "multinomial: argument 'num_samples'"),
    (lambda: ops.multinomial(tape.tensor(np.ones((2, 2, 2))), 1), ValueError, "multinomial: argument 'input'"),
    (lambda: ops.bernoulli(tape.tensor([0.5, 1.5])), ValueError, "bernoulli: argument 'input'"),
    (lambda: ops.bernoulli(tape.tensor([0.5]), 2.0), ValueError, "bernoulli: argument 'p'"),
]


@pytest.mark.parametrize("make,error,message", BAD, ids=lambda v: v if isinstance(v, str) else "")
def test_bad_arguments_are_refused_naming_them(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_empty_is_zeros_of_torchs_shape_and_dtype(torch):
    for args in ((2, 3), ((0, 4),)):
        ours, theirs = tape.empty(*args), torch.empty(*args).numpy()
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype and not ours.numpy().any()


def test_requires_grad_and_default_dtypes(torch):
    assert tape.zeros(2, requires_grad=True).requires_grad and not tape.zeros(2).requires_grad
    for name, args in (("rand", (2,)), ("randn", (2,)), ("randint", (3, (2,))), ("randperm", (4,))):
        assert getattr(tape, name)(*args).dtype == getattr(torch, name)(*args).numpy().dtype, name


def test_like_ops_keep_shape_and_dtype_and_pass_a_zero_gradient(torch):
    x = tape.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    tx = torch.tensor(x.numpy())
    for name in ("zeros_like", "ones_like", "rand_like", "randn_like"):
        y, ty = getattr(ops, name)(x), getattr(torch, name)(tx)
        assert y.shape == tuple(ty.shape) and y.dtype == ty.numpy().dtype
    y = ops.randint_like(x, 3)
    assert y.dtype == np.float64 and set(np.unique(y.numpy())) <= {0.0, 1.0, 2.0}
    assert ops.full_like(x, 2, dtype=np.int64).dtype == np.int64
    (ops.sum(ops.ones_like(x) * x) + ops.sum(ops.randn_like(x))).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((2, 3)))  # only the product's path counts


RANDOM = [
    lambda g: tape.rand(50, generator=g),
    lambda g: tape.randn(50, generator=g),
    lambda g: tape.randint(0, 9, (50,), generator=g),
    lambda g: tape.randperm(50, generator=g),
    lambda g: tape.normal(1.0, 2.0, (50,), generator=g),
    lambda g: ops.rand_like(tape.tensor(np.zeros(50)), generator=g),
    lambda g: ops.bernoulli(tape.tensor(np.full(50, 0.5)), generator=g),
    lambda g: ops.multinomial(tape.tensor(np.ones((3, 8))), 5, generator=g),
    lambda g: ops.multinomial(tape.tensor(np.ones(8)), 20, replacement=True, generator=g),
]


@pytest.mark.parametrize("draw", RANDOM)
def test_random_functions_are_reproducible_under_manual_seed(draw):
    tape.manual_seed(123)
    a = draw(None).numpy()
    tape.manual_seed(123)
    np.testing.assert_array_equal(draw(None).numpy(), a)
    np.testing.assert_array_equal(draw(tape.Generator(123)).numpy(), a)
    assert not np.array_equal(draw(None).numpy(), a)  # the stream moves on


N = 200_000  # moments: standard errors ~ 1/sqrt(N) ~ 2e-3; bounds at ~5 standard errors


def test_distributions_have_their_moments_and_ranges():
    g = tape.Generator(0)
    u = tape.rand(N, generator=g).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 5e-3 and abs(u.var() - 1 / 12) < 2e-3
    z = tape.randn(N, generator=g, dtype=np.float64).numpy()
    assert abs(z.mean()) < 1e-2 and abs(z.std() - 1) < 1e-2
    n = tape.normal(tape.full((N,), 3.0), 0.5, generator=g).numpy()
    assert abs(n.mean() - 3) < 5e-3 and abs(n.std() - 0.5) < 5e-3
    k = tape.randint(-2, 3, (N,), generator=g).numpy()
    assert set(np.unique(k)) == {-2, -1, 0, 1, 2} and abs(k.mean()) < 2e-2
    np.testing.assert_array_equal(np.sort(tape.randperm(100, generator=g).numpy()), np.arange(100))
    b = ops.bernoulli(tape.full((N,), 0.25, dtype=np.float64), generator=g).numpy()
    assert set(np.unique(b)) == {0.0, 1.0} and abs(b.mean() - 0.25) < 5e-3
    assert abs(ops.bernoulli(tape.zeros(N), 0.75, generator=g).numpy().mean() - 0.75) < 5e-3


def test_multinomial_follows_the_weights_with_and_without_replacement(torch):
    g = tape.Generator(1)
    w = np.array([0.0, 1.0, 3.0, 6.0])
    draws = ops.multinomial(tape.tensor(w), N, replacement=True, generator=g).numpy()
    assert draws.dtype == np.int64 and draws.shape == (N,)
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / N, w / w.sum(), atol=5e-3)
    # without replacement: distinct per row; the first draw follows the weights, zero weights come last
    rows = ops.multinomial(tape.tensor(np.tile(w, (20_000, 1))), 4, generator=g).numpy()
    assert rows.shape == (20_000, 4) and (np.sort(rows, axis=1) == np.arange(4)).all()
    assert (rows[:, 3] == 0).all()
    np.testing.assert_allclose(np.bincount(rows[:, 0], minlength=4) / 20_000, w / w.sum(), atol=1.5e-2)
    # second draw of torch's sequential scheme: P(second = j) = sum_i p_i p_j / (1 - p_i)
    p = w / w.sum()
    second = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(4) if i != j) for j in range(4)])
    np.testing.assert_allclose(np.bincount(rows[:, 1], minlength=4) / 20_000, second, atol=1.5e-2)
    t = torch.multinomial(torch.tensor(np.tile(w, (3, 1))), 2)
    assert tuple(t.shape) == ops.multinomial(tape.tensor(np.tile(w, (3, 1))), 2).shape
