"""PyTorch's OpInfo samples that minitape refuses where torch computes (issue #32). For every entry of torch's
``op_db`` that calls torch's function itself and whose name ``tape.torch`` answers (``torch.x``,
``torch.nn.functional.x``, ``torch.linalg.x``, ``torch.special.x``), each float64 sample is run through torch and
through tape.torch's op with the same arguments (tensors converted); a sample torch computes and we raise on is a
refusal. Prints the total and the most common reasons; the samples both compute are compared too (values to 1e-7
relative, NaN where NaN, integer results exactly) and every difference is listed: accepting an argument must not
mean computing another number. (tests/ops check parity on the registry's own samples.)
Run: ``PYTHONPATH=. python benchmarks/count_opinfo_refusals.py [--top 25]``."""

import argparse
import collections
import importlib
import re
import warnings

import numpy as np
import torch
from torch.testing._internal.common_methods_invocations import op_db

import tape
import tape.torch  # noqa: F401


def resolved(name: str):
    """(torch's function, ours) for an op_db name through tape.torch's face, or None where we have no such op."""
    module, _, stem = name.rpartition(".")
    theirs = torch
    for part in module.split(".") if module else ():
        theirs = getattr(theirs, part)
    try:
        ours = importlib.import_module("tape.torch" + (f".{module}" if module else ""))
        return getattr(theirs, stem), getattr(ours, stem)
    except (AttributeError, ImportError):
        return None


def converted(value):
    if isinstance(value, torch.Tensor):
        return tape.tensor(value.detach().numpy())
    if isinstance(value, list | tuple):
        return type(value)(converted(v) for v in value)
    if isinstance(value, dict):
        return {k: converted(v) for k, v in value.items()}
    if isinstance(value, torch.dtype):
        return np.dtype(str(value).removeprefix("torch."))
    return value


def flat(value) -> list:
    """The arrays of a result (a tensor, or nested tuples/lists of them), torch's or ours, as numpy arrays."""
    if isinstance(value, list | tuple):
        return [a for v in value for a in flat(v)]
    if isinstance(value, torch.Tensor):
        return [value.detach().numpy()]
    if isinstance(value, tape.Tensor):
        return [value.detach().numpy()]
    return [np.asarray(value)]


def _svd(u, s, vh):  # the matrix U S Vh: the factors' signs (and phases) are not unique, the product is
    k = s.shape[-1]
    return [s, (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]]


def _eigh(w, q):  # the eigenvalues and Q diag(w) Q^T: the eigenvectors' signs are not unique
    return [w, (q * w[..., None, :]) @ np.swapaxes(q, -1, -2).conj()]


# decompositions whose factors are unique only up to sign: compared through what is unique
_UP_TO_SIGN = {"linalg.svd": _svd, "linalg.eigh": _eigh}


def differs(theirs, ours, name: str = "") -> str | None:
    a, b = flat(theirs), flat(ours)
    if name in _UP_TO_SIGN and len(a) == len(b):
        a, b = _UP_TO_SIGN[name](*a), _UP_TO_SIGN[name](*b)
    if len(a) != len(b):
        return f"{len(b)} results where torch gives {len(a)}"
    for k, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape:
            return f"result {k}: shape {y.shape}, torch {x.shape}"
        if x.dtype.kind in "fc" or y.dtype.kind in "fc":
            if not np.allclose(y, x, rtol=1e-7, atol=1e-10, equal_nan=True):
                return f"result {k}: max difference {np.nanmax(np.abs(y.astype(float) - x.astype(float)))}"
        elif not np.array_equal(x, y):
            return f"result {k}: integer values differ"
    return None


def reason(error: Exception) -> str:
    text = re.sub(r"\d+", "N", str(error).split("\n")[0])
    return f"{type(error).__name__}: {text[:140]}"


# ops whose results are draws (numpy's stream, not torch's) or uninitialised memory: not compared
_RANDOM = {"empty_like", "rand_like", "randn_like", "randint_like", "bernoulli", "multinomial", "normal", "poisson",
           "nn.functional.dropout", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
           "nn.functional.dropout1d", "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.rrelu",
           "nn.functional.gumbel_softmax", "empty", "empty_strided", "randn", "rand", "randint", "randperm"}


def count(top: int) -> None:
    refusals, samples, reasons, differences = 0, 0, collections.Counter(), []
    per_op = collections.Counter()
    for info in op_db:
        pair = resolved(info.name)
        # only entries that call torch's function itself (some wrap it, reordering the arguments)
        if pair is None or info.op is not pair[0] or not info.supports_dtype(torch.float64, "cpu"):
            continue
        op = pair[1]
        try:
            cases = list(info.sample_inputs("cpu", torch.float64, requires_grad=False))
        except Exception:  # noqa: BLE001  -- a sample generator torch itself cannot run here
            continue
        for sample in cases:
            try:
                expected = info.op(sample.input, *sample.args, **sample.kwargs)
            except Exception:  # noqa: BLE001  -- torch refuses it too: not counted
                continue
            samples += 1
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got = op(converted(sample.input), *converted(sample.args), **converted(sample.kwargs))
            except Exception as e:  # noqa: BLE001  -- every refusal is what we count
                refusals += 1
                per_op[info.name] += 1
                reasons[f"{info.name}: {reason(e)}"] += 1
                continue
            problem = None if info.name in _RANDOM else differs(expected, got, info.name)
            if problem:
                differences.append(f"{info.name} ({sample.name or 'sample'}): {problem}")
    print(f"{refusals} of {samples} float64 OpInfo samples torch computes are refused by minitape")
    print("\nmost refused ops:", ", ".join(f"{name} {n}" for name, n in per_op.most_common(top)))
    print("\nmost common reasons:")
    for text, n in reasons.most_common(top):
        print(f"{n:5d}  {text}")
    print(f"\n{len(differences)} of the {samples - refusals} computed samples differ from torch's result:")
    for line in differences:
        print("   ", line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--top", type=int, default=25)
    count(parser.parse_args().top)
