"""gradcheck: compare the reverse pass with central finite differences, in float64.

Full mode checks the whole vector-Jacobian product ``u^T J`` for a random output cotangent ``u``,
element by element (two forwards per input element), so a failure names the input and the position.
Fast mode compares ``u^T J v`` for a few random directions ``v`` (two forwards each) -- for inputs too
large to perturb element by element.
"""

from __future__ import annotations

import numpy as np

from .autodiff import reverse_pass
from .state import enable_grad
from .tensors import Tensor

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(AssertionError):
    """The analytical gradient disagrees with finite differences."""


def _grad_inputs(name: str, inputs) -> tuple[list, list[bool]]:
    """The inputs as a list and, for each, whether it is a Tensor with requires_grad=True (at least one must be)."""
    inputs = list(inputs)
    needs_grad = [isinstance(x, Tensor) and x.requires_grad for x in inputs]
    if not any(needs_grad):
        raise ValueError(f"{name}: no input is a Tensor with requires_grad=True; nothing to check")
    return inputs, needs_grad


def _evaluate(fn, inputs, arrays, needs_grad):
    values = []
    for x, a, need in zip(inputs, arrays, needs_grad):
        values.append(Tensor(a, requires_grad=need, dtype=a.dtype) if need else x)
    out = fn(*values)
    if not isinstance(out, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, got {type(out).__name__}")
    return values, out


def gradcheck(
    fn,
    inputs,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    fast_mode: bool = False,
    seed: int = 0,
    n_directions: int = 3,
    raise_exception: bool = True,
) -> bool:
    """Check ``fn(*inputs)``'s gradients for every floating Tensor input with requires_grad=True.

    ``inputs`` may mix Tensors and other arguments (passed through unchanged). Float32 inputs are
    refused: finite differences in float32 cannot tell a right gradient from a wrong one.
    """
    inputs, needs_grad = _grad_inputs("gradcheck", inputs)
    for i, (x, need) in enumerate(zip(inputs, needs_grad)):
        if need and x.dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} is {x.dtype}; finite differences need float64 inputs")
    arrays = [np.array(x._data, order="C") if need else None for x, need in zip(inputs, needs_grad)]
    rng = np.random.default_rng(seed)
    u, grads = _analytic(fn, inputs, arrays, needs_grad, rng)

    def projected(perturbed_arrays):
        # evaluated with gradients on, like the analytic pass (and torch's gradcheck): ``fn`` may take a
        # gradient inside (a gradient penalty, an inner optimisation step)
        _, o = _evaluate(fn, inputs, perturbed_arrays, needs_grad)
        return float(np.sum(o._data * u))

    if fast_mode:
        failures = _directions_failures(projected, arrays, grads, rng, n_directions, eps, atol, rtol)
    else:
        failures = _elementwise_failures(projected, arrays, grads, eps, atol, rtol)
    if failures:
        if raise_exception:
            raise GradcheckError("gradcheck failed:\n  " + "\n  ".join(failures))
        return False
    return True


def _analytic(fn, inputs, arrays, needs_grad, rng):
    """The output cotangent ``u`` (drawn from ``rng``) and the reverse pass's ``u^T J`` for each input (None where
    no gradient is needed, zeros for an input the output does not depend on)."""
    values, out = _evaluate(fn, inputs, arrays, needs_grad)
    if out.dtype != np.float64:
        raise TypeError(f"gradcheck: fn returned {out.dtype}; it must compute in float64")
    u = rng.standard_normal(out.shape)
    leaves = [v for v, need in zip(values, needs_grad) if need]
    if out._node is None:
        analytic: dict = {leaf.id: None for leaf in leaves}
    else:
        analytic = reverse_pass([out], [u], retain_graph=False, sources=leaves)
    grads: list[np.ndarray | None] = []
    for v, need in zip(values, needs_grad):
        g = analytic.get(v.id) if need else None
        grads.append(None if not need else np.zeros(v.shape) if g is None else g)
    return u, grads


def _directions_failures(projected, arrays, grads, rng, n_directions, eps, atol, rtol) -> list[str]:
    """Fast mode: ``u^T J v`` against finite differences along ``n_directions`` random directions ``v``."""
    failures = []
    for k in range(n_directions):
        directions = [rng.standard_normal(a.shape) if a is not None else None for a in arrays]
        plus = [a + eps * d if a is not None and d is not None else None for a, d in zip(arrays, directions)]
        minus = [a - eps * d if a is not None and d is not None else None for a, d in zip(arrays, directions)]
        numeric = (projected(plus) - projected(minus)) / (2 * eps)
        exact = sum(float(np.sum(g * d)) for g, d in zip(grads, directions) if g is not None)
        if abs(numeric - exact) > atol + rtol * abs(numeric):
            failures.append(
                f"direction {k}: analytical u^T J v = {exact:.8g}, numerical = {numeric:.8g}, "
                f"error {abs(numeric - exact):.3g}"
            )
    return failures


def _elementwise_failures(projected, arrays, grads, eps, atol, rtol) -> list[str]:
    """Full mode: every entry of ``u^T J`` against central differences (two forwards per input element)."""
    failures = []
    for i, (a, analytical) in enumerate(zip(arrays, grads)):
        if a is None or analytical is None:  # both are None exactly where no gradient is needed
            continue
        numeric = np.empty(a.shape)
        flat = numeric.reshape(-1)
        for pos in range(a.size):
            plus = list(arrays)
            minus = list(arrays)
            plus[i] = up = a.copy()
            minus[i] = down = a.copy()
            up.reshape(-1)[pos] += eps
            down.reshape(-1)[pos] -= eps
            flat[pos] = (projected(plus) - projected(minus)) / (2 * eps)
        error = np.abs(numeric - analytical)
        bad = error > atol + rtol * np.abs(numeric)
        if bad.any():
            worst = np.unravel_index(np.argmax(np.where(bad, error, -1)), a.shape)
            failures.append(
                f"input {i}: {int(bad.sum())} of {a.size} entries differ; worst at position "
                f"{tuple(int(p) for p in worst)}: analytical {analytical[worst]:.8g}, numerical "
                f"{numeric[worst]:.8g}, error {error[worst]:.3g}"
            )
    return failures


def gradgradcheck(fn, inputs, seed: int = 0, **options) -> bool:
    """Check second derivatives: float64 finite differences of the vector-Jacobian product, as PyTorch's.

    For a random output cotangent ``u`` and random directions ``v`` (drawn from ``seed``), the scalar
    ``sum_i <VJP_i(x, u), v_i>`` -- computed by a ``create_graph=True`` backward -- is gradchecked with respect
    to every grad-requiring input and to ``u``; ``options`` are gradcheck's (eps, atol, rtol, fast_mode,
    n_directions, raise_exception). A rule whose recorded backward is wrong (or a saved value wrongly treated
    as a constant) fails here even when its first-order values are right.
    """
    from .functional import gradients

    inputs, needs_grad = _grad_inputs("gradgradcheck", inputs)
    rng = np.random.default_rng(seed)
    out = fn(*inputs)  # with gradients on: fn may take a gradient inside
    if not isinstance(out, Tensor):
        raise TypeError(f"gradgradcheck: fn must return a Tensor, got {type(out).__name__}")
    # the cotangent is perturbed too, when finite differences can (a float64 output; a cast to float32 is not)
    u = Tensor(rng.standard_normal(out.shape), requires_grad=out.dtype == np.float64, dtype=out.dtype)
    directions = [rng.standard_normal(x.shape) if need else None for x, need in zip(inputs, needs_grad)]

    def projected_vjp(*args):
        *xs, cotangent = args
        with enable_grad():
            result = fn(*xs)
            sources = [x for x, need in zip(xs, needs_grad) if need]
            total = None
            if result._node is not None:
                grads = gradients(result, sources, [cotangent], create_graph=True, allow_unused=True)
                for g, v in zip(grads, [d for d in directions if d is not None]):
                    if g is not None:
                        term = (g * v).sum()  # float64: the gradient of a float64 input
                        total = term if total is None else total + term
        if total is None:  # no gradient at all: a constant 0 that still reads the cotangent
            total = (cotangent * 0).sum()
        return total

    return gradcheck(projected_vjp, inputs + [u], seed=seed, **options)
