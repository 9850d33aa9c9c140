"""``import tape.torch as torch`` (issue #32): the namespace is a face over the one engine and op library -- every
registered op with a torch name is reachable under that name and IS the op; nothing in tape/torch computes -- and
the API real programs reach on one CPU device (devices, grad modes, samplers, Adadelta, save/load), checked against
torch."""

import ast
import importlib
import io
import pickle

import numpy as np
import pytest

import ops
from tape.registry import registered_ops
from tests.paths import REPO as ROOT

torch_ = pytest.importorskip("torch")  # the oracle (the real torch)

import tape.torch as torch  # noqa: E402
import tape.torch.nn as nn  # noqa: E402
import tape.torch.optim as optim  # noqa: E402
from tape.torch.utils.data import DataLoader, RandomSampler, TensorDataset  # noqa: E402

TORCH_DIR = ROOT / "tape" / "torch"


def _registered() -> list[str]:
    return sorted(op.name for op in registered_ops())


@pytest.mark.parametrize(
    "namespace, theirs",
    [("", "torch"), (".nn.functional", "torch.nn.functional"), (".special", "torch.special")],
)
def test_every_registered_op_with_a_torch_name_is_that_op(namespace, theirs):
    """For every registered op whose name the real torch namespace has, ours answers with the op object itself."""
    ours, real = importlib.import_module("tape.torch" + namespace), importlib.import_module(theirs)
    names = [
        name for name in _registered() if hasattr(real, name) and not (name in torch.OTHER_MEANING and not namespace)
    ]
    assert len(names) > (300 if not namespace else 20)
    missing = [name for name in names if getattr(ours, name, None) is not getattr(ops, name)]
    assert not missing, f"not reachable as the op under tape.torch{namespace}: {missing}"


def test_top_level_names_torch_gives_another_meaning_raise_naming_the_right_one():
    """torch.svd, torch.embedding, torch.batch_norm, ... are not the registered op of that name (which is
    torch.linalg's or F's): the face refuses them rather than compute something else. Each differs in torch."""
    a = torch_.tensor(np.random.default_rng(0).standard_normal((3, 3)))
    assert not torch_.allclose(torch_.svd(a)[2], torch_.linalg.svd(a)[2])  # V against Vh
    ours_vh, theirs_vh = ops.svd(torch.tensor(a.numpy()))[2].numpy(), torch_.linalg.svd(a)[2].numpy()
    np.testing.assert_allclose(np.abs(ours_vh), np.abs(theirs_vh), 1e-12, 1e-12)  # Vh up to row signs, not V
    for removed in ("solve", "lstsq", "matrix_rank"):
        with pytest.raises(RuntimeError, match="removed"):
            getattr(torch_, removed)(a, a)
    with pytest.raises(Exception):  # noqa: B017  -- torch.cond is control flow: it takes (pred, true_fn, false_fn)
        torch_.cond(a)
    w, idx = torch_.tensor(np.arange(12.0).reshape(4, 3)), torch_.tensor([[1, 3]])
    assert torch_.equal(torch_.embedding(w, idx), torch_.nn.functional.embedding(idx, w))  # arguments reversed
    offsets = torch_.tensor([0])
    assert torch_.equal(torch_.embedding_bag(w, idx.view(-1), offsets)[0],
                        torch_.nn.functional.embedding_bag(idx.view(-1), w, offsets, mode="sum"))  # fmt: skip
    x, mean, var = torch_.randn(2, 3, 4, dtype=torch_.float64), torch_.zeros(3).double(), torch_.ones(3).double()
    weight, bias = torch_.full((3,), 2.0).double(), torch_.full((3,), 0.5).double()
    F = torch_.nn.functional
    assert torch_.allclose(torch_.batch_norm(x, weight, bias, mean, var, False, 0.1, 1e-5, False),
                           F.batch_norm(x, mean, var, weight, bias))  # fmt: skip
    assert torch_.allclose(torch_.instance_norm(x, weight, bias, None, None, True, 0.1, 1e-5, False),
                           F.instance_norm(x, None, None, weight, bias))  # fmt: skip
    for name, why in torch.OTHER_MEANING.items():
        assert hasattr(ops, name) and hasattr(torch_, name)
        with pytest.raises(AttributeError, match=f"tape.torch.{name}: not provided"):
            getattr(torch, name)
        assert why


def test_linalg_names_are_the_registered_ops():
    names = [n for n in dir(torch_.linalg) if not n.startswith("_")]
    reached = {n: getattr(torch.linalg, n) for n in names if hasattr(torch.linalg, n)}
    assert (
        torch.linalg.norm is ops.linalg_norm and torch.linalg.cross is ops.linalg_cross and torch.linalg.inv is ops.inv
    )
    assert len(reached) >= 20 and all(type(op).__name__ == "Op" for op in reached.values())


def test_an_unknown_name_raises_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no_such_op"):
        torch.no_such_op  # noqa: B018
    with pytest.raises(AttributeError, match="no_such_op"):
        torch.nn.functional.no_such_op  # noqa: B018


MATH_FREE_NUMPY = {"dtype", "float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool_",
                   "ndarray", "generic", "array", "asarray", "frombuffer",
                   "finfo", "iinfo", "promote_types", "can_cast"}  # dtype facts, not arithmetic  # fmt: skip


def test_nothing_in_tape_torch_defines_math():
    """The face defines no op (no defop, no registry use) and calls no numpy function beyond making dtypes and
    holding arrays: every number it gives comes from the engine's ops and constructors."""
    files = sorted(TORCH_DIR.rglob("*.py"))
    assert len(files) > 10
    for path in files:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "np":
                assert node.attr in MATH_FREE_NUMPY, f"{path.relative_to(ROOT)} uses np.{node.attr}"
            if isinstance(node, ast.Name):
                assert node.id not in ("defop", "Op"), f"{path.relative_to(ROOT)} defines an op"


def test_every_import_form_a_torch_program_uses():
    import tape.torch.nn.functional as F1
    from tape.torch.nn import functional as F2
    from tape.torch.nn.init import xavier_uniform_  # noqa: F401
    from tape.torch.nn.utils import clip_grad_norm_
    from tape.torch.optim.lr_scheduler import StepLR  # noqa: F401
    from tape.torch.utils.data import BatchSampler, Dataset, Sampler, SequentialSampler  # noqa: F401
    from tape.torch.utils.data.dataloader import DataLoader as DL

    assert F1 is F2 and F1.softmax is ops.softmax and DL is DataLoader
    assert clip_grad_norm_ is optim.clip_grad_norm_
    assert torch.func.functional_call is not None and torch.onnx.export is not None
    assert nn.modules.rnn.LSTM is nn.LSTM and nn.modules.linear.Linear is nn.Linear
    assert torch.exp is ops.exp and torch.cat is ops.cat and torch.Tensor is type(torch.zeros(1))


def test_dtypes_are_numpys_under_torchs_names():
    for name in ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"):
        assert getattr(torch, name) == np.dtype(str(getattr(torch_, name)).removeprefix("torch."))
    assert (torch.float, torch.double, torch.long, torch.int, torch.half) == (
        torch.float32, torch.float64, torch.int64, torch.int32, torch.float16)  # fmt: skip
    assert torch.zeros(2, dtype=torch.float64).dtype == torch.float64
    assert torch.get_default_dtype() == torch.float32
    torch.set_default_dtype(torch.float32)
    with pytest.raises(NotImplementedError, match="set_default_dtype"):
        torch.set_default_dtype(torch.float64)


# -- one CPU device --------------------------------------------------------------------------------------------
def test_cpu_device_arguments_are_no_ops_and_cuda_raises_naming_the_device():
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert dev == torch.device("cpu") == "cpu" and str(dev) == "cpu" and repr(dev) == repr(torch_.device("cpu"))
    assert str(torch.device("cuda:1")) == "cuda:1" and torch.device("cuda", 1).index == 1
    x = torch.ones(2, 3, device=dev, pin_memory=False)
    assert x.device == dev and x.device.type == "cpu" and not x.is_cuda
    assert x.to(dev) is x and x.to("cpu") is x and x.cpu() is x and x.to(x) is x
    assert x.to(dev, torch.float64).dtype == torch.float64 and x.to(torch.float64).dtype == torch.float64
    assert x.to(dtype=torch.float64, device="cpu", non_blocking=True).dtype == torch.float64
    copied = x.to("cpu", copy=True)
    assert copied is not x and np.array_equal(copied.numpy(), x.numpy())
    for call in (lambda: x.cuda(), lambda: x.to("cuda"), lambda: x.to(torch.device("cuda:0")),
                 lambda: torch.zeros(2, device="cuda"), lambda: torch.tensor([1.0], device="mps"),
                 lambda: x.new_zeros(2, device="cuda")):  # fmt: skip
        with pytest.raises(
            RuntimeError,
            match="'(cuda|mps)(:0)?', but (CUDA|MPS) is not available in minitape: it computes on the CPU only",
        ):
            call()
    assert not torch.cuda.is_available() and torch.cuda.device_count() == 0 and not torch.accelerator.is_available()
    assert torch.cuda.manual_seed_all(0) is None and not torch.backends.mps.is_available()
    torch.backends.cudnn.deterministic = True


def test_tensor_methods_match_torchs():
    a = np.arange(12.0).reshape(3, 4)
    x, t = torch.tensor(a), torch_.tensor(a)
    assert x.type() == t.type() == "torch.DoubleTensor"
    assert x.type(torch.int64).dtype == torch.int64 and x.type("torch.FloatTensor").dtype == torch.float32
    assert x.type(torch.float64) is x
    np.testing.assert_array_equal(x.narrow(1, 1, 2).numpy(), t.narrow(1, 1, 2).numpy())
    np.testing.assert_array_equal(x.t().numpy(), t.t().numpy())
    z = x.new_zeros(2, 3, device="cpu")
    assert z.shape == (2, 3) and z.dtype == torch.float64
    assert torch.LongTensor(4).shape == (4,) and torch.LongTensor(4).dtype == torch.int64
    np.testing.assert_array_equal(torch.LongTensor([1, 2]).numpy(), torch_.LongTensor([1, 2]).numpy())
    assert torch.FloatTensor([1.5]).dtype == torch.float32 and torch.FloatTensor(2, 3).shape == (2, 3)
    assert isinstance(x, torch.Tensor) and isinstance(nn.Parameter(x), torch.Tensor) and torch.is_tensor(x)
    assert torch.numel(x) == 12 and torch.from_numpy(a).dtype == torch.float64


# -- grad modes ------------------------------------------------------------------------------------------------
def test_inference_mode_as_context_and_decorator():
    w = torch.ones(2, requires_grad=True)

    @torch.inference_mode()
    def called(v):
        return v * 2

    @torch.inference_mode
    def bare(v):
        return v * 2

    with torch.inference_mode():
        assert not (w * 2).requires_grad and not torch.is_grad_enabled()
    assert torch.is_grad_enabled()
    assert not called(w).requires_grad and not bare(w).requires_grad and (w * 2).requires_grad
    with torch.inference_mode(False):
        assert (w * 2).requires_grad
    with torch.set_grad_enabled(False):
        assert not (w * 2).requires_grad
    assert (w * 2).requires_grad


# -- optimizers, samplers, loaders -----------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [{}, {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1}])
def test_adadelta_matches_torch_in_float64(kwargs):
    rng = np.random.default_rng(0)
    w0, xs = rng.standard_normal((3, 4)), rng.standard_normal((5, 6, 4))
    ours, theirs = torch.tensor(w0, requires_grad=True), torch_.tensor(w0, requires_grad=True)
    mine, real = optim.Adadelta([ours], **kwargs), torch_.optim.Adadelta([theirs], **kwargs)
    for x in xs:
        for w, opt, lib in ((ours, mine, torch), (theirs, real, torch_)):
            opt.zero_grad()
            (lib.tanh(lib.tensor(x) @ w.T) ** 2).sum().backward()
            opt.step()
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="rho"):
        optim.Adadelta([ours], rho=1.5)


def test_random_sampler_with_replacement_is_lazy_and_uniform():
    data = list(range(7))
    sampler = RandomSampler(data, replacement=True, num_samples=10**10, generator=torch.Generator().manual_seed(0))
    assert len(sampler) == 10**10
    it = iter(sampler)
    first = [next(it) for _ in range(7000)]  # a list of 10**10 indices would not fit in memory
    counts = np.bincount(first, minlength=7)
    assert set(first) <= set(data) and counts.min() > 850
    again = RandomSampler(data, replacement=True, num_samples=10**10, generator=torch.Generator().manual_seed(0))
    assert [x for _, x in zip(range(7000), again)] == first
    order = list(RandomSampler(data, num_samples=10))
    assert len(order) == 10 and sorted(order[:7]) == data


def test_dataloader_with_a_sampler_and_torchs_options():
    xs = torch.tensor(np.arange(10.0))
    ds = TensorDataset(xs)
    sampler = RandomSampler(ds, replacement=True, num_samples=9, generator=torch.Generator().manual_seed(1))
    loader = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=0, pin_memory=True)
    batches = [b[0].numpy() for b in loader]
    assert [len(b) for b in batches] == [4, 4, 1] and len(loader) == 3
    assert all(np.isin(b, np.arange(10.0)).all() for b in batches)
    assert [len(b[0]) for b in DataLoader(ds, 4, False, None, None, 0, None, False, True)] == [4, 4]
    for lib in (torch, torch_):
        with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
            lib.utils.data.DataLoader(ds, shuffle=True, sampler=sampler)
    with pytest.raises(ValueError, match="num_workers=2: minitape's loader runs in this process only"):
        DataLoader(ds, num_workers=2)


# -- save / load -----------------------------------------------------------------------------------------------
def _trained_lstm():
    model = nn.LSTM(3, 4, num_layers=2)
    opt = optim.Adam(model.parameters(), lr=0.01)
    out, _ = model(torch.randn(5, 2, 3))
    out.sum().backward()
    opt.step()
    return model, opt


def test_save_and_load_state_dicts_optimizer_states_and_plain_values(tmp_path):
    model, opt = _trained_lstm()
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "best": float("inf"),
                "cfg": ("lstm", [1, 2], None), "steps": {0: 1}}, path)  # fmt: skip
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    assert ckpt["epoch"] == 3 and ckpt["best"] == float("inf") and ckpt["cfg"] == ("lstm", [1, 2], None)
    assert ckpt["steps"] == {0: 1}
    fresh, fresh_opt = nn.LSTM(3, 4, num_layers=2), None
    fresh.load_state_dict(ckpt["model"])
    fresh_opt = optim.Adam(fresh.parameters(), lr=0.01)
    fresh_opt.load_state_dict(ckpt["optimizer"])
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    assert list(torch.load(buffer)) == list(model.state_dict())


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(2, 3)
        self.head = nn.Linear(3, 2)
        self.tied = nn.Linear(3, 2)
        self.tied.weight = self.head.weight
        self.note = "kept"

    def forward(self, x):
        return self.tied(self.rnn(x)[0])


def test_whole_module_loads_only_through_safe_globals_and_keeps_ties(tmp_path):
    model = _Net()
    torch.save(model, tmp_path / "m.pt")
    with pytest.raises(ValueError, match="Unsupported global.*_Net.*safe_globals"):
        torch.load(tmp_path / "m.pt")
    with pytest.raises(ValueError, match="Unsupported global"):
        torch.load(tmp_path / "m.pt", weights_only=False)  # never arbitrary classes, unlike torch's
    with torch.serialization.safe_globals([_Net, nn.modules.rnn.LSTM, nn.modules.linear.Linear]):
        loaded = torch.load(tmp_path / "m.pt")
    x = torch.randn(4, 1, 2)
    assert type(loaded) is _Net and loaded.note == "kept" and loaded.tied.weight is loaded.head.weight
    np.testing.assert_array_equal(loaded(x).detach().numpy(), model(x).detach().numpy())


def test_load_refuses_pickles_and_torchs_own_files(tmp_path):
    (tmp_path / "p.pt").write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ValueError, match="pickle"):
        torch.load(tmp_path / "p.pt")
    torch_.save({"w": torch_.ones(2)}, tmp_path / "t.pt")
    with pytest.raises(ValueError, match="not a file written by tape.torch.save"):
        torch.load(tmp_path / "t.pt")
    with pytest.raises(TypeError, match="object"):
        torch.save({"x": object()}, tmp_path / "o.pt")
    with pytest.raises(RuntimeError, match="cuda"):
        torch.load(tmp_path / "p.pt", map_location="cuda")


def test_rnn_flatten_parameters_is_a_no_op():
    rnn = nn.GRU(2, 3)
    before = {k: v.numpy().copy() for k, v in rnn.state_dict().items()}
    assert rnn.flatten_parameters() is None
    assert all(np.array_equal(before[k], v.numpy()) for k, v in rnn.state_dict().items())


def test_pyproject_lists_every_tape_torch_package():
    text = (ROOT / "pyproject.toml").read_text()
    packages = {str(p.parent.relative_to(ROOT)).replace("/", ".") for p in TORCH_DIR.rglob("__init__.py")}
    assert packages and all(f'"{p}"' in text for p in packages)


def test_tape_torch_is_the_top_layer_nothing_imports_it():
    """The face sits above everything: no file of the engine, the op library or the training stack imports it."""
    users = [
        str(path.relative_to(ROOT))
        for folder in (ROOT / "tape", ROOT / "ops")
        for path in folder.rglob("*.py")
        if TORCH_DIR not in path.parents and "tape.torch" in path.read_text()
    ]
    assert not users, users


def test_importing_tape_torch_loads_only_the_face():
    """``import tape.torch`` beyond ``import tape`` loads the face's own small modules and nothing heavy (the op
    library loads on first use): benchmarks/bench_import.py measures +5 ms, issue #32 asks < 50. An eager import of
    ops from the face (set_num_threads's) once cost +270 ms."""
    import subprocess
    import sys

    code = "import sys, tape; a = set(sys.modules); import tape.torch; print(sorted(set(sys.modules) - a))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = eval(out.stdout)  # noqa: S307  -- a list literal printed by the child
    assert all(name.startswith(("tape.torch", "tape.devices")) for name in loaded), loaded
