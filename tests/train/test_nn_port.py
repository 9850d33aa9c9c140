"""The module API a PyTorch port reaches for (tape/train/nn.py, tape/train/init.py), against torch.nn: buffers and
state dicts (tied weights under both names), containers, BatchNorm / GroupNorm / InstanceNorm modules trained a
few steps, activation / loss / conv / pool modules, apply / requires_grad_ / to / zero_grad, and nn.init."""

import numpy as np
import pytest

import ops
import tape
from tape import nn

RTOL, ATOL = 1e-10, 1e-12


def _copy_params(ours, theirs, torch):
    """Our module's parameters into torch's module of the same names (float64)."""
    theirs.double()
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            p.copy_(torch.tensor(dict(ours.named_parameters())[name].numpy()))


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize(
    "cls,shape", [("BatchNorm1d", (6, 3)), ("BatchNorm1d", (4, 3, 5)), ("BatchNorm2d", (2, 3, 4, 5))]
)
def test_batchnorm_trains_updates_buffers_and_evaluates_as_torch(torch, cls, shape, momentum):
    rng = np.random.default_rng(0)
    ours = getattr(nn, cls)(3, momentum=momentum, dtype=np.float64)
    theirs = getattr(torch.nn, cls)(3, momentum=momentum).double()
    nn.init.uniform_(ours.weight, 0.5, 1.5, generator=tape.Generator(1))
    nn.init.uniform_(ours.bias, -1, 1, generator=tape.Generator(2))
    _copy_params(ours, theirs, torch)
    for _ in range(3):
        x = rng.normal(2.0, 3.0, size=shape)
        a, b = tape.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, expected = ours(a), theirs(b)
        np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), RTOL, ATOL)
        u = rng.normal(size=shape)
        ops.sum(out * tape.tensor(u)).backward()
        (expected * torch.tensor(u)).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), RTOL, ATOL)
        for name in ("weight", "bias"):
            np.testing.assert_allclose(getattr(ours, name).grad.numpy(), getattr(theirs, name).grad.numpy(), RTOL, ATOL)
    state, expected_state = ours.state_dict(), theirs.state_dict()
    assert list(state) == list(expected_state)
    for name, value in expected_state.items():
        np.testing.assert_allclose(state[name], value.numpy(), RTOL, ATOL, err_msg=name)
    ours.eval(), theirs.eval()
    x = rng.normal(size=shape)
    np.testing.assert_allclose(ours(tape.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), RTOL, ATOL)
    fresh = getattr(nn, cls)(3, momentum=momentum, dtype=np.float64).eval()
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh(tape.tensor(x)).numpy(), ours(tape.tensor(x)).numpy())


def test_batchnorm_without_running_stats_and_bad_rank(torch):
    x = np.random.default_rng(1).normal(size=(5, 2))
    ours, theirs = (
        nn.BatchNorm1d(2, track_running_stats=False, dtype=np.float64).eval(),
        torch.nn.BatchNorm1d(2, track_running_stats=False).double().eval(),
    )
    np.testing.assert_allclose(ours(tape.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), RTOL, ATOL)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    with pytest.raises(ValueError, match="BatchNorm2d: expected a 4-D input"):
        nn.BatchNorm2d(2)(tape.tensor(np.zeros((2, 2), np.float32)))


def test_group_and_instance_norm_modules(torch):
    x = np.random.default_rng(2).normal(size=(2, 4, 3, 5))
    for ours, theirs in (
        (nn.GroupNorm(2, 4, dtype=np.float64), torch.nn.GroupNorm(2, 4)),
        (nn.InstanceNorm2d(4, affine=True, dtype=np.float64), torch.nn.InstanceNorm2d(4, affine=True)),
        (nn.InstanceNorm2d(4, dtype=np.float64), torch.nn.InstanceNorm2d(4)),
    ):
        _copy_params(ours, theirs, torch)
        np.testing.assert_allclose(ours(tape.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), RTOL, ATOL)
    y = x[:, :, 0]
    np.testing.assert_allclose(
        nn.InstanceNorm1d(4, dtype=np.float64)(tape.tensor(y)).numpy(),
        torch.nn.InstanceNorm1d(4)(torch.tensor(y)).numpy(),
        RTOL,
        ATOL,
    )


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(5, 3, dtype=np.float64)
        self.head = nn.Linear(3, 5, bias=False, dtype=np.float64)
        self.head.weight = self.embed.weight
        self.register_buffer("mask", tape.tensor(np.tril(np.ones((2, 2)))))
        self.register_buffer("scratch", tape.tensor(np.zeros(2)), persistent=False)


def test_state_dict_lists_tied_weights_under_both_names_and_persistent_buffers(torch):
    class TorchTied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(5, 3)
            self.head = torch.nn.Linear(3, 5, bias=False)
            self.head.weight = self.embed.weight
            self.register_buffer("mask", torch.tril(torch.ones(2, 2)))
            self.register_buffer("scratch", torch.zeros(2), persistent=False)

    model, reference = Tied(), TorchTied().double()
    assert list(model.state_dict()) == list(reference.state_dict())
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in reference.named_parameters()]
    assert [n for n, _ in model.named_buffers()] == [n for n, _ in reference.named_buffers()]
    model.load_state_dict({k: v.numpy() for k, v in reference.state_dict().items()})  # strict: every name present
    np.testing.assert_array_equal(model.head.weight.numpy(), reference.embed.weight.detach().numpy())
    assert model.head.weight is model.embed.weight
    with pytest.raises(ValueError, match="missing parameter"):
        model.load_state_dict({"embed.weight": np.zeros((5, 3))})
    model.mask = np.ones((2, 2))  # assigning replaces the buffer
    assert isinstance(model.mask, tape.Tensor) and model.state_dict()["mask"].sum() == 4


def test_containers_name_their_entries_as_torch(torch):
    ours = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.Identity(7, unused=1)})
    ours["c"] = nn.Linear(2, 1)
    theirs = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 2), "b": torch.nn.Identity()})
    theirs["c"] = torch.nn.Linear(2, 1)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours) == list(theirs) and "c" in ours and len(ours) == 3
    plist = nn.ParameterList([np.zeros(2), np.ones(3)])
    pdict = nn.ParameterDict({"w": np.zeros(2)})
    tlist = torch.nn.ParameterList([torch.zeros(2), torch.ones(3)])
    assert [n for n, _ in plist.named_parameters()] == [n for n, _ in tlist.named_parameters()]
    assert isinstance(plist[1], nn.Parameter) and [n for n, _ in pdict.named_parameters()] == ["w"]
    x = tape.tensor(np.ones(2))
    assert ours["b"](x) is x


def test_apply_requires_grad_to_and_zero_grad():
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Linear(3, 1))
    seen = []
    model.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "BatchNorm1d", "Linear", "Sequential"]  # children first, as torch
    model.double()
    assert model[0].weight.dtype == np.float64 and model[1].running_mean.dtype == np.float64
    assert model[1].num_batches_tracked.dtype == np.int64
    ops.sum(model(tape.tensor(np.ones((4, 2))))).backward()
    model.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    model.requires_grad_(False)
    assert not any(p.requires_grad for p in model.parameters())
    with pytest.raises(TypeError, match="Sequential.to: argument 'dtype'"):
        model.to(np.int64)


def test_layer_modules_match_torch(torch):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 8, 8))
    conv, tconv = (
        nn.Conv2d(3, 4, 3, padding=1, stride=2, dtype=np.float64),
        torch.nn.Conv2d(3, 4, 3, padding=1, stride=2),
    )
    _copy_params(conv, tconv, torch)
    stack = nn.Sequential(nn.MaxPool2d(2), nn.AvgPool2d(2, stride=1), nn.Flatten(), nn.Tanh())
    tstack = torch.nn.Sequential(
        torch.nn.MaxPool2d(2), torch.nn.AvgPool2d(2, stride=1), torch.nn.Flatten(), torch.nn.Tanh()
    )
    out, expected = stack(conv(tape.tensor(x))), tstack(tconv(torch.tensor(x)))
    np.testing.assert_allclose(out.numpy(), expected.detach().numpy(), RTOL, ATOL)
    conv1, tconv1 = nn.Conv1d(3, 2, 5, dtype=np.float64), torch.nn.Conv1d(3, 2, 5)
    _copy_params(conv1, tconv1, torch)
    y = x[:, :, 0]
    np.testing.assert_allclose(conv1(tape.tensor(y)).numpy(), tconv1(torch.tensor(y)).detach().numpy(), RTOL, ATOL)
    logits, target = rng.normal(size=(5, 4)), rng.integers(0, 4, size=5)
    for ours, theirs, args in (
        (nn.CrossEntropyLoss(label_smoothing=0.1), torch.nn.CrossEntropyLoss(label_smoothing=0.1), (logits, target)),
        (nn.MSELoss(reduction="sum"), torch.nn.MSELoss(reduction="sum"), (logits, logits[::-1].copy())),
        (nn.Softmax(dim=1), torch.nn.Softmax(dim=1), (logits,)),
        (nn.SiLU(), torch.nn.SiLU(), (logits,)),
        (nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2), (logits,)),
    ):
        got = ours(*[tape.tensor(a) for a in args]).numpy()
        np.testing.assert_allclose(got, theirs(*[torch.tensor(a) for a in args]).numpy(), RTOL, ATOL)
    with pytest.raises(ValueError, match="MSELoss: 'size_average' is deprecated in torch .* pass reduction="):
        nn.MSELoss(size_average=True)
    with pytest.raises(TypeError, match="MSELoss: got an unexpected keyword argument 'reductions'"):
        nn.MSELoss(reductions="sum")


def test_init_replaces_the_array_keeps_identity_and_follows_torch_formulas(torch):
    w = nn.Parameter(np.zeros((300, 200)))
    g = tape.Generator(0)
    assert nn.init.xavier_uniform_(w, generator=g) is w
    bound = np.sqrt(6 / 500)
    assert np.abs(w.numpy()).max() <= bound and abs(w.numpy().std() - bound / np.sqrt(3)) < 0.01 * bound
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu", generator=g)
    assert abs(w.numpy().std() - np.sqrt(2 / 300)) < 0.01 * np.sqrt(2 / 300)
    nn.init.kaiming_uniform_(w, a=np.sqrt(5), generator=g)  # torch's Linear default: bound 1/sqrt(fan_in)
    assert np.abs(w.numpy()).max() <= 1 / np.sqrt(200) and np.abs(w.numpy()).max() > 0.99 / np.sqrt(200)
    nn.init.trunc_normal_(w, std=0.02, a=-0.03, b=0.03, generator=g)
    assert np.abs(w.numpy()).max() <= 0.03
    nn.init.orthogonal_(w, gain=2.0, generator=g)
    np.testing.assert_allclose(w.numpy().T @ w.numpy(), 4 * np.eye(200), atol=1e-12)
    nn.init.normal_(w, 1.0, 0.5, generator=tape.Generator(7))
    first = w.numpy()
    nn.init.normal_(w, 1.0, 0.5, generator=tape.Generator(7))
    np.testing.assert_array_equal(w.numpy(), first)
    nn.init.zeros_(w), nn.init.constant_(w, 3.0)
    assert (w.numpy() == 3).all() and w.dtype == np.float64
    for name, param in (("tanh", None), ("relu", None), ("leaky_relu", 0.2), ("selu", None), ("linear", None)):
        assert nn.init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))
    with pytest.raises(ValueError, match="fan in and fan out"):
        nn.init.xavier_uniform_(nn.Parameter(np.zeros(3)))


def test_a_strict_load_refuses_tied_names_that_disagree():
    """torch copies both names into the one tensor, so the last silently wins; minitape refuses."""
    model = Tied()
    state = {k: np.array(v) for k, v in model.state_dict().items()}
    state["head.weight"] = state["embed.weight"] + 1.0
    before = model.embed.weight.numpy().copy()
    with pytest.raises(ValueError, match="embed.weight, head.weight are tied in the model but differ"):
        model.load_state_dict(state)
    np.testing.assert_array_equal(model.embed.weight.numpy(), before)  # nothing changed
    state["head.weight"] = state["embed.weight"].copy()
    model.load_state_dict(state)
    np.testing.assert_array_equal(model.head.weight.numpy(), state["embed.weight"])


def _func_model(lib_nn, dtype):
    class M(lib_nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib_nn.Linear(3, 4, **dtype)
            self.bn = lib_nn.BatchNorm1d(4, **dtype)
            self.out = lib_nn.Linear(4, 3, bias=False, **dtype)

        def forward(self, x, scale=1.0):
            return self.out(self.bn(self.lin(x)).tanh()) * scale

    return M()


def test_functional_call_equals_torch_func(torch):
    from torch.func import functional_call as torch_call

    rng = np.random.default_rng(5)
    ours, theirs = _func_model(nn, {"dtype": np.float64}), _func_model(torch.nn, {}).double()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    own = {name: p.numpy().copy() for name, p in ours.named_parameters()}
    arrays = {"lin.weight": rng.standard_normal((4, 3)), "out.weight": rng.standard_normal((3, 4))}
    x = rng.standard_normal((6, 3))
    given = {k: tape.tensor(a, requires_grad=True) for k, a in arrays.items()}
    tgiven = {k: torch.tensor(a, requires_grad=True) for k, a in arrays.items()}
    rm, trm = tape.tensor(np.zeros(4)), torch.zeros(4, dtype=torch.float64)
    out = tape.func.functional_call(ours, ({**given}, {"bn.running_mean": rm}), (tape.tensor(x),), {"scale": 2.0})
    tout = torch_call(theirs, ({**tgiven}, {"bn.running_mean": trm}), (torch.tensor(x),), {"scale": 2.0})
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), RTOL, ATOL)
    (out**2).sum().backward()
    (tout**2).sum().backward()
    for k in arrays:
        np.testing.assert_allclose(given[k].grad.numpy(), tgiven[k].grad.numpy(), RTOL, ATOL, err_msg=k)
    np.testing.assert_allclose(rm.numpy(), trm.numpy(), RTOL, ATOL)  # the given buffer got the update
    np.testing.assert_allclose(ours.bn.running_var.numpy(), theirs.bn.running_var.numpy(), RTOL, ATOL)
    for name, p in ours.named_parameters():  # the module's own tensors are back, untouched
        np.testing.assert_array_equal(p.numpy(), own[name])
        assert p.grad is None or name.startswith("bn.") or name == "lin.bias", name
    assert ours.lin.weight is not given["lin.weight"]
    assert not ours.bn.running_mean.numpy().any()


class TiedForward(Tied):
    def forward(self, x):
        return self.head(x).sum() + self.embed.weight.sum()


def test_functional_call_ties_strictness_and_errors():
    model = TiedForward()
    w = tape.tensor(np.ones((5, 3)), requires_grad=True)
    out = tape.func.functional_call(model, {"embed.weight": w}, tape.tensor(np.ones((1, 3))))
    assert model.head.weight is model.embed.weight and model.embed.weight is not w
    out.backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((5, 3), 2.0))  # head used the given tensor too
    with pytest.raises(ValueError, match="different tensors were given for embed.weight, head.weight"):
        tape.func.functional_call(model, {"embed.weight": w, "head.weight": w * 2}, tape.tensor(np.ones((1, 3))))
    with pytest.raises(AttributeError, match="has no parameter or buffer named nope"):
        tape.func.functional_call(model, {"nope": w}, ())
    with pytest.raises(RuntimeError, match=r"strict=True\): missing parameter\(s\) or buffer\(s\): mask, scratch"):
        tape.func.functional_call(model, {"embed.weight": w}, (), strict=True)
    with pytest.raises(TypeError, match="'embed.weight' expected a Tensor, got ndarray"):
        tape.func.functional_call(model, {"embed.weight": np.ones((5, 3))}, ())
    lin = nn.Linear(2, 2)
    own = lin.weight
    with pytest.raises(ValueError):
        tape.func.functional_call(
            lin, {"weight": tape.tensor(np.ones((3, 3), np.float32))}, tape.tensor(np.ones(2, np.float32))
        )
    assert lin.weight is own  # put back after the call raised
