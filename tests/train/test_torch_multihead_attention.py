"""nn.MultiheadAttention under torch's name, signature and parameter names (tape/train/mha.py): a strict load of
torch's state dict gives torch's outputs, attention weights and gradients in float64, for torch's mask forms."""

import numpy as np
import pytest

import tape.torch as torch
import tape.torch.nn as nn

torch_ = pytest.importorskip("torch")

E, H = 8, 2


def _pair(batch_first):
    theirs = torch_.nn.MultiheadAttention(E, H, batch_first=batch_first).double()
    ours = nn.MultiheadAttention(E, H, batch_first=batch_first).double()
    ours.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}, strict=True)
    return ours, theirs


def _masks(lib, case, rng, L, S, N):
    if case == "bool attn_mask":
        return {"attn_mask": lib.tensor(np.triu(np.ones((L, S), bool), 1))}
    if case == "float attn_mask":
        return {"attn_mask": lib.tensor(rng.standard_normal((L, S)))}
    if case == "per-head attn_mask":
        return {"attn_mask": lib.tensor(rng.standard_normal((N * H, L, S)))}
    if case == "key_padding_mask":
        pad = np.zeros((N, S), bool)
        pad[0, -2:] = True
        return {"key_padding_mask": lib.tensor(pad)}
    return {}


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize(
    "case", ["none", "bool attn_mask", "float attn_mask", "per-head attn_mask", "key_padding_mask"]
)
@pytest.mark.parametrize("average", [True, False])
def test_outputs_weights_and_gradients_match_torch(batch_first, case, average):
    ours, theirs = _pair(batch_first)
    L, S, N = 4, 5, 3
    rng = np.random.default_rng(0)
    shape = (N, L, E) if batch_first else (L, N, E)
    kv_shape = (N, S, E) if batch_first else (S, N, E)
    arrays = [rng.standard_normal(shape), rng.standard_normal(kv_shape), rng.standard_normal(kv_shape)]
    results = []
    for lib, model in ((torch_, theirs), (torch, ours)):
        q, k, v = (lib.tensor(a, requires_grad=True) for a in arrays)
        out, weights = model(
            q, k, v, average_attn_weights=average, **_masks(lib, case, np.random.default_rng(1), L, S, N)
        )
        (out.sum() + (weights * weights).sum()).backward()
        grads = [t.grad.numpy() for t in (q, k, v)] + [p.grad.numpy() for p in model.parameters()]
        results.append((out.detach().numpy(), weights.detach().numpy(), grads))
    (o1, w1, g1), (o2, w2, g2) = results
    np.testing.assert_allclose(o2, o1, 1e-10, 1e-12)
    np.testing.assert_allclose(w2, w1, 1e-10, 1e-12)
    for a, b in zip(g2, g1):
        np.testing.assert_allclose(a, b, 1e-10, 1e-12)


def test_unbatched_and_need_weights_false_match_torch():
    ours, theirs = _pair(False)
    x = np.random.default_rng(2).standard_normal((4, E))
    out, weights = ours(torch.tensor(x), torch.tensor(x), torch.tensor(x), need_weights=False)
    expected, _ = theirs(torch_.tensor(x), torch_.tensor(x), torch_.tensor(x), need_weights=False)
    assert weights is None and out.shape == (4, E)
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), 1e-10, 1e-12)
    _, w = ours(torch.tensor(x), torch.tensor(x), torch.tensor(x))
    _, expected_w = theirs(torch_.tensor(x), torch_.tensor(x), torch_.tensor(x))
    np.testing.assert_allclose(w.numpy(), expected_w.detach().numpy(), 1e-10, 1e-12)


def test_what_is_not_there_is_refused():
    with pytest.raises(NotImplementedError, match="add_bias_kv"):
        nn.MultiheadAttention(E, H, add_bias_kv=True)
    with pytest.raises(RuntimeError, match="is_causal"):
        m = nn.MultiheadAttention(E, H)
        x = torch.zeros(3, 1, E)
        m(x, x, x, is_causal=True)
