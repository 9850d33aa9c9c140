"""Issue #34's op findings, each a test that failed before its fix: special functions at their domain edges (against
the mathematical truth, mpmath at 30 digits), searching with NaN and empty dims (against torch), ``diff(n=0)``, ranges
of bools, overflowing fills, and torch's warnings where it warns (implicit softmax dim, a broadcasting loss target, the
``.grad`` of a non-leaf)."""

import math
import time
import warnings

import numpy as np
import pytest
from oracle import LazyTorch

import ops
import tape

torch = LazyTorch()  # torch imported at first use: the module collects without torch


def _polygamma_truth(n, x):
    import mpmath

    mpmath.mp.dps = 30
    if math.isnan(x) or x == -math.inf:
        return math.nan
    if x == math.inf:
        return 0.0
    if x <= 0 and x == math.floor(x):  # a pole (every float64 below -2^52 is an integer)
        return math.inf if n % 2 else -math.inf
    if x < 0:  # mpmath's own series takes time linear in |x| there: the reflection, differentiated n times,
        # psi_n(x) = (-1)^n psi_n(1 - x) - pi d^n/dx^n cot(pi x), at enough digits for pi x of a large x
        with mpmath.workdps(60):
            v = mpmath.mpf(x)
            cot_n = mpmath.diff(lambda t: mpmath.cot(mpmath.pi * t), v, n)
            return float((-1) ** n * mpmath.polygamma(n, 1 - v) - mpmath.pi * cot_n)
    return float(mpmath.polygamma(n, mpmath.mpf(x)))


EDGES = [math.nan, math.inf, -math.inf, -1e300, -1e10, -1e10 + 0.5, -2.5, -100000.25, -0.3, -0.0, 0.0, 1e-300,
         5e-324, 0.5, 3.7, 25.0, 1e300]  # fmt: skip


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_polygamma_at_its_domain_edges_is_exact_and_fast(n):
    start = time.perf_counter()
    ours = ops.polygamma(n, tape.tensor(np.array(EDGES))).numpy()
    assert time.perf_counter() - start < 5  # -1e10 + 0.5 took time linear in |x| (never returned) before
    truth = np.array([_polygamma_truth(n, x) for x in EDGES])
    finite = np.isfinite(truth)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(truth))
    np.testing.assert_array_equal(ours[np.isinf(truth)], truth[np.isinf(truth)])
    np.testing.assert_allclose(ours[finite], truth[finite], rtol=1e-13, atol=1e-300)


def test_digamma_gradient_is_polygamma_at_edges():
    x = tape.tensor(np.array([-2.5, -1e10 + 0.5, 0.5, math.inf]), requires_grad=True)
    ops.digamma(x).sum().backward()
    truth = [_polygamma_truth(1, v) for v in x.numpy()]
    np.testing.assert_allclose(x.grad.numpy(), truth, rtol=1e-13)


def test_sinc_gradient_near_zero_is_the_limit_not_nan():
    xs = np.array([0.0, -0.0, 5e-324, 1e-300, 1e-163, -1e-170, 1e-10, 1e-3, 0.1, 0.159, 0.16, 0.5, 2.5, -0.07])
    x = tape.tensor(xs, requires_grad=True)
    ops.sinc(x).sum().backward()
    import mpmath

    mpmath.mp.dps = 60
    truth = [
        float(-(mpmath.pi**2) / 3 * v)
        if abs(v) < 1e-100
        else float((mpmath.pi * v * mpmath.cos(mpmath.pi * v) - mpmath.sin(mpmath.pi * v)) / (mpmath.pi * v * v))
        for v in map(mpmath.mpf, xs)
    ]
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(x.grad.numpy(), truth, rtol=1e-14, atol=0)


def test_sinc_gradient_in_float32_near_zero_keeps_its_digits():
    # the closed form (pi x cos(pi x) - sin(pi x)) / (pi x^2) cancels in float32: torch's is 1.4% off at x = 1e-3
    import mpmath

    xs = np.array([1e-3, -2e-2, 1e-6, 0.1], dtype=np.float32)
    x = tape.tensor(xs, requires_grad=True)
    ops.sinc(x).sum().backward()
    with mpmath.workdps(40):
        truth = [float((mpmath.pi * v * mpmath.cos(mpmath.pi * v) - mpmath.sin(mpmath.pi * v)) / (mpmath.pi * v * v))
                 for v in map(mpmath.mpf, xs.astype(np.float64))]  # fmt: skip
    np.testing.assert_allclose(x.grad.numpy(), truth, rtol=2e-7)


def test_searchsorted_and_bucketize_with_nan_are_torchs_binary_search():
    rng = np.random.default_rng(0)
    for _ in range(100):
        n = int(rng.integers(0, 7))
        s = np.sort(rng.integers(0, 5, size=(3, n)).astype(float), axis=-1)
        if n and rng.random() < 0.7:
            s[:, rng.integers(0, n)] = np.nan
        v = rng.integers(-1, 6, size=(3, 4)).astype(float)
        v[rng.random(v.shape) < 0.2] = np.nan
        for right in (False, True):
            for seq in (s, s[0]):
                ours = ops.searchsorted(tape.tensor(seq), tape.tensor(v), right=right).numpy()
                np.testing.assert_array_equal(ours, torch.searchsorted(torch.tensor(seq), torch.tensor(v), right=right))
            ours = ops.bucketize(tape.tensor(v), tape.tensor(s[0]), right=right).numpy()
            np.testing.assert_array_equal(ours, torch.bucketize(torch.tensor(v), torch.tensor(s[0]), right=right))
    np.testing.assert_array_equal(
        ops.searchsorted(tape.tensor([1.0, 2.0, np.nan]), tape.tensor([np.nan, 5.0, 0.5])).numpy(), [3, 3, 0]
    )


def test_empty_dims_in_searchsorted_and_unique_consecutive():
    out = ops.searchsorted(tape.tensor(np.zeros((2, 0))), tape.tensor(np.zeros((2, 3))))
    np.testing.assert_array_equal(out.numpy(), np.zeros((2, 3)))
    for shape, dim in (((2, 0), 1), ((0, 3), 0)):
        for op, ref in ((ops.unique_consecutive, torch.unique_consecutive), (ops.unique, torch.unique)):
            ours = op(tape.tensor(np.zeros(shape)), return_inverse=True, return_counts=True, dim=dim)
            theirs = ref(torch.zeros(shape, dtype=torch.float64), return_inverse=True, return_counts=True, dim=dim)
            assert [t.shape for t in ours] == [tuple(t.shape) for t in theirs]


def test_diff_with_n_0_is_the_input_and_gives_prepend_a_zero_gradient():
    x = tape.tensor(np.arange(3.0), requires_grad=True)
    p = tape.tensor(np.array([9.0]), requires_grad=True)
    y = ops.diff(x, n=0, prepend=p, append=p)
    np.testing.assert_array_equal(y.numpy(), torch.diff(torch.arange(3.0), n=0, prepend=torch.tensor([9.0])).numpy())
    (y * tape.tensor(np.array([1.0, 2.0, 3.0]))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(p.grad.numpy(), [0.0])


def test_ranges_of_bools_and_overflowing_fills_are_refused_as_torch():
    for make in (lambda: tape.linspace(0, 1, 3, dtype=np.bool_), lambda: tape.arange(3, dtype=np.bool_)):
        with pytest.raises(TypeError, match="numeric dtype"):
            make()
    with pytest.raises(RuntimeError, match="int8 without overflow"):
        ops.full_like(tape.tensor(np.zeros(2, np.int8)), 300)
    with pytest.raises(RuntimeError, match="int64 without overflow"):
        tape.full((2,), math.nan, dtype=np.int64)
    np.testing.assert_array_equal(ops.full_like(tape.tensor(np.zeros(2, np.int8)), 2.5).numpy(), [2, 2])  # torch's


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 3, 4), (2, 3, 4, 5)])
def test_an_implicit_softmax_dim_is_torchs_and_warns(name, shape):
    x = np.random.default_rng(1).standard_normal(shape)
    with pytest.warns(UserWarning, match=f"Implicit dimension choice for {name}") as record:
        ours = getattr(ops, name)(tape.tensor(x))
    assert record[0].filename == __file__  # the warning points at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = getattr(torch.nn.functional, name)(torch.tensor(x))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_a_loss_target_of_another_size_warns_as_torch(name):
    x, t = tape.tensor(np.random.rand(4)), tape.tensor(np.random.rand(4, 1))
    with pytest.warns(UserWarning, match="Using a target size .* different to the input size"):
        getattr(ops, name)(x, t)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        getattr(ops, name)(x, tape.tensor(np.random.rand(4)))  # the same size: silent


def test_the_grad_of_a_non_leaf_warns_as_torch_unless_it_retains_it():
    x = tape.tensor(np.ones(2), requires_grad=True)
    y = x * 2
    kept = x * 3
    kept.retain_grad()
    (y + kept).sum().backward()
    with pytest.warns(UserWarning, match="not a leaf Tensor"):
        assert y.grad is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(kept.grad.numpy(), [1.0, 1.0])
        np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])
