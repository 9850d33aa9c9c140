"""PyTorch idioms a program reaches beyond the op library (found by running common snippets against both
``torch`` and ``tape.torch``): bare grad-mode decorators, ``add_param_group``, ``clip_grad_value_``, ``mT``/``mH``,
thread counts, the anomaly switch, ``use_deterministic_algorithms``, and ``load_state_dict``'s return value. Each is
compared with the real torch; each failed (AttributeError / TypeError) before."""

import numpy as np
import pytest

torch_ = pytest.importorskip("torch")  # the oracle (the real torch)

import tape  # noqa: E402
import tape.torch as torch  # noqa: E402
import tape.torch.nn as nn  # noqa: E402
import tape.torch.optim as optim  # noqa: E402


@pytest.mark.parametrize("mode", ["no_grad", "enable_grad"])
def test_grad_modes_decorate_bare_and_called(mode):
    def body(x):
        return (x * 2).requires_grad

    for ns in (torch, torch_):
        x = ns.ones(2, requires_grad=True)
        bare, called = getattr(ns, mode)(body), getattr(ns, mode)()(body)
        with ns.no_grad() if mode == "enable_grad" else ns.enable_grad():
            assert bare(x) is called(x) is (mode == "enable_grad"), ns
    with pytest.raises(TypeError, match="no_grad: expected a function to decorate .*got int"):
        tape.no_grad(3)


def test_add_param_group_trains_as_torchs():
    rng = np.random.default_rng(0)
    a0, b0 = rng.standard_normal(3), rng.standard_normal(2)
    runs = []
    for ns in (torch, torch_):
        a, b = ns.tensor(a0.copy(), requires_grad=True), ns.tensor(b0.copy(), requires_grad=True)
        opt = ns.optim.Adam([a], lr=0.1)
        for step in range(4):
            if step == 2:
                opt.add_param_group({"params": b, "lr": 0.05, "betas": (0.8, 0.9)})
            opt.zero_grad()
            ((a * a).sum() + (b.exp()).sum()).backward()
            opt.step()
        assert [g["lr"] for g in opt.param_groups] == [0.1, 0.05]
        runs.append([a.detach().numpy().copy(), b.detach().numpy().copy()])
    for ours, theirs in zip(*runs):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)
    opt = optim.SGD([tape.tensor(a0, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="SGD.add_param_group: a parameter appears in more than one group"):
        opt.add_param_group({"params": opt.param_groups[0]["params"]})
    with pytest.raises(TypeError, match="SGD.add_param_group: unknown option"):
        opt.add_param_group({"params": [tape.tensor(b0, requires_grad=True)], "betas": (0.9, 0.9)})
    assert len(opt.param_groups) == 1  # a refused group is not added


def test_clip_grad_value_matches_torch_in_place():
    g0 = np.array([-3.0, -0.25, 0.0, 0.5, 2.0, np.nan])
    got = []
    for ns in (torch, torch_):
        p = ns.tensor(np.zeros(6), requires_grad=True)
        p.grad = ns.tensor(g0.copy())
        before = p.grad
        assert ns.nn.utils.clip_grad_value_([p], 0.5) is None
        assert p.grad is before  # in place
        got.append(p.grad.numpy().copy())
    np.testing.assert_array_equal(got[0], got[1])
    with pytest.raises(ValueError, match="clip_grad_value_: argument 'clip_value' expected a number >= 0, got -1"):
        nn.utils.clip_grad_value_([], -1)


def test_mt_and_mh_are_the_last_two_dims_transposed_with_gradients():
    x0 = np.arange(24.0).reshape(2, 3, 4)
    for name in ("mT", "mH"):
        ours, theirs = torch.tensor(x0, requires_grad=True), torch_.tensor(x0, requires_grad=True)
        a, b = getattr(ours, name), getattr(theirs, name)
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        w = np.linspace(-1, 1, 24).reshape(2, 4, 3)
        (a * torch.tensor(w)).sum().backward(), (b * torch_.tensor(w)).sum().backward()
        np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())
    with pytest.raises(ValueError, match="mT: .*at least 2 dimensions.*got a 1-D tensor"):
        _ = torch.ones(3).mT


def test_thread_count_is_set_and_read_as_torchs():
    from ops._kernels.runtime import threads

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.get_num_threads() == threads() == 1
    finally:
        torch.set_num_threads(before)
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="set_num_threads: argument 'int' expected an int >= 1, got 0"):
        torch.set_num_threads(0)


def test_anomaly_switch_as_call_and_context():
    x = torch.tensor(np.array([-1.0]), requires_grad=True)
    try:
        torch.autograd.set_detect_anomaly(True)
        assert torch.is_anomaly_enabled()
        with pytest.raises(tape.AnomalyError, match="sqrt"):
            torch.sqrt(x)
    finally:
        torch.autograd.set_detect_anomaly(False)
    assert not torch.is_anomaly_enabled()
    with torch.autograd.detect_anomaly(), pytest.raises(tape.AnomalyError):
        torch.log(x)
    torch.log(x)  # off again: a NaN is a value


def test_use_deterministic_algorithms_is_accepted_and_reported():
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
    assert not torch.are_deterministic_algorithms_enabled()


def test_load_state_dict_returns_the_missing_and_unexpected_keys_as_torch():
    ours, theirs = nn.Linear(3, 2), torch_.nn.Linear(3, 2)
    state = {"weight": np.zeros((2, 3), np.float32), "extra": np.zeros(1, np.float32)}
    a = ours.load_state_dict(state, strict=False)
    b = theirs.load_state_dict({k: torch_.tensor(v) for k, v in state.items()}, strict=False)
    assert (a.missing_keys, a.unexpected_keys) == (b.missing_keys, b.unexpected_keys) == (["bias"], ["extra"])
    assert tuple(ours.load_state_dict(ours.state_dict())) == tuple(theirs.load_state_dict(theirs.state_dict()))


def test_parameters_to_vector_and_back_as_torchs():
    rng = np.random.default_rng(3)
    shapes = [(2, 3), (3,), (1, 1)]
    values = [rng.standard_normal(s) for s in shapes]
    flat = []
    for ns in (torch, torch_):
        params = [ns.tensor(v.copy(), requires_grad=True) for v in values]
        vec = ns.nn.utils.parameters_to_vector(params)
        (vec * ns.tensor(np.arange(10.0))).sum().backward()  # in the graph: each parameter gets its slice's weights
        ns.nn.utils.vector_to_parameters(vec.detach() * 2, params)
        flat.append([vec.detach().numpy().copy(), *[p.detach().numpy().copy() for p in params]])
        flat.append([p.grad.numpy().copy() for p in params])
    for a, b in zip(flat[0] + flat[1], flat[2] + flat[3]):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="vector_to_parameters: 'vec' has 3 values, the parameters hold 10"):
        nn.utils.vector_to_parameters(torch.zeros(3), [torch.zeros(10)])
    assert torch.ones(2, 3).T.is_contiguous() and torch.ones(2, 3).T.contiguous().shape == (3, 2)


def test_tensor_predicates_and_sizes_as_torchs():
    for make in (lambda ns: ns.ones(2, 3), lambda ns: ns.arange(5), lambda ns: ns.zeros(3, dtype=ns.bool)):
        a, b = make(torch), make(torch_)
        for name in ("is_floating_point", "is_complex", "is_signed", "element_size", "nelement", "get_device",
                     "is_pinned", "is_inference", "is_conj", "is_neg"):  # fmt: skip
            assert getattr(a, name)() == getattr(b, name)(), name
        for name in ("itemsize", "nbytes"):
            assert getattr(a, name) == getattr(b, name), name
        assert torch.is_floating_point(a) == torch_.is_floating_point(b)
        assert torch.is_complex(a) == torch_.is_complex(b) is False
        assert a.pin_memory() is a and a.share_memory_() is a and a.real is a and a.conj() is a
        assert a.resolve_conj() is a and a.resolve_neg() is a
        assert torch.typename(a) == torch_.typename(b)
    x = torch.tensor(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(x.H.numpy(), x.mT.numpy())
    np.testing.assert_array_equal(x.adjoint().numpy(), x.mT.numpy())


def test_equal_and_allclose_as_torchs():
    a0, b0 = np.array([1.0, 2.0, np.nan]), np.array([1.0, 2.0 + 1e-9, np.nan])
    for ns in (torch, torch_):
        a, b = ns.tensor(a0), ns.tensor(b0)
        assert ns.allclose(a, b) is False and ns.allclose(a, b, equal_nan=True) is True
        assert a.allclose(b, equal_nan=True) is True and ns.allclose(a, b, rtol=0, atol=1e-12, equal_nan=True) is False
        assert ns.equal(a[:2], a[:2]) is True and ns.equal(a, a) is False  # NaN != NaN
        assert ns.equal(a[:2], ns.tensor(np.array([1.0, 2.0, 3.0]))) is False  # another size
        assert a[:1].equal(ns.tensor(np.array([1.0])))


def test_dtype_facts_and_promotion_as_torchs():
    for name in ("float32", "float64", "float16"):
        ours, theirs = torch.finfo(getattr(torch, name)), torch_.finfo(getattr(torch_, name))
        for field in ("eps", "max", "min", "tiny", "bits", "resolution", "smallest_normal"):
            kind = np.dtype(name).type  # numpy holds each value in the dtype itself, torch as a Python float
            assert kind(getattr(ours, field)) == kind(getattr(theirs, field)), (name, field)
    for name in ("int64", "int32", "uint8", "int8"):
        ours, theirs = torch.iinfo(getattr(torch, name)), torch_.iinfo(getattr(torch_, name))
        assert (ours.min, ours.max, ours.bits) == (theirs.min, theirs.max, theirs.bits)
    pairs = [("int64", "float32"), ("int32", "int64"), ("uint8", "int8"), ("float16", "float32"), ("bool", "int8")]
    for a, b in pairs:
        got = torch.promote_types(getattr(torch, a), getattr(torch, b))
        assert got == np.dtype(str(torch_.promote_types(getattr(torch_, a), getattr(torch_, b))).split(".")[1])
    assert torch.can_cast(torch.float64, torch.int64) == torch_.can_cast(torch_.float64, torch_.int64) is False
    assert torch.can_cast(torch.int64, torch.float32) == torch_.can_cast(torch_.int64, torch_.float32) is True
    assert torch.Size([2, 3]) == (2, 3) == torch.ones(2, 3).shape and isinstance(torch.ones(1).shape, torch.Size)


def test_compile_and_autocast_faces():
    """torch.compile(model) returns the model (torch's contract: the same results; minitape compiles training steps
    with tape.compile); torch.autocast(enabled=False) is a no-op context, enabled raises."""
    model = nn.Linear(2, 2)
    assert torch.compile(model) is model and torch.compile(mode="max-autotune")(model) is model
    with torch.autocast("cpu", enabled=False):
        pass
    with pytest.raises(NotImplementedError, match="autocast"):
        torch.autocast("cpu", dtype=torch.float16)
    torch.set_printoptions(precision=2)
    try:
        assert "0.33" in repr(torch.tensor(np.array([1 / 3]))) and "0.333" not in repr(torch.tensor(np.array([1 / 3])))
    finally:
        torch.set_printoptions(profile="default")
    assert "0.3333" in repr(torch.tensor(np.array([1 / 3])))


def test_testing_assert_close_as_torchs():
    a = torch.tensor(np.array([1.0, 2.0]))
    torch.testing.assert_close(a, torch.tensor(np.array([1.0, 2.0 + 1e-9])))
    for ns in (torch, torch_):
        with pytest.raises(AssertionError, match="not close"):
            ns.testing.assert_close(ns.tensor(np.array([1.0, 2.0])), ns.tensor(np.array([1.0, 2.1])))


def test_global_settings_and_module_paths_programs_reach():
    """What programs call at start-up: each as torch's on a CPU-only machine (torch's own answers shown)."""
    for ns in (torch, torch_):
        assert ns.version.cuda is None and not ns.cuda.is_available()
        assert ns.get_default_device() == ns.device("cpu")
        ns.set_default_device("cpu")
        ns.set_float32_matmul_precision("high")
        assert ns.get_float32_matmul_precision() == "high"
        ns.set_float32_matmul_precision("highest")
        assert isinstance(ns.random.manual_seed(3), ns.Generator)
    assert not torch.distributed.is_available() and not torch.distributed.is_initialized()
    with pytest.raises(AttributeError, match="tape.distributed"):
        torch.distributed.init_process_group("gloo")
    with pytest.raises(ValueError, match="set_float32_matmul_precision: expected"):
        torch.set_float32_matmul_precision("low")
    with pytest.raises(RuntimeError, match="cuda"):
        torch.set_default_device("cuda")


def test_checkpoint_runs_the_function_and_data_parallel_wraps_as_torchs():
    from tape.torch.utils.checkpoint import checkpoint

    x = torch.tensor(np.arange(3.0), requires_grad=True)
    checkpoint(lambda a, b: (a * b).exp(), x, x, use_reentrant=False).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.arange(3.0) * np.exp(np.arange(3.0) ** 2))
    ours, theirs = nn.DataParallel(nn.Linear(3, 2)), torch_.nn.DataParallel(torch_.nn.Linear(3, 2))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["module.weight", "module.bias"]
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = np.ones((1, 3), np.float32)
    np.testing.assert_allclose(ours(torch.tensor(x)).detach().numpy(), theirs(torch_.tensor(x)).detach().numpy())
    with pytest.raises(NotImplementedError, match="tape.distributed"):
        torch.nn.parallel.DistributedDataParallel(nn.Linear(2, 2))


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_and_its_gradients_as_torchs(batch_first, side):
    rng = np.random.default_rng(5)
    seqs = [rng.standard_normal((n, 2)) for n in (3, 1, 4)]
    results = []
    for ns in (torch, torch_):
        leaves = [ns.tensor(s, requires_grad=True) for s in seqs]
        out = ns.nn.utils.rnn.pad_sequence(leaves, batch_first=batch_first, padding_value=-1.5, padding_side=side)
        (out * ns.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)))).sum().backward()
        results.append([out.detach().numpy(), *[t.grad.numpy() for t in leaves]])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    padded = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs])
    back = torch.nn.utils.rnn.unpad_sequence(padded, [3, 1, 4])
    for a, s in zip(back, seqs):
        np.testing.assert_array_equal(a.numpy(), s)
    with pytest.raises(AttributeError, match="packed sequences are not provided"):
        _ = torch.nn.utils.rnn.pack_padded_sequence


@pytest.mark.parametrize(
    "call",
    [
        lambda ns, x, v: ns.clamp_min(x, v),
        lambda ns, x, v: x.clamp_max(v),
        lambda ns, x, v: x.masked_fill(x > 0.2, v),
        lambda ns, x, v: x.index_fill(1, ns.tensor([2, 0]), v),
    ],
    ids=["clamp_min", "clamp_max", "masked_fill", "index_fill"],
)
def test_tensor_bounds_and_fill_values_get_their_gradients_as_torchs(call):
    """torch takes a tensor that requires grad as these ops' bound or value and gives it a gradient; minitape
    refused it before (a number-only attribute)."""
    x0 = np.random.default_rng(7).uniform(-1, 1, (3, 4))
    got = []
    for ns in (torch, torch_):
        x, v = ns.tensor(x0, requires_grad=True), ns.tensor(np.array(0.3), requires_grad=True)
        out = call(ns, x, v)
        (out * ns.tensor(np.linspace(-2, 2, 12).reshape(3, 4))).sum().backward()
        got.append((out.detach().numpy(), x.grad.numpy(), v.grad.numpy()))
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
