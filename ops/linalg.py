"""Linear algebra: matmul, linear (x W^T + b) and einsum, each with its VJPs, torch 2.13 semantics.

matmul and linear sit on the training hot path: when a batched operand meets a plain matrix, the batch
dims are folded into the rows so one GEMM does the work (no batched loop and no broadcast-then-sum of
the weight gradient).

einsum: a registered op takes a fixed list of tensor inputs, so the op ``einsum`` has inputs
``operand0, operand1?, operand2?`` (absent ones are None) and the equation as its attribute. The public
``einsum(equation, *operands)`` records one op for up to ``MAX_EINSUM_OPERANDS`` operands and, beyond
that, contracts the first ones into an intermediate first (keeping the labels still needed), recursively.
The VJP of an einsum is an einsum of the output gradient with the other operands; labels an operand sums
alone are broadcast back, repeated labels ('ii->i', traces) write the gradient onto the diagonal, and
labelled or '...' dims of size 1 that were broadcast are summed back to size 1.
"""

__all__ = ['matmul', 'linear', 'einsum', 'MAX_EINSUM_OPERANDS']

import functools
import math
import string
from collections import Counter
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tape.broadcast import unbroadcast
from tape.registry import Sample, defop

from ._samples import transposed, uniform


def _same_dtype(op: str, names: tuple, arrays) -> None:
    first = arrays[0]
    for name, a in zip(names[1:], arrays[1:]):
        if a is not None and a.dtype != first.dtype:
            raise TypeError(f"{op}: argument '{name}' expected dtype {first.dtype} (that of '{names[0]}'), got "
                            f"{a.dtype}")


# -- matmul ------------------------------------------------------------------------------------------------
def _check_matmul(a, b):
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: both arguments need at least 1 dim, got shapes {a.shape} and {b.shape}")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        raise ValueError(f"matmul: argument 'b' expected {k_a} rows to match a's last dim (a: {a.shape}), "
                         f"got shape {b.shape}")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: argument 'b' expected batch dims broadcastable with a's {a.shape[:-2]}, got "
                         f"shape {b.shape}") from None
    _same_dtype("matmul", ("a", "b"), (a, b))


def _times_matrix(a, m):
    """``a @ m`` for a matrix ``m``; a batched ``a`` is folded into rows so one GEMM does it all."""
    if a.ndim <= 2:
        return a @ m
    return (_rows(a) @ m).reshape(a.shape[:-1] + (m.shape[-1],))


def _matmul(a, b):
    return _times_matrix(a, b) if b.ndim == 2 else np.matmul(a, b)


def _as_matrices(g, a, b):
    """View 1-D operands (and the matching gradient) as matrices, as matmul itself does."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if b.ndim == 1:
        g = g[..., None]
    if a.ndim == 1:
        g = g[..., None, :]
    return g, a2, b2


def _matmul_vjp_a(g, ans, a, b):
    g2, a2, b2 = _as_matrices(g, a, b)
    if b2.ndim == 2:
        return _times_matrix(g2, b2.T).reshape(a.shape)
    return unbroadcast(g2 @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)


def _matmul_vjp_b(g, ans, a, b):
    g2, a2, b2 = _as_matrices(g, a, b)
    if b2.ndim == 2:  # every batch of a met the same matrix: one GEMM over all rows
        return (_rows(a2).T @ _rows(g2)).reshape(b.shape)
    return unbroadcast(np.swapaxes(a2, -1, -2) @ g2, b2.shape).reshape(b.shape)


def _matmul_samples(rng):
    shapes = [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
              ((2, 3), (5, 3, 4)), ((2, 1, 2, 3), (4, 3, 2)), ((4,), (2, 4, 3)), ((2, 2, 3), (3,)),
              ((2, 1, 3), (3, 1))]
    out = [Sample((uniform(rng, sa), uniform(rng, sb)), {}, f"{sa} @ {sb}") for sa, sb in shapes]
    out.append(Sample((uniform(rng, (3, 2)).T, uniform(rng, (4, 3)).T), {}, "non-contiguous"))
    out.append(Sample((transposed(rng, (3, 2, 2)), uniform(rng, (2, 3))), {}, "non-contiguous batched @ matrix"))
    return out


matmul = defop("matmul", family="linalg", inputs=("a", "b"), forward=_matmul,
               vjps=(_matmul_vjp_a, _matmul_vjp_b), check=_check_matmul, samples=_matmul_samples,
               torch_ref=lambda torch, a, b: torch.matmul(a, b))


# -- linear ------------------------------------------------------------------------------------------------
def _check_linear(input, weight, bias=None):
    if input.ndim == 0 or weight.ndim not in (1, 2):
        raise ValueError(f"linear: arguments 'input' and 'weight' expected at least 1 dim and a 1-D/2-D weight, "
                         f"got shapes {input.shape} and {weight.shape}")
    if input.shape[-1] != weight.shape[-1]:
        raise ValueError(f"linear: argument 'weight' expected in_features {input.shape[-1]} (input's last dim, input "
                         f"{input.shape}), got shape {weight.shape}")
    if bias is not None:
        out_features = weight.shape[0] if weight.ndim == 2 else None
        if out_features is None or bias.ndim > 1 or bias.size not in (1, out_features):
            raise ValueError(f"linear: argument 'bias' expected shape ({out_features},) (or one element) for weight "
                             f"{weight.shape}, got {bias.shape}")
    _same_dtype("linear", ("input", "weight", "bias"), (input, weight, bias))


def _rows(x):
    """``x`` as a matrix of its last dim (size-0 leading dims kept: ``reshape(-1, k)`` fails on them)."""
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])


def _linear(input, weight, bias=None):
    y = _rows(input) @ weight.T
    if bias is not None:
        y += bias  # y is a fresh array: add in place, no extra copy
    return y.reshape(input.shape[:-1] + weight.shape[:-1])


def _grad_rows(g, weight):
    """The output gradient as rows matching ``_rows(input) @ weight.T``."""
    return g.reshape(math.prod(g.shape[:-1]), weight.shape[0]) if weight.ndim == 2 else g.reshape(-1)


def _linear_vjp_input(g, ans, input, weight, bias=None):
    g2 = _grad_rows(g, weight)
    grad = g2 @ weight if weight.ndim == 2 else np.multiply.outer(g2, weight)
    return grad.reshape(input.shape)


def _linear_vjp_weight(g, ans, input, weight, bias=None):
    return _grad_rows(g, weight).T @ _rows(input)


def _linear_vjp_bias(g, ans, input, weight, bias=None):
    if bias.shape == (weight.shape[0],):
        return _grad_rows(g, weight).sum(axis=0)
    return np.sum(g).reshape(bias.shape)


def _linear_samples(rng):
    def u(*shape):
        return uniform(rng, shape)
    return [Sample((u(2, 3), u(4, 3), u(4)), {}, "matrix"),
            Sample((u(5, 2, 3), u(4, 3), u(4)), {}, "batched"),
            Sample((u(3), u(4, 3), u(4)), {}, "1-D input"),
            Sample((u(2, 3), u(4, 3), None), {}, "no bias"),
            Sample((u(2, 1, 3), u(1, 3), u(1)), {}, "size-1 dims"),
            Sample((u(2, 3), u(4, 3), u(1)), {}, "one-element bias"),
            Sample((u(2, 3), u(4, 3), u()), {}, "0-D bias"),
            Sample((transposed(rng, (2, 2, 3)), transposed(rng, (4, 3)), u(4)), {}, "non-contiguous"),
            Sample((u(2, 3), u(3), None), {}, "1-D weight")]


linear = defop("linear", family="linalg", inputs=("input", "weight", "bias?"), forward=_linear,
               vjps=(_linear_vjp_input, _linear_vjp_weight, _linear_vjp_bias), check=_check_linear,
               samples=_linear_samples,
               torch_ref=lambda torch, input, weight, bias=None: torch.nn.functional.linear(input, weight, bias))


# -- einsum ------------------------------------------------------------------------------------------------
MAX_EINSUM_OPERANDS = 3
_LABELS = string.ascii_letters


@dataclass
class _Plan:
    """An einsum equation resolved for given operand shapes: '...' replaced by explicit labels."""

    terms: tuple  # explicit labels of each operand (may repeat within a term)
    output: str
    sizes: dict  # label -> size after broadcasting size-1 dims
    broadcast: bool  # some operand has a size-1 dim for a label whose size is larger
    optimize: bool  # big enough for numpy's contraction-order search (BLAS) to pay off

    @property
    def equation(self) -> str:
        return ",".join(self.terms) + "->" + self.output

    def full(self, arrays) -> list:
        """The operands with their broadcast size-1 dims expanded (views)."""
        if not self.broadcast:
            return list(arrays)
        return [np.broadcast_to(a, tuple(self.sizes[c] for c in t)) for a, t in zip(arrays, self.terms)]


def _einsum_error(equation, message):
    return ValueError(f"einsum: argument 'equation' {message} (equation {equation!r})")


def _split_ellipsis(equation, term, what):
    head, dots, tail = term.partition("...")
    if "." in head or "." in tail:
        raise _einsum_error(equation, f"expected at most one '...' and no other '.' in the {what}, got {term!r}")
    return head, bool(dots), tail


@functools.lru_cache(maxsize=1024)
def _plan(equation, shapes) -> _Plan:
    if not isinstance(equation, str):
        raise TypeError(f"einsum: argument 'equation' expected a str, got {type(equation).__name__}")
    eq = equation.replace(" ", "")
    bad = sorted(set(eq) - set(_LABELS) - set(".,->"))
    if bad:
        raise _einsum_error(equation, f"expected subscripts among a-z, A-Z, ',', '...' and '->', got {bad}")
    lhs, arrow, rhs = eq.partition("->")
    if any(c in part for c in "->" for part in (lhs, rhs)):
        raise _einsum_error(equation, "expected at most one '->'")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise _einsum_error(equation, f"expected subscripts for the {len(shapes)} operand(s) given, got {len(terms)}")
    free = [c for c in _LABELS if c not in eq]
    parsed = []
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        head, dots, tail = _split_ellipsis(equation, term, f"subscripts of operand {k}")
        n_ellipsis = len(shape) - len(head) - len(tail)
        if n_ellipsis < 0 or (not dots and n_ellipsis):
            raise _einsum_error(equation, f"expected subscripts for the {len(shape)} dims of operand {k} (shape "
                                          f"{shape}), got {term!r}")
        parsed.append((head, n_ellipsis, tail))
    n_ellipsis = max((n for _, n, _ in parsed), default=0)
    ellipsis = "".join(free[:n_ellipsis])
    explicit = tuple(head + ellipsis[n_ellipsis - n:] + tail for head, n, tail in parsed)

    sizes, broadcast = {}, False
    for k, (term, shape) in enumerate(zip(explicit, shapes)):
        own = {}
        for c, n in zip(term, shape):
            if own.setdefault(c, n) != n:
                raise _einsum_error(equation, f"expected equal sizes for subscript {c!r} repeated in operand {k}, "
                                              f"got {own[c]} and {n} (shape {shape})")
        for c, n in own.items():
            seen = sizes.get(c, n)
            if n != seen and 1 not in (n, seen):
                raise _einsum_error(equation, f"expected size {seen} (or 1) for subscript {c!r} of operand {k}, "
                                              f"got {n} (shape {shape})")
            sizes[c] = max(seen, n)
            broadcast = broadcast or n != seen
    if arrow:
        head, dots, tail = _split_ellipsis(equation, rhs, "output")
        output = head + (ellipsis if dots else "") + tail
        for c in output:
            if output.count(c) > 1 or c not in sizes:
                raise _einsum_error(equation, f"expected output subscripts that appear once in the output and in "
                                              f"an operand, got {c!r}")
    else:
        counts = Counter(c for head, _, tail in parsed for c in head + tail)
        output = ellipsis + "".join(sorted(c for c, n in counts.items() if n == 1))
    optimize = len(shapes) > 1 and math.prod(sizes.values()) >= 1 << 14
    return _Plan(explicit, output, sizes, broadcast, optimize)


def _operands(operands) -> list:
    return [a for a in operands if a is not None]


def _plan_for(equation, arrays) -> _Plan:
    return _plan(equation, tuple(a.shape for a in arrays))


def _check_einsum(operand0, operand1=None, operand2=None, *, equation):
    arrays = _operands((operand0, operand1, operand2))
    _same_dtype("einsum", ("operand0", "operand1", "operand2"), arrays)
    _plan_for(equation, arrays)


def _einsum_forward(operand0, operand1=None, operand2=None, *, equation):
    arrays = _operands((operand0, operand1, operand2))
    plan = _plan_for(equation, arrays)
    return np.asarray(np.einsum(plan.equation, *plan.full(arrays), optimize=plan.optimize))


def _einsum_operand_grad(plan: _Plan, k: int, g, arrays):
    """d(sum(g * einsum(...))) / d(operand k), itself an einsum of g with the other operands."""
    term, shape = plan.terms[k], arrays[k].shape
    labels = "".join(dict.fromkeys(term))  # distinct labels of operand k, in order
    others = [(t, a) for j, (t, a) in enumerate(zip(plan.terms, plan.full(arrays))) if j != k]
    reachable = set(plan.output).union(*[t for t, _ in others])
    kept = "".join(c for c in labels if c in reachable)
    grad = np.einsum(",".join([plan.output] + [t for t, _ in others]) + "->" + kept, g, *[a for _, a in others],
                     optimize=plan.optimize)
    grad = np.asarray(grad)
    if kept != labels:  # labels summed by operand k alone: its gradient is constant along them
        grad = np.expand_dims(grad, tuple(i for i, c in enumerate(labels) if c not in reachable))
        grad = np.broadcast_to(grad, tuple(plan.sizes[c] for c in labels))
    own_sizes = tuple(shape[term.index(c)] for c in labels)
    stretched = tuple(i for i, (c, n) in enumerate(zip(labels, own_sizes)) if n != plan.sizes[c])
    if stretched:  # size-1 dims broadcast in the forward: sum back
        grad = grad.sum(axis=stretched, keepdims=True)
    if len(labels) == len(term):
        return grad
    # repeated labels ('ii'): the gradient lives on the diagonal, every other entry is zero
    out = np.zeros(shape, dtype=g.dtype)
    strides = tuple(sum(out.strides[p] for p, c2 in enumerate(term) if c2 == c) for c in labels)
    as_strided(out, shape=own_sizes, strides=strides)[...] = grad
    return out


def _einsum_rule(k):
    def rule(g, ans, *operands, equation):
        arrays = _operands(operands)
        return _einsum_operand_grad(_plan_for(equation, arrays), k, g, arrays)
    return rule


def _einsum_samples(rng):
    def u(*shape):
        return uniform(rng, shape)
    cases = [
        ("ii->i", [u(3, 3)], "diagonal"), ("ii", [u(3, 3)], "trace, implicit output"),
        ("ij->ji", [transposed(rng, (2, 3))], "transpose, non-contiguous"), ("i->", [u(4)], "sum"),
        ("iji->j", [u(3, 2, 3)], "repeated label around another"), ("...ij->...ji", [u(2, 3, 4)], "'...'"),
        ("bA", [u(2, 3)], "implicit output, upper case sorts first"),
        ("ij,jk->ik", [u(2, 3), u(3, 4)], "matmul"), ("bij,bjk->bik", [u(2, 2, 3), u(2, 3, 2)], "batched"),
        ("...ij,...jk->...ik", [u(2, 1, 2, 3), u(4, 3, 2)], "'...' broadcast"),
        ("ij,ij->ij", [u(1, 3), u(2, 3)], "size-1 label broadcast"),
        ("i,j->ij", [u(3), u(4)], "outer"), ("ii,i->i", [u(3, 3), u(3)], "diagonal times vector"),
        ("ij,k->ik", [u(2, 3), u(4)], "labels summed alone"), ("ij,ij", [u(2, 3), u(2, 3)], "implicit dot"),
        ("ij,jk", [transposed(rng, (2, 3)), transposed(rng, (3, 4))], "non-contiguous, implicit"),
        ("...i,...i->...", [u(3, 4), u(4)], "'...' of different ranks"),
        ("ij,jk,kl->il", [u(2, 3), u(3, 2), u(2, 4)], "chain of 3"), ("i,i,i->", [u(4), u(4), u(4)], "3 vectors"),
        ("bi,bj,b->bij", [u(2, 3), u(2, 2), u(2)], "3 operands, batch kept"),
        ("ii,ij,jj->", [u(2, 2), u(2, 2), u(2, 2)], "3 operands, repeated labels"),
    ]
    return [Sample(tuple(arrays), {"equation": eq}, f"{eq!r} {label}") for eq, arrays, label in cases]


_einsum_op = defop("einsum", family="linalg", inputs=("operand0", "operand1?", "operand2?"), forward=_einsum_forward,
                   vjps=tuple(_einsum_rule(k) for k in range(MAX_EINSUM_OPERANDS)), check=_check_einsum,
                   samples=_einsum_samples,
                   torch_ref=lambda torch, *operands, equation: torch.einsum(equation, *_operands(operands)))


def einsum(equation, *operands):
    """``torch.einsum(equation, *operands)`` (operands may also come as one list), differentiable."""
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum: argument 'operands' expected at least one tensor, got none")
    if len(operands) <= MAX_EINSUM_OPERANDS:
        return _einsum_op(*operands, equation=equation)
    plan = _plan(equation, tuple(np.shape(o) for o in operands))
    n = MAX_EINSUM_OPERANDS
    head, rest = plan.terms[:n], plan.terms[n:]
    needed = set(plan.output).union(*rest)
    middle = "".join(dict.fromkeys(c for t in head for c in t if c in needed))
    partial = _einsum_op(*operands[:n], equation=",".join(head) + "->" + middle)
    return einsum(",".join((middle,) + rest) + "->" + plan.output, partial, *operands[n:])
