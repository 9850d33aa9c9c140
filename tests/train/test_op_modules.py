"""torch.nn's one-op modules (tape/train/op_modules.py) against torch's: every class's constructor signature
(names, order, defaults -- so positional arguments bind alike) and its forward and input gradients on a sample in
float64, in train and eval mode; ``inplace=True`` writes into the input as torch's does."""

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the oracle

import tape  # noqa: E402
import tape.torch  # noqa: E402, F401  -- the face under test
from tape.train import op_modules  # noqa: E402

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 4, 6))  # (N, C, L)
IMG = rng.standard_normal((2, 4, 6, 6))
VOL = rng.standard_normal((1, 2, 4, 4, 4))
P = rng.uniform(0.05, 0.95, (3, 4))
LOGP = np.log(rng.dirichlet(np.ones(4), 3))
SIGN = np.array([1.0, -1.0, 1.0])
LABELS = np.array([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 0]], np.float64)
CLASSES = np.array([0, 3, 1])
ML = np.array([[3, 0, -1, 1], [1, 2, 3, -1], [0, -1, 1, 2]])

# class name -> (constructor args, constructor kwargs, inputs (arrays; float ones get gradients))
CASES = {
    "ReLU": ((), {}, (X,)), "ReLU6": ((), {}, (3 * X,)), "SiLU": ((), {}, (X,)), "Mish": ((), {}, (X,)),
    "SELU": ((), {}, (X,)), "ELU": ((0.7,), {}, (X,)), "CELU": ((0.7,), {}, (X,)),
    "LeakyReLU": ((0.2,), {}, (X,)), "Hardtanh": ((-0.5, 0.8), {}, (X,)), "Hardsigmoid": ((), {}, (4 * X,)),
    "Hardswish": ((), {}, (4 * X,)), "Threshold": ((0.1, 20.0), {}, (X,)), "Tanh": ((), {}, (X,)),
    "Sigmoid": ((), {}, (X,)), "LogSigmoid": ((), {}, (X,)), "Softsign": ((), {}, (X,)),
    "Tanhshrink": ((), {}, (X,)), "Softplus": ((2.0, 1.5), {}, (X,)), "Hardshrink": ((0.3,), {}, (X,)),
    "Softshrink": ((0.3,), {}, (X,)), "GLU": ((1,), {}, (X,)), "Softmax": ((1,), {}, (X,)),
    "Softmin": ((2,), {}, (X,)), "LogSoftmax": ((-1,), {}, (X,)),
    "CrossEntropyLoss": ((), {"label_smoothing": 0.1}, (P, CLASSES)), "NLLLoss": ((), {}, (LOGP, CLASSES)),
    "MSELoss": ((), {}, (P, LABELS)), "L1Loss": ((), {"reduction": "sum"}, (P, LABELS)),
    "SoftMarginLoss": ((), {}, (P, 2 * LABELS - 1)), "MultiLabelMarginLoss": ((), {}, (P, ML)),
    "SmoothL1Loss": ((), {"beta": 0.3}, (P, LABELS)), "HuberLoss": (("sum", 0.3), {}, (P, LABELS)),
    "KLDivLoss": ((), {"reduction": "batchmean"}, (LOGP, P / P.sum(1, keepdims=True))),
    "BCELoss": ((), {}, (P, LABELS)), "BCEWithLogitsLoss": ((), {}, (X[0, :3, :4], LABELS)),
    "MultiLabelSoftMarginLoss": ((), {}, (X[0, :3, :4], LABELS)),
    "MarginRankingLoss": ((0.1,), {}, (P[:, 0], P[:, 1], SIGN)),
    "HingeEmbeddingLoss": ((0.5,), {}, (P, 2 * LABELS - 1)),
    "CosineEmbeddingLoss": ((0.1,), {}, (P, P[::-1].copy(), SIGN)),
    "PoissonNLLLoss": ((), {}, (X[0, :3, :4], LABELS)), "MultiMarginLoss": ((2, 0.5), {}, (P, CLASSES)),
    "TripletMarginLoss": ((0.5,), {}, (P, P[::-1].copy(), LOGP)),
    "CosineSimilarity": ((2,), {}, (X, X[::-1].copy())), "PairwiseDistance": ((1.0,), {}, (P, LOGP)),
    "MaxPool1d": ((3, 2, 1), {}, (X,)), "MaxPool2d": ((2,), {}, (IMG,)), "MaxPool3d": ((2,), {}, (VOL,)),
    "AvgPool1d": ((3, 2, 1), {}, (X,)), "AvgPool2d": ((2,), {}, (IMG,)), "AvgPool3d": ((2,), {}, (VOL,)),
    "LPPool1d": ((2, 3), {}, (X,)), "LPPool2d": ((2, 2), {}, (IMG,)),
    "AdaptiveAvgPool1d": ((4,), {}, (X,)), "AdaptiveAvgPool2d": ((3,), {}, (IMG,)),
    "AdaptiveAvgPool3d": ((2,), {}, (VOL,)), "AdaptiveMaxPool1d": ((3,), {}, (X,)),
    "AdaptiveMaxPool2d": ((3,), {}, (IMG,)),
    "Upsample": ((), {"scale_factor": 2, "mode": "linear", "align_corners": False}, (X,)),
    "PixelShuffle": ((2,), {}, (IMG,)), "PixelUnshuffle": ((2,), {}, (IMG,)), "ChannelShuffle": ((2,), {}, (IMG,)),
    "LocalResponseNorm": ((3,), {}, (IMG,)), "Fold": (((4, 5), 2), {}, (rng.standard_normal((1, 8, 12)),)),
    "Unfold": ((2,), {"stride": 2}, (IMG,)), "Flatten": ((), {}, (IMG,)),
    "Dropout1d": ((0.3,), {}, (X,)), "Dropout2d": ((0.3,), {}, (IMG,)), "Dropout3d": ((0.3,), {}, (VOL,)),
    "AlphaDropout": ((0.3,), {}, (X,)), "FeatureAlphaDropout": ((0.3,), {}, (IMG,)),
    **{f"{kind}Pad{n}d": (((1, 2) * n,) + ((0.5,) if kind == "Constant" else ()), {}, ((X, IMG, VOL)[n - 1],))
       for kind in ("Zero", "Constant", "Reflection", "Replication", "Circular") for n in (1, 2, 3)},
}  # fmt: skip

# how many leading inputs get a gradient, where more than the first
DIFFERENTIABLE = {
    "MarginRankingLoss": 2, "CosineEmbeddingLoss": 2, "TripletMarginLoss": 3, "CosineSimilarity": 2,
    "PairwiseDistance": 2,
}  # fmt: skip
# torch's float64 kernels for these round a constant through float32 (Hardsigmoid's slope 1/6 is 0.1666666716, CELU's
# 1/alpha likewise): ours are the exact values, so the comparison allows float32's 6e-8
FLOAT32_CONSTANTS = {"CELU", "Hardsigmoid"}
RANDOM = {"Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"}


def test_every_one_op_module_is_tested():
    assert sorted(CASES) == sorted(op_modules.__all__)


@pytest.mark.parametrize("name", sorted(CASES))
def test_constructor_signature_is_torchs(name):
    theirs = inspect.signature(getattr(torch.nn, name).__init__).parameters.values()
    theirs = [(p.name, p.default) for p in theirs if p.kind is p.POSITIONAL_OR_KEYWORD and p.name != "self"]
    theirs = [(n, d) for n, d in theirs if n not in ("device", "dtype")]
    ours = [(p.name, p.default) for p in inspect.signature(getattr(op_modules, name).__init__).parameters.values()]
    assert ours[1:] == theirs


def _run(ns, name, train: bool):
    args, kwargs, inputs = CASES[name]
    module = getattr(ns.nn, name)(*args, **kwargs)
    module.train(train)
    grads = [i < DIFFERENTIABLE.get(name, 1) for i in range(len(inputs))]
    tensors = [ns.tensor(a.copy(), requires_grad=g) if g else ns.tensor(a) for a, g in zip(inputs, grads)]
    out = module(*tensors)
    out = out[0] if isinstance(out, tuple) else out
    weights = np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape))
    (out * ns.tensor(weights)).sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in tensors if t.requires_grad]


@pytest.mark.parametrize("name", sorted(set(CASES) - RANDOM))
@pytest.mark.parametrize("train", [True, False])
def test_forward_and_gradients_equal_torchs(name, train):
    ours, theirs = _run(tape.torch, name, train), _run(torch, name, train)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-10, atol=1e-12)
    assert len(ours[1]) == len(theirs[1])
    for a, b in zip(ours[1], theirs[1]):
        np.testing.assert_allclose(a, b, rtol=1e-7 if name in FLOAT32_CONSTANTS else 1e-9, atol=1e-12)


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_the_dropout_family_follows_the_modules_mode(name):
    args, kwargs, (x,) = CASES[name]
    module = getattr(tape.torch.nn, name)(*args, **kwargs)
    module.eval()
    np.testing.assert_array_equal(module(tape.torch.tensor(x)).numpy(), x)  # eval: the identity, as torch's
    module.train()
    assert not np.array_equal(module(tape.torch.tensor(x)).numpy(), x)


@pytest.mark.parametrize("name", ["ReLU", "ELU", "Hardtanh", "LeakyReLU", "Threshold", "Dropout2d"])
def test_inplace_writes_into_the_input_as_torchs(name):
    args, kwargs, (x,) = CASES[name]
    results = []
    for ns in (tape.torch, torch):
        module = getattr(ns.nn, name)(*args, inplace=True, **kwargs)
        module.eval()
        t = ns.tensor(x.copy())
        assert module(t) is t
        results.append(t.numpy().copy())
    np.testing.assert_array_equal(*results)
    leaf = tape.torch.tensor(x.copy(), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"nn.ReLU\(inplace=True\): a leaf Tensor that requires grad"):
        tape.torch.nn.ReLU(inplace=True)(leaf)


def test_torchs_deprecated_loss_options_are_refused_naming_reduction():
    with pytest.raises(ValueError, match="MSELoss: 'size_average' is deprecated .* reduction="):
        tape.torch.nn.MSELoss(size_average=False)
    with pytest.raises(ValueError, match="Hardtanh: 'min_value' is deprecated .* pass min_val"):
        tape.torch.nn.Hardtanh(min_value=-2.0)
    with pytest.raises(TypeError, match=r"Threshold: missing a required argument: 'value'; the signature is"):
        tape.torch.nn.Threshold(0.1)
    with pytest.raises(ValueError, match=r"ZeroPad2d: argument 'padding' needs 4 sides \(or one for all\)"):
        tape.torch.nn.ZeroPad2d((1, 2))


def test_every_module_class_is_also_under_torchs_submodule_path():
    """torch's serialization names a class by its submodule (``torch.nn.modules.activation.ELU``): a whole-module
    ``load`` with ``safe_globals`` finds ours under the same path (tape/torch/nn/modules.py)."""
    import sys

    import tape.torch.nn as ours

    for name in ours.__all__:
        theirs = getattr(torch.nn, name, None)
        if isinstance(theirs, type) and theirs.__module__.startswith(("torch.nn.modules.", "torch.nn.parameter")):
            path = "tape.torch.nn.modules." + theirs.__module__.rsplit(".", 1)[-1]
            assert getattr(sys.modules.get(path), name, None) is getattr(ours, name), (name, path)
