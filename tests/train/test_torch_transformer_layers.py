"""torch.nn's Transformer layers under torch's names and parameter names (tape/train/transformer.py): a strict load of
torch's state dict gives torch's outputs and every gradient in float64."""

import numpy as np
import pytest

import tape.torch as torch
import tape.torch.nn as nn

torch_ = pytest.importorskip("torch")


def _load(ours, theirs):
    assert set(ours.state_dict()) == set(theirs.state_dict())
    ours.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}, strict=True)
    return ours


def _check(ours, theirs, make_inputs):
    results = []
    for lib, model in ((torch_, theirs), (torch, ours)):
        out = model(*make_inputs(lib))
        out.sum().backward()
        results.append((out.detach().numpy(), {n: p.grad.numpy() for n, p in model.named_parameters()}))
    (expected, expected_grads), (got, grads) = results
    np.testing.assert_allclose(got, expected, 1e-10, 1e-12)
    assert set(grads) == set(expected_grads)
    for name, g in grads.items():
        np.testing.assert_allclose(g, expected_grads[name], 1e-9, 1e-11, err_msg=name)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_matches_torch(norm_first, batch_first, activation):
    options = dict(
        dim_feedforward=16, dropout=0.0, activation=activation, batch_first=batch_first, norm_first=norm_first
    )
    theirs = torch_.nn.Transformer(8, 2, 2, 2, **options).double()
    ours = _load(nn.Transformer(8, 2, 2, 2, **options).double(), theirs)
    rng = np.random.default_rng(0)
    src, tgt = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 4, 8))
    if not batch_first:
        src, tgt = src.transpose(1, 0, 2), tgt.transpose(1, 0, 2)
    pad = np.zeros((2, 5), bool)
    pad[1, -2:] = True

    def inputs(lib):
        mask = lib.nn.Transformer.generate_square_subsequent_mask(4, dtype=lib.float64)
        return lib.tensor(src), lib.tensor(tgt), None, mask, None, lib.tensor(pad), None, lib.tensor(pad)

    _check(ours, theirs, inputs)


def test_encoder_stack_and_layers_alone_match_torch():
    layer = torch_.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    theirs = torch_.nn.TransformerEncoder(layer, 3, enable_nested_tensor=False).double()
    ours = _load(nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 3).double(), theirs)
    x = np.random.default_rng(1).standard_normal((6, 2, 8))
    causal = np.triu(np.ones((6, 6), bool), 1)
    _check(ours, theirs, lambda lib: (lib.tensor(x), lib.tensor(causal)))
    dec_theirs = torch_.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0).double()
    dec_ours = _load(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0).double(), dec_theirs)
    _check(dec_ours, dec_theirs, lambda lib: (lib.tensor(x[:4]), lib.tensor(x)))
