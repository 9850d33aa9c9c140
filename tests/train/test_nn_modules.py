"""tape.nn: Module machinery (registration, modes, state dicts) and each layer against PyTorch."""

import numpy as np
import pytest
from oracle import LazyTorch

import tape
from tape import checkpoint, nn

torch = LazyTorch()  # torch imported at first use: the module collects without torch
F = torch.nn.functional


class Net(nn.Module):
    def __init__(self, rng=None):
        super().__init__()
        self.embed = nn.Embedding(7, 4, rng=rng)
        self.layers = [nn.Linear(4, 4, rng=rng), nn.Linear(4, 3, bias=False, rng=rng)]
        self.head = nn.Sequential(nn.ReLU(), nn.Dropout(0.5), nn.Linear(3, 2, rng=rng))
        self.scale = nn.Parameter(np.ones(2, dtype=np.float32))
        self.note = "not a parameter"

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(x) * self.scale


def test_parameters_are_registered_for_nested_modules_and_lists():
    net = Net()
    names = [name for name, _ in net.named_parameters()]
    assert names == ["scale", "embed.weight", "layers.0.weight", "layers.0.bias", "layers.1.weight",
                     "head.2.weight", "head.2.bias"]
    assert isinstance(net.layers, nn.ModuleList) and len(net.layers) == 2
    assert all(isinstance(p, nn.Parameter) and isinstance(p, tape.Tensor) and p.requires_grad
               for p in net.parameters())
    assert net.num_parameters() == 2 + 7 * 4 + 16 + 4 + 12 + 6 + 2
    assert [name for name, _ in net.named_modules()][:4] == ["", "embed", "layers", "layers.0"]


def test_shared_parameter_is_listed_once_and_reassignment_replaces():
    net = nn.Module()
    net.a = nn.Linear(2, 2)
    net.b = net.a
    assert len(list(net.parameters())) == 2
    net.a = "gone"
    assert [name for name, _ in net.named_parameters()] == ["b.weight", "b.bias"]
    del net.b
    assert list(net.parameters()) == []


def test_mixed_list_is_refused_and_missing_super_init_is_explained():
    net = nn.Module()
    with pytest.raises(TypeError, match="ModuleList"):
        net.stuff = [nn.Linear(2, 2), 3]

    class Forgetful(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.ones(2))

    with pytest.raises(AttributeError, match="super"):
        Forgetful()


def test_train_eval_switches_dropout_everywhere():
    net = Net(rng=np.random.default_rng(0))
    tokens = np.arange(6).reshape(2, 3)
    assert all(m.training for m in net.modules())
    net.eval()
    assert not any(m.training for m in net.modules())
    np.testing.assert_array_equal(net(tokens).numpy(), net(tokens).numpy())
    net.train()
    x = tape.tensor(np.ones((200, 10), dtype=np.float32))
    dropped = net.head[1](x).numpy()
    assert 0.3 < np.mean(dropped == 0) < 0.7
    np.testing.assert_allclose(dropped[dropped != 0], 2.0)
    assert net.head[1].eval()(x) is x


def test_zero_grad_clears_every_parameter():
    net = Net()
    net.eval()
    net(np.array([[1, 2, 3]])).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_state_dict_round_trip_through_a_checkpoint(tmp_path):
    a, b = Net(np.random.default_rng(1)).eval(), Net(np.random.default_rng(2)).eval()
    tokens = np.array([[0, 3, 6]])
    assert not np.allclose(a(tokens).numpy(), b(tokens).numpy())
    checkpoint.save(a.state_dict(), tmp_path / "a.npz")
    b.load_state_dict(checkpoint.load(tmp_path / "a.npz"))
    np.testing.assert_array_equal(a(tokens).numpy(), b(tokens).numpy())
    assert list(b.state_dict()) == list(a.state_dict())


def test_load_state_dict_names_every_problem_and_changes_nothing():
    net = Net(np.random.default_rng(1))
    before = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    state = dict(net.state_dict())
    del state["layers.1.weight"]
    state["layers.9.weight"] = np.zeros(3)
    state["embed.weight"] = np.zeros((8, 4), dtype=np.float32)
    state["scale"] = np.ones(2, dtype=np.float64)
    state["head.2.bias"] = np.full(2, 5.0, dtype=np.float32)
    with pytest.raises(ValueError) as info:
        net.load_state_dict(state)
    message = str(info.value)
    for fragment in ["missing parameter(s): layers.1.weight", "unexpected parameter(s): layers.9.weight",
                     "'embed.weight' has shape (7, 4) in the model but (8, 4)", "'scale' has dtype float32"]:
        assert fragment in message
    for k, v in net.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_load_state_dict_non_strict_ignores_missing_and_extra():
    net = Net(np.random.default_rng(1))
    net.load_state_dict({"head.2.bias": np.array([1.0, 2.0], dtype=np.float32), "extra": np.zeros(1)}, strict=False)
    np.testing.assert_array_equal(net.head[2].bias.numpy(), [1.0, 2.0])


def test_initialisation_is_deterministic_for_a_seed():
    nn.manual_seed(5)
    first = nn.Linear(3, 2).weight.numpy().copy()
    nn.manual_seed(5)
    np.testing.assert_array_equal(nn.Linear(3, 2).weight.numpy(), first)
    bound = 1 / np.sqrt(3)
    assert np.all(np.abs(first) <= bound) and first.dtype == np.float32


# -- layers against torch (float64) ------------------------------------------------------------------------
def _check(ours_out, theirs_out, params, theirs_params, x=None, tx=None):
    g = np.random.default_rng(9).normal(size=ours_out.shape)
    (ours_out * g).sum().backward()
    (theirs_out * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(ours_out.numpy(), theirs_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    for p, q in zip(params, theirs_params):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-8, atol=1e-12)
    if x is not None:
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-8, atol=1e-12)


def _leaf(array):
    return tape.tensor(array, requires_grad=True), torch.tensor(array, requires_grad=True)


def _torch_copy(*params):
    return [torch.tensor(np.array(p.numpy()), requires_grad=True) for p in params]


@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(bias):
    layer = nn.Linear(5, 3, bias=bias, dtype=np.float64, rng=np.random.default_rng(0))
    x, tx = _leaf(np.random.default_rng(1).normal(size=(2, 4, 5)))
    params = [p for p in (layer.weight, layer.bias) if p is not None]
    tp = _torch_copy(*params)
    _check(layer(x), F.linear(tx, *tp), params, tp, x, tx)


def test_embedding_with_padding_idx_matches_torch():
    layer = nn.Embedding(6, 3, padding_idx=-1, dtype=np.float64, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(layer.weight.numpy()[5], 0.0)
    idx = np.array([[0, 5, 2], [5, 2, 2]])
    (tw,) = _torch_copy(layer.weight)
    _check(layer(idx), F.embedding(torch.tensor(idx), tw, padding_idx=5), [layer.weight], [tw])
    np.testing.assert_array_equal(layer.weight.grad.numpy()[5], 0.0)


def test_layer_norm_matches_torch():
    layer = nn.LayerNorm((3, 4), eps=1e-3, dtype=np.float64)
    layer.load_state_dict({"weight": np.linspace(0.5, 2, 12).reshape(3, 4),
                           "bias": np.linspace(-1, 1, 12).reshape(3, 4)})
    x, tx = _leaf(np.random.default_rng(1).normal(size=(2, 3, 4)))
    tp = _torch_copy(layer.weight, layer.bias)
    _check(layer(x), F.layer_norm(tx, (3, 4), *tp, eps=1e-3), [layer.weight, layer.bias], tp, x, tx)


def test_rms_norm_matches_torch():
    layer = nn.RMSNorm(4, dtype=np.float64)
    layer.load_state_dict({"weight": np.array([0.5, 1.0, 1.5, 2.0])})
    x, tx = _leaf(np.random.default_rng(1).normal(size=(2, 3, 4)))
    tp = _torch_copy(layer.weight)
    _check(layer(x), F.rms_norm(tx, (4,), tp[0]), [layer.weight], tp, x, tx)


def _torch_mha(attn, tp, tx, lengths=None):
    from test_torch_transformer import torch_attention

    names = [name for name, _ in attn.named_parameters()]
    return torch_attention(dict(zip(names, tp)), "", tx, attn, lengths)


@pytest.mark.parametrize("causal,kv_heads,lengths", [(False, 4, None), (True, 4, None), (False, 2, [5, 2]),
                                                      (True, 1, [3, 5])])
def test_multi_head_attention_matches_torch(causal, kv_heads, lengths):
    rng = np.random.default_rng(0)
    attn = nn.MultiHeadAttention(8, 4, num_kv_heads=kv_heads, causal=causal, dtype=np.float64, rng=rng)
    assert attn.qkv.weight.shape == ((4 + 2 * kv_heads) * 2, 8)
    x, tx = _leaf(rng.normal(size=(2, 5, 8)))
    params = list(attn.parameters())
    tp = _torch_copy(*params)
    lengths = None if lengths is None else np.array(lengths)
    _check(attn(x, key_padding_lengths=lengths), _torch_mha(attn, tp, tx, lengths), params, tp, x, tx)


def test_attention_and_block_reject_bad_configurations():
    with pytest.raises(ValueError, match="multiple of num_heads"):
        nn.MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="num_kv_heads"):
        nn.MultiHeadAttention(12, 4, num_kv_heads=3)
    with pytest.raises(ValueError, match="norm"):
        nn.TransformerBlock(8, 2, norm="batch")
    with pytest.raises(ValueError, match=r"\(batch, length, 8\).*\(5, 8\)"):
        nn.MultiHeadAttention(8, 2)(tape.tensor(np.ones((5, 8), dtype=np.float32)))


def test_rms_block_and_dropout_run_in_float32():
    block = nn.TransformerBlock(8, 2, norm="rms", dropout=0.2, rng=np.random.default_rng(0))
    x = tape.tensor(np.random.default_rng(1).normal(size=(2, 5, 8)).astype(np.float32), requires_grad=True)
    out = block(x)
    assert out.dtype == np.float32
    out.sum().backward()
    assert x.grad.dtype == np.float32 and all(p.grad.dtype == np.float32 for p in block.parameters())
    block.eval()
    np.testing.assert_array_equal(block(x).numpy(), block(x).numpy())


# -- empty shapes ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("in_features,out_features", [(0, 3), (3, 0), (0, 0)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_with_an_empty_dimension_matches_torch(in_features, out_features, bias):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no divide-by-zero or other warning at init
        with np.errstate(all="raise"):
            layer = nn.Linear(in_features, out_features, bias=bias, dtype=np.float64, rng=np.random.default_rng(0))
    assert layer.weight.shape == (out_features, in_features)
    if bias:
        assert layer.bias.shape == (out_features,)
        np.testing.assert_array_equal(layer.bias.numpy(), 0.0)  # torch: bound 0 when fan_in is 0
    x, tx = _leaf(np.random.default_rng(1).normal(size=(2, 3, in_features)))
    params = [p for p in (layer.weight, layer.bias) if p is not None]
    tp = _torch_copy(*params)
    out = layer(x)
    expected = F.linear(tx, *tp)
    assert out.shape == tuple(expected.shape) == (2, 3, out_features)
    _check(out, expected, params, tp, x, tx)
    assert x.grad.shape == (2, 3, in_features) and layer.weight.grad.shape == (out_features, in_features)


def test_linear_with_zero_inputs_gives_the_bias():
    layer = nn.Linear(0, 3, dtype=np.float64)
    layer.load_state_dict({"weight": np.zeros((3, 0)), "bias": np.array([1.0, 2.0, 3.0])})
    np.testing.assert_array_equal(layer(tape.tensor(np.zeros((4, 0)))).numpy(), np.tile([1.0, 2.0, 3.0], (4, 1)))
