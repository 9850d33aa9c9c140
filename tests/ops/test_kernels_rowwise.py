"""The row kernels' blocked, threaded path (ops/_kernels/rowwise.py) against PyTorch.

The generated tests' samples are small, so every op built on the row kernels runs them as one block on the
calling thread. Here ``BLOCK_ELEMENTS`` is made tiny, so each sample is cut into blocks of one row (a few when
rows are shorter than 4) that run on the worker pool: torch parity (float64 and float32) and a float64
gradcheck must still hold, and a result must not depend on which thread took which block. One shape per op is
also run at the real block size (several blocks of a realistic row length).
"""

import warnings

import numpy as np
import pytest
from oracle import run_torch_parity

import ops
import tape
from ops._kernels import rowwise
from tape.tools.verify import op_samples, run_gradcheck

ROWWISE_OPS = ["softmax", "log_softmax", "cross_entropy", "layer_norm", "rms_norm"]


@pytest.fixture
def tiny_blocks(monkeypatch):
    """Blocks of at most 4 elements (so one row each), counted: the test fails if nothing was split."""
    monkeypatch.setattr(rowwise, "BLOCK_ELEMENTS", 4)
    counts = []
    real_run = rowwise.runtime.run

    def counting_run(items, work, workers=None):
        counts.append(len(items))
        return real_run(items, work, workers)

    monkeypatch.setattr(rowwise.runtime, "run", counting_run)
    return counts


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("name", ROWWISE_OPS)
def test_blocked_kernels_match_torch(name, dtype, tiny_blocks, torch):
    op = tape.get_op(name)
    for sample in op_samples(op):
        result = run_torch_parity(op, sample, dtype)
        assert result is not None and result.ok, f"{name} on {sample} in {np.dtype(dtype).name}: {result}"
    assert max(tiny_blocks, default=0) > 1, f"{name}: no sample was split into several blocks"


@pytest.mark.parametrize("name", ROWWISE_OPS)
def test_blocked_kernels_gradcheck(name, tiny_blocks):
    op = tape.get_op(name)
    for sample in op_samples(op):
        result = run_gradcheck(op, sample)
        assert result.ok, f"{name} on {sample}: {result.message}"


def test_blocked_results_do_not_depend_on_the_threads(tiny_blocks):
    """Column sums (layer_norm's weight and bias gradients) add the blocks' parts in block order."""
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((64, 3)), rng.standard_normal(3), rng.standard_normal(3)

    def grads():
        leaves = [tape.tensor(a, requires_grad=True) for a in (x, w, b)]
        (ops.layer_norm(leaves[0], (3,), leaves[1], leaves[2]) ** 3).sum().backward()
        return [leaf.grad.numpy() for leaf in leaves]

    first = grads()
    for _ in range(20):
        assert all(np.array_equal(a, c) for a, c in zip(first, grads()))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_several_blocks_at_the_real_block_size(dtype, torch):
    F = torch.nn.functional
    rng = np.random.default_rng(2)
    rows = 2 * rowwise.BLOCK_ELEMENTS // 500 + 3  # three blocks of rows of 500 or 512
    x, w, b = rng.standard_normal((rows, 512)) * 3 + 1, rng.standard_normal(512), rng.standard_normal(512)
    targets = rng.integers(0, 500, rows)
    targets[::5] = -100
    cases = [
        (lambda x: ops.softmax(x, dim=-1), lambda x: torch.softmax(x, -1), [x]),
        (lambda x: ops.log_softmax(x, dim=0), lambda x: torch.log_softmax(x, 0), [x[:, :4].T.copy()]),
        (
            lambda x: ops.cross_entropy(x, targets, label_smoothing=0.1),
            lambda x: F.cross_entropy(x, torch.tensor(targets), label_smoothing=0.1),
            [x[:, :500]],
        ),
        (lambda x, w, b: ops.layer_norm(x, (512,), w, b), lambda x, w, b: F.layer_norm(x, (512,), w, b), [x, w, b]),
        (lambda x, w: ops.rms_norm(x, (512,), w), lambda x, w: F.rms_norm(x, (512,), w), [x, w]),
    ]
    rtol, atol = (1e-10, 1e-12) if dtype == np.float64 else (1e-4, 1e-5)
    for fn, torch_fn, arrays in cases:
        arrays = [a.astype(dtype) for a in arrays]
        leaves = [tape.tensor(a, requires_grad=True) for a in arrays]
        torch_leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
        out, expected = fn(*leaves), torch_fn(*torch_leaves)
        upstream = np.random.default_rng(1).standard_normal(out.shape).astype(dtype)
        out.backward(upstream)
        expected.backward(torch.tensor(upstream))
        np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), rtol=rtol, atol=atol)
        for leaf, torch_leaf in zip(leaves, torch_leaves):
            np.testing.assert_allclose(leaf.grad.numpy(), torch_leaf.grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "cross_entropy"])
@pytest.mark.parametrize("n", [1, 5, 16, 200])
def test_short_rows_take_their_max_across_a_transposed_copy_with_the_same_values(name, n, monkeypatch, torch):
    """Rows of at most ``short_row_length()`` take their maximum over a transposed copy: the same values (edge
    values included) as np.max along the rows, and torch's."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 37, n)).astype(np.float32) * 4
    edges = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 1e4, -1e4], np.float32)
    x.reshape(-1)[rng.integers(0, x.size, 40)] = np.resize(edges, 40)
    target = rng.integers(0, n, (3, 37)) if name == "cross_entropy" else None

    def run(longest):
        monkeypatch.setattr(rowwise, "_SHORT_ROW", [longest])
        t = tape.tensor(x.transpose(0, 2, 1) if name == "cross_entropy" else x, requires_grad=True)
        y = ops.cross_entropy(t, target, reduction="none") if name == "cross_entropy" else getattr(ops, name)(t, -1)
        y.backward(np.ones(y.shape, np.float32))
        return y.numpy(), t.grad.numpy()

    across, along = run(10**9), run(0)
    for a, b in zip(across, along):
        np.testing.assert_array_equal(a, b)
    tx = torch.tensor(x.transpose(0, 2, 1) if name == "cross_entropy" else x, requires_grad=True)
    if name == "cross_entropy":
        ty = torch.nn.functional.cross_entropy(tx, torch.tensor(target), reduction="none")
    else:
        ty = getattr(torch, name)(tx, -1)
    ty.backward(torch.ones_like(ty))
    np.testing.assert_allclose(across[0], ty.detach().numpy(), rtol=2e-6, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(across[1], tx.grad.numpy(), rtol=2e-6, atol=1e-6, equal_nan=True)


def _rows_with_infinities(n: int) -> np.ndarray:
    """Rows of ``n`` logits: finite; -inf beside finite values; all -inf; one +inf; two +inf; +inf and -inf; NaN."""
    rows = np.tile(np.linspace(-1.0, 2.0, n), (7, 1))
    rows[1, 0] = rows[2] = rows[5, 1] = -np.inf
    rows[3, 0] = rows[4, :2] = rows[5, 0] = np.inf
    rows[6, 0] = np.nan
    return rows


_INF_CASES = [
    ("softmax", {"dim": -1}),
    ("softmax", {"dim": 0}),
    ("log_softmax", {"dim": -1}),
    ("log_softmax", {"dim": 0}),
    ("cross_entropy", {}),
    ("cross_entropy", {"label_smoothing": 0.1}),
    ("cross_entropy", {"weight": True}),
    ("cross_entropy", {"probabilities": True}),
    ("cross_entropy", {"probabilities": True, "weight": True}),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("n", [3, 300])
@pytest.mark.parametrize(("name", "attrs"), _INF_CASES, ids=[f"{n}-{sorted(a)}" for n, a in _INF_CASES])
def test_rows_holding_infinities_give_torch_values_without_numpy_warnings(name, attrs, n, dtype, torch):
    """A row whose maximum is +-inf is NaN in torch (inf - inf), a row with -inf beside finite values is finite
    (0 probability); a 0 target probability at a -inf logit is NaN (0 * -inf). The ops compute those values
    without a numpy RuntimeWarning escaping from inside them, forward or backward (short and long rows)."""
    x = _rows_with_infinities(n).astype(dtype)
    attrs = dict(attrs)
    if attrs.get("dim") == 0:
        x = x.T.copy()
    torch_kwargs = {}
    if attrs.pop("weight", False):
        attrs["weight"] = np.linspace(0.5, 2.0, n).astype(dtype)
        torch_kwargs["weight"] = torch.tensor(attrs["weight"])
    if name == "cross_entropy":
        if attrs.pop("probabilities", False):
            target = np.zeros_like(x)
            target[:, 1:] = 1 / (n - 1)  # 0 at the first class, where some rows hold -inf
        else:
            target = np.arange(7) % n
        torch_kwargs.update({k: v for k, v in attrs.items() if k != "weight"}, reduction="none")
        attrs["reduction"] = "none"
        args, torch_args = (target,), (torch.tensor(target),)
        torch_fn = torch.nn.functional.cross_entropy
    else:
        args, torch_args, torch_kwargs = (), (), dict(attrs)
        torch_fn = getattr(torch, name)
    t = tape.tensor(x, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = getattr(ops, name)(t, *args, **attrs)
        upstream = np.linspace(0.5, 1.5, y.numel()).reshape(y.shape).astype(dtype)
        y.backward(upstream)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch_fn(tx, *torch_args, **torch_kwargs)
    ty.backward(torch.tensor(upstream))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(t.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)
    finite_row = y.numpy()[:, 0] if attrs.get("dim") == 0 else y.numpy()[0]
    assert np.isfinite(finite_row).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("n", [1, 4, 32, 1000])
def test_softmax_matches_torch_on_rows_on_both_sides_of_its_unshifted_range(n, dtype, torch):
    """softmax takes exp(x) unshifted where a row's sum of exps lies in [1, sqrt(max float)] and exp(x - max)
    elsewhere: rows whose max sits at either end of that range, beyond it, or far beyond (one block, every row
    its own case) match torch to rounding, tiny probabilities included, forward and backward; 1-D too."""
    rng = np.random.default_rng(7)
    tops = [-1e4, -200.0, -50.0, -np.log(n) - 0.01, -np.log(n) + 0.01, 0.0, 5.0, 43.0, 45.0, 88.0, 89.0, 700.0, 1e4]
    x = rng.uniform(-30.0, 0.0, (len(tops), n)) + np.array(tops)[:, None]
    x[:, 0] = tops  # each row's max
    rtol, atol = (1e-13, 1e-300) if dtype == np.float64 else (3e-6, 1e-37)
    grad_atol = 1e-14 if dtype == np.float64 else 1e-6  # y (g - sum(g y)) cancels: rounding relative to g ~ 1
    for rows in (x, x[5], x[-1]):
        rows = rows.astype(dtype)
        t, tx = tape.tensor(rows, requires_grad=True), torch.tensor(rows, requires_grad=True)
        y, ty = ops.softmax(t, dim=-1), torch.softmax(tx, -1)
        upstream = rng.standard_normal(rows.shape).astype(dtype)
        y.backward(upstream)
        ty.backward(torch.tensor(upstream))
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=rtol, atol=atol)
        np.testing.assert_allclose(t.grad.numpy(), tx.grad.numpy(), rtol=10 * rtol, atol=grad_atol)
        if n == 1:
            assert np.array_equal(y.numpy(), np.ones_like(rows)), "a row of one is exactly 1, as in torch"


_CE_ATTRS = [{}, {"label_smoothing": 0.2}, {"weight": True}, {"ignore_index": 2}]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("attrs", _CE_ATTRS, ids=["plain", "smooth", "w", "ignore"])
def test_cross_entropy_matches_torch_whatever_the_target_logits_distance_from_the_max(attrs, dtype, torch):
    """cross_entropy shifts each row by its target logit (the loss is then log(sum exp(x - x_y)), rounded once)
    and by the row max where that overflows: targets at the max, near it, 40, 50, 100, 1000 and 1e4 below it
    match torch's values and gradients in every layout ((N, C), (C,), (N, C, d)), an ignored target included."""
    rng = np.random.default_rng(11)
    gaps = np.array([0.0, 0.5, 3.0, 40.0, 50.0, 100.0, 1000.0, 1e4])
    n_classes = 5
    x = rng.uniform(-2.0, 2.0, (len(gaps), n_classes))
    target = np.arange(len(gaps)) % n_classes
    x[np.arange(len(gaps)), target] = x.max(axis=1) - gaps
    attrs = dict(attrs)
    torch_attrs = {k: v for k, v in attrs.items() if k != "weight"}
    if attrs.pop("weight", False):
        attrs["weight"] = np.linspace(0.5, 2.0, n_classes).astype(dtype)
        torch_attrs["weight"] = torch.tensor(attrs["weight"])
    rtol, atol = (1e-12, 1e-14) if dtype == np.float64 else (2e-6, 1e-6)
    layouts = [(x, target), (x[3], target[3]), (x.reshape(2, 4, n_classes).transpose(0, 2, 1), target.reshape(2, 4))]
    for inputs, targets in layouts:
        inputs = np.ascontiguousarray(inputs, dtype)
        t, tx = tape.tensor(inputs, requires_grad=True), torch.tensor(inputs, requires_grad=True)
        y = ops.cross_entropy(t, targets, reduction="none", **attrs)
        ty = torch.nn.functional.cross_entropy(tx, torch.tensor(targets), reduction="none", **torch_attrs)
        upstream = np.linspace(0.5, 1.5, y.numel()).reshape(y.shape).astype(dtype)
        y.backward(upstream)
        ty.backward(torch.tensor(upstream))
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=rtol, atol=atol)
        np.testing.assert_allclose(t.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=atol)
