"""PyTorch's OpInfo samples that minitape refuses where torch computes (issue #32). For every entry of torch's
``op_db`` that calls torch's function itself and whose name ``tape.torch`` answers (``torch.x``,
``torch.nn.functional.x``, ``torch.linalg.x``, ``torch.special.x``), each float64 sample is run through torch and
through tape.torch's op with the same arguments (tensors converted); a sample torch computes and we raise on is a
refusal. Prints the total and the most
common reasons. Not a parity check (tests/ops do that): it counts arguments we do not take.
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


def reason(error: Exception) -> str:
    text = re.sub(r"\d+", "N", str(error).split("\n")[0])
    return f"{type(error).__name__}: {text[:140]}"


def count(top: int) -> None:
    refusals, samples, reasons = 0, 0, collections.Counter()
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
                info.op(sample.input, *sample.args, **sample.kwargs)
            except Exception:  # noqa: BLE001  -- torch refuses it too: not counted
                continue
            samples += 1
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    op(converted(sample.input), *converted(sample.args), **converted(sample.kwargs))
            except Exception as e:  # noqa: BLE001  -- every refusal is what we count
                refusals += 1
                per_op[info.name] += 1
                reasons[f"{info.name}: {reason(e)}"] += 1
    print(f"{refusals} of {samples} float64 OpInfo samples torch computes are refused by minitape")
    print("\nmost refused ops:", ", ".join(f"{name} {n}" for name, n in per_op.most_common(top)))
    print("\nmost common reasons:")
    for text, n in reasons.most_common(top):
        print(f"{n:5d}  {text}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--top", type=int, default=25)
    count(parser.parse_args().top)
