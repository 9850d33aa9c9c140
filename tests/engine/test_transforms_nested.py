"""Nested function transforms (issue #19 items 1 and 6): every level keeps its own perturbation, as torch.func.

Each transform -- ``grad``, ``value_and_grad``, ``vjp``, ``jacobian``, ``hessian``, ``hvp``, ``gradients`` -- is
checked in float64 against torch.func (``grad``, ``grad_and_value``, ``vjp``, ``jacrev``, ``hessian``) and
``torch.autograd.grad(create_graph=True)``: with closures over tensors that require grad, with arguments that
already require grad (perturbation confusion), three levels deep, mixed with ``backward()`` and with
``GradientTape``. The functions are written once over the API both engines share and run by each ``Engine``.
A seeded random-composition test draws a few hundred small nested programs and compares their values and
gradients with torch.func. The exact cases of the issue are pinned to their mathematical values.

Item 6: ``tape.gradients`` with several non-scalar outputs, and a guard that the engine's own code never compares
Tensors with ``==`` (a membership test on a list of Tensors does): Tensor's comparison operators raise while the
transforms, tapes, optimizers, modules and checkpoints run.
"""

import gc
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import ops
import tape
from tape import nn

# float64 throughout: the engines differ by rounding only. atol covers entries that are exactly zero in exact
# arithmetic (a cancellation leaves ~1e-17 in either engine).
RTOL, ATOL = 1e-10, 1e-12


@dataclass(frozen=True)
class Engine:
    """One engine through the API minitape's transforms share with torch.func."""

    tensor: Callable  # (array, requires_grad=False) -> a leaf holding a copy
    numpy: Callable  # tensor -> numpy copy
    grad: Callable  # grad(f, argnums=0)
    value_and_grad: Callable  # value_and_grad(f, argnums=0)(*args) -> (value, grads)
    vjp: Callable  # vjp(f, *primals) -> (out, vjp_fn)
    jacobian: Callable  # jacobian(f, argnums=0)  (torch.func.jacrev)
    hessian: Callable  # hessian(f, argnums=0)
    hvp: Callable  # hvp(f, primals, tangents) -> tuple of H v
    gradients: Callable  # torch.autograd.grad(outputs, inputs, grad_outputs=None, create_graph=False)

    def leaf(self, a):
        return self.tensor(np.array(a, dtype=np.float64), requires_grad=True)

    def const(self, a):
        return self.tensor(np.array(a, dtype=np.float64))


OURS = Engine(
    tensor=lambda a, requires_grad=False: tape.tensor(np.array(a), requires_grad=requires_grad),
    numpy=lambda t: np.array(t.numpy()),
    grad=tape.grad,
    value_and_grad=tape.value_and_grad,
    vjp=tape.vjp,
    jacobian=tape.jacobian,
    hessian=tape.hessian,
    hvp=lambda f, primals, tangents: tape.hvp(f, primals, tangents)[1],
    gradients=lambda outs, ins, grad_outputs=None, create_graph=False: tape.gradients(
        outs, ins, grad_outputs, create_graph=create_graph
    ),
)


@pytest.fixture
def theirs(torch) -> Engine:
    func = torch.func

    def value_and_grad(f, argnums=0):
        return lambda *args: tuple(reversed(func.grad_and_value(f, argnums)(*args)))

    def hvp(f, primals, tangents):  # H symmetric: H v = (v^T H)^T, reverse over reverse like ours
        return func.vjp(func.grad(f, argnums=tuple(range(len(primals)))), *primals)[1](tuple(tangents))

    return Engine(
        tensor=lambda a, requires_grad=False: torch.tensor(np.array(a), requires_grad=requires_grad),
        numpy=lambda t: np.array(t.detach().numpy()),
        grad=func.grad,
        value_and_grad=value_and_grad,
        vjp=func.vjp,
        jacobian=func.jacrev,
        hessian=func.hessian,
        hvp=hvp,
        gradients=lambda outs, ins, grad_outputs=None, create_graph=False: torch.autograd.grad(
            outs, ins, grad_outputs, create_graph=create_graph
        ),
    )


def close(ours, expected, what: str) -> None:
    """Arrays, or nested tuples / lists of them, equal within the float64 tolerance."""
    if isinstance(expected, tuple | list):
        assert isinstance(ours, tuple | list) and len(ours) == len(expected), f"{what}: structure differs"
        for k, (o, e) in enumerate(zip(ours, expected)):
            close(o, e, f"{what}[{k}]")
        return
    ours, expected = np.asarray(ours), np.asarray(expected)
    assert ours.shape == expected.shape, f"{what}: shape {ours.shape}, expected {expected.shape}"
    np.testing.assert_allclose(ours, expected, rtol=RTOL, atol=ATOL, err_msg=what)


def as_numpy(E: Engine, tree):
    if isinstance(tree, tuple | list):
        return type(tree)(as_numpy(E, t) for t in tree)
    return E.numpy(tree)


def run_both(case: Callable, theirs: Engine, what: str):
    """``case(engine)`` returns a structure of tensors; both engines' must agree. Returns ours (numpy)."""
    ours_result = as_numpy(OURS, case(OURS))
    close(ours_result, as_numpy(theirs, case(theirs)), what)
    return ours_result


X = np.array([0.3, -0.7, 1.1])
W = np.array([0.5, 1.3, -0.4])
V = np.array([0.9, -0.2, 0.6])


# -- the cases, pinned to their mathematical values ----------------------------------------------------
def test_a_closure_over_the_outer_variable_is_differentiated():
    """d/dx (x * d/dy (x y)) = d/dx x^2 = 2x; it came back as x (the inner gradient was a constant)."""
    g = tape.grad(lambda x: x * tape.grad(lambda y: x * y)(np.float64(0.7)))(np.float64(1.5))
    assert float(g) == 3.0


def test_an_argument_that_requires_grad_gets_its_own_perturbation():
    """d/dx [d/dy (x y) at y = x] = d/dx x = 1; differentiating in place gave d/dx 2x = 2."""
    g = tape.grad(lambda x: tape.grad(lambda y: x * y)(x))(np.float64(1.5))
    assert float(g) == 1.0


def test_perturbation_confusion_three_levels():
    """f(x) = d/dy [y * d/dz (x y z)] at y = x, z = x: the inner level gives x y, so f = d/dy (x y^2) = 2 x y
    = 2 x^2 at y = x; d/dx f = 4 x."""
    inner = lambda x, y: tape.grad(lambda z: x * y * z)(x)  # noqa: E731
    f = lambda x: tape.grad(lambda y: y * inner(x, y))(x)  # noqa: E731
    x = np.float64(1.5)
    assert float(f(x)) == 2 * 1.5**2
    assert float(tape.grad(f)(x)) == 4 * 1.5


def test_a_gradient_penalty_written_with_grad_reaches_the_critics_weights(theirs):
    """WGAN-GP: the penalty (|d critic / d x| - 1)^2 with tape.grad contributes to the critic's gradient."""

    def case(E):
        w = E.leaf(W)
        critic = lambda x: ((x * w).tanh() * w).sum()  # noqa: E731
        g = E.grad(critic)(E.const(X))
        penalty = ((g * g).sum() - 1.0) ** 2
        (dw,) = E.gradients(penalty, [w])
        return dw

    dw = run_both(case, theirs, "d penalty / d w")
    assert np.abs(dw).max() > 0.1  # the penalty's gradient is far from the zero it was


def test_value_and_grad_then_backward_differentiates_value_and_gradient(theirs):
    """(v + g).backward() raised GraphFreedError: the value's graph was freed by the gradient's pass."""

    def case(E, a_requires_grad):
        a, w = (E.leaf(X) if a_requires_grad else E.const(X)), E.leaf(W)
        v, g = E.value_and_grad(lambda x: (x * x * w).sin().sum())(a)
        return v, g, E.gradients((v + g).sum(), [w, a] if a_requires_grad else [w])

    for a_requires_grad in (False, True):
        run_both(lambda E, r=a_requires_grad: case(E, r), theirs, f"value_and_grad, a requires grad: {a_requires_grad}")
    w = tape.tensor(W, requires_grad=True)
    v, g = tape.value_and_grad(lambda x: (x * x * w).sin().sum())(X)
    (v + g).sum().backward()  # raised GraphFreedError; v broadcasts over g's 3 entries
    U = X * X * W
    np.testing.assert_allclose(
        w.grad.numpy(), 3 * np.cos(U) * X * X + 2 * X * np.cos(U) - 2 * X**3 * W * np.sin(U), rtol=1e-13
    )


def test_at_the_outermost_level_results_are_constants_and_no_graph_is_kept():
    kept = []

    def f(x):
        y = (x * x).sin()
        kept.append(weakref.ref(y.grad_fn))
        return y.sum()

    v, g = tape.value_and_grad(f)(X)
    (_, values_indices), _ = tape.value_and_grad(lambda x: (f(x), ops.max(x * x, 0)), has_aux=True)(X)
    assert values_indices.values.grad_fn is None and type(values_indices).__name__ == "ValuesIndices"
    (vv, aux), gg = tape.value_and_grad(lambda x: (f(x), f(x) * 2), has_aux=True)(X)
    for t in (v, g, vv, aux, gg):
        assert t.grad_fn is None and not t.requires_grad
    for fn in (lambda x: tape.jacobian(lambda y: (y * y).sin())(x), lambda x: tape.hessian(f)(x)):
        assert fn(X).grad_fn is None
    value, (hv,) = tape.hvp(f, (X,), (V,))
    assert value.grad_fn is None and hv.grad_fn is None
    out, fn = tape.vjp(lambda x: (x * x).sin(), X)
    assert out.grad_fn is None and fn(np.ones(3))[0].grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        (v + g).sum().backward()  # a constant, as torch.func's result
    del v, g, vv, aux, gg, value, hv, out, fn
    gc.collect()
    assert kept and all(ref() is None for ref in kept), "an outermost transform kept its graph alive"


def test_under_no_grad_a_transform_closing_over_weights_returns_a_constant():
    w = tape.tensor(W, requires_grad=True)
    with tape.no_grad():
        g = tape.grad(lambda x: (x * w).sin().sum())(X)
    assert g.grad_fn is None
    np.testing.assert_allclose(g.numpy(), np.cos(X * W) * W, rtol=1e-14)


def test_hvp_is_differentiable_in_its_tangents_and_closures(theirs):
    def case(E):
        v, w = E.leaf(V), E.leaf(W)
        (hv,) = E.hvp(lambda x: ((x * w).sin() * x).sum(), (E.const(X),), (v,))
        return hv, E.gradients((hv * hv).sum(), [v, w])

    hv, (dv, dw) = run_both(case, theirs, "hvp and its gradient in v and w")
    assert np.abs(dv).max() > 0.1  # came back 0


def test_hessian_with_several_argnums_gives_torch_funcs_blocks(theirs):
    def case(E):
        w = E.leaf(W)
        H = E.hessian(lambda x, y: ((x * y).sin() * w).sum() + (x * x * y).sum(), argnums=(0, 1))(
            E.const(X), E.const(V)
        )
        (dw,) = E.gradients(sum(block.sum() for row in H for block in row), [w])
        return H, dw

    run_both(case, theirs, "hessian argnums=(0, 1)")


# -- every transform: closures over weights, arguments that already require grad, second order -------------------
def body(x, w):
    """A vector function of an argument and a closed-over weight, shared by the per-transform cases."""
    return (x * w).sin() * x + (x * x).tanh() * w


TRANSFORM_CASES = {
    "grad": lambda E, x, w: E.grad(lambda y: (body(y, w) ** 2).sum())(x),
    "value_and_grad": lambda E, x, w: (lambda vg: vg[0] * vg[1])(E.value_and_grad(lambda y: body(y, w).sum())(x)),
    "grad argnums": lambda E, x, w: (lambda g: g[0] * g[1])(
        E.grad(lambda y, z: (body(y, z) * body(z, w)).sum(), argnums=(0, 1))(x, x * w)
    ),
    "vjp": lambda E, x, w: (lambda ov: ov[0] + ov[1](w * x)[0])(E.vjp(lambda y: body(y, w), x)),
    "jacobian": lambda E, x, w: (lambda j: j[0].sum(0) + j[1].sum(1))(
        E.jacobian(lambda y: (body(y, w), body(w, y)))(x)
    ),
    "hessian": lambda E, x, w: E.hessian(lambda y: (body(y, w) * y).sum())(x).sum(0),
    "hvp": lambda E, x, w: E.hvp(lambda y: (body(y, w) ** 2).sum(), (x,), (w * x,))[0],
    "gradients": lambda E, x, w: E.gradients(body(x, w), [x], [w], create_graph=True)[0],
}


@pytest.mark.parametrize(
    "name, argument_requires_grad",
    [(name, r) for name in TRANSFORM_CASES for r in (False, True) if r or name != "gradients"],
)  # (torch.autograd.grad differentiates only tensors that require grad)
def test_each_transform_closing_over_a_weight_to_second_order(theirs, name, argument_requires_grad):
    """The transform's result, its gradient in the weight (and in the argument), and a gradient of that: three
    orders through one transform with a closure, against torch.func."""
    transform = TRANSFORM_CASES[name]

    def case(E):
        x, w = (E.leaf(X) if argument_requires_grad else E.const(X)), E.leaf(W)
        wrt = [w, x] if argument_requires_grad else [w]
        out = transform(E, x, w)
        first = E.gradients((out * E.const(V)).sum(), wrt, create_graph=True)
        second = E.gradients(sum((g * g).sum() for g in first), wrt)
        return out, first, second

    out, first, second = run_both(case, theirs, name)
    assert all(np.abs(g).max() > 1e-3 for g in (*first, *second))  # every order is really there


def test_maml_inner_steps_with_grad_at_weights_that_require_grad(theirs):
    """Two inner SGD steps by grad at the weights themselves (an argument that requires grad), then the outer
    loss's backward to the initial weights: second-order MAML."""

    def case(E):
        w = E.leaf(W)
        loss = lambda p, x: ((x * p).tanh() - x * 0.5).pow(2).sum()  # noqa: E731
        p = w
        for x in (E.const(X), E.const(V)):
            p = p - 0.3 * E.grad(lambda q, x=x: loss(q, x))(p)
        (dw,) = E.gradients(loss(p, E.const(X * V)), [w])
        return p, dw

    run_both(case, theirs, "MAML")


def test_transforms_with_gradient_tapes_inside_and_outside(theirs):
    x = tape.tensor(X)
    with tape.GradientTape() as outer:  # a watched tensor as the argument of a transform
        outer.watch(x)
        g = tape.grad(lambda y: (body(y, y * 2.0) ** 2).sum())(x)
        loss = (g * tape.tensor(V)).sum()
    dx = outer.compute_gradients(loss, x)
    torch = theirs.tensor(X, requires_grad=True)
    func_g = theirs.grad(lambda y: (body(y, y * 2.0) ** 2).sum())(torch)
    (expected,) = theirs.gradients((func_g * theirs.const(V)).sum(), [torch])
    close(dx.numpy(), theirs.numpy(expected), "GradientTape around grad")

    def second_derivative_by_tape(y):  # a GradientTape inside a transform: d/dy sum(d/dy y^3) = 6 y; it raised
        # GraphFreedError (a non-persistent tape freed its nodes after compute_gradients(create_graph=True))
        with tape.GradientTape() as inner:
            inner.watch(y)
            z = (y * y * y).sum()
        gz = inner.compute_gradients(z, y, create_graph=True)
        return gz.sum()

    np.testing.assert_allclose(tape.grad(second_derivative_by_tape)(X).numpy(), 6 * X, rtol=1e-14)


def test_bad_calls_name_the_transform_and_what_was_expected():
    f = lambda x, y: (x * y).sum()  # noqa: E731
    with pytest.raises(ValueError, match=r"grad: argnums \(0, 0\) names an argument twice"):
        tape.grad(f, argnums=(0, 0))(X, X)
    with pytest.raises(ValueError, match=r"jacobian: argnums 2 does not name arguments of a call with 2 arguments"):
        tape.jacobian(f, argnums=2)(X, X)
    with pytest.raises(
        TypeError, match=r"grad: fn must return a single-element floating Tensor, got Tensor of shape \(3,\)"
    ):
        tape.grad(lambda x: x * 2.0)(X)
    with pytest.raises(TypeError, match=r"grad: with has_aux=True fn must return \(value, aux\), got Tensor"):
        tape.grad(lambda x: x.sum(), has_aux=True)(X)
    with pytest.raises(TypeError, match=r"jacobian: fn must return a floating Tensor or a tuple of them, got float"):
        tape.jacobian(lambda x: 2.0)(X)
    with pytest.raises(
        ValueError, match=r"hvp: tangents\[0\] has shape \(2,\) dtype float64, but primals\[0\] has shape \(3,\)"
    ):
        tape.hvp(lambda x: x.sum(), (X,), (np.ones(2),))
    with pytest.raises(TypeError, match=r"vjp: argument 0 must be floating to differentiate at, got int64"):
        tape.vjp(lambda x: x, np.arange(3))


# -- item 6: several outputs; no == on Tensors inside the engine -------------------------------------------------
def test_gradients_of_several_non_scalar_outputs(theirs):
    def case(E):
        a, b = E.leaf(X), E.leaf(W)
        outs = [a * b, (a + b).sin()]
        return E.gradients(outs, [a, b], [E.const(V), E.const(W)])

    run_both(case, theirs, "gradients of two non-scalar outputs")


@pytest.fixture
def tensors_refuse_comparison(monkeypatch):
    """Tensor's comparison operators raise when the engine itself (tape/) calls them: an ``in`` on a list of
    Tensors, ``.index``, ``==`` used for identity. User code and ops may still compare tensors."""
    import sys

    def refuse(name):
        original = getattr(tape.Tensor, name)

        def method(self, other):
            caller = sys._getframe(1).f_code.co_filename.replace("\\", "/")
            if "/tape/" in caller and "/tests/" not in caller:
                raise AssertionError(f"Tensor.{name} called by {caller}:{sys._getframe(1).f_lineno}")
            return original(self, other)

        return method

    for name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
        monkeypatch.setattr(tape.Tensor, name, refuse(name))


def test_the_engine_never_compares_tensors_with_eq(tensors_refuse_comparison, tmp_path):
    """The reverse pass, the transforms, both tapes, modules with shared parameters, optimizers, clipping and
    checkpoints, each given the same tensor twice where it may appear twice, never call Tensor.__eq__."""
    a, b = tape.tensor(X, requires_grad=True), tape.tensor(W, requires_grad=True)
    outs = [a * b, a + b, a * 1.0]
    tape.gradients(outs, [a, b, a], [np.ones(3)] * 3, create_graph=True, allow_unused=True)
    tape.backward(outs, [np.ones(3)] * 3, retain_graph=True)
    with tape.GradientTape(persistent=True) as gt:
        gt.watch([a, b, a])
        y = [(a * b).sin(), b * 2.0]
    gt.compute_gradients(y, [b, a, b], [np.ones(3), np.ones(3)])
    with tape.ExecutionTape() as rec:
        z = [(a * b).exp(), a - b]
    rec.prune(z).replay()
    tape.hessian(lambda x, y: (x * y * y).sum(), argnums=(0, 1))(a, b)
    tape.jacobian(lambda x: (x * a, x * b))(b)
    out, fn = tape.vjp(lambda x, y: x * y, a, a)
    fn(out)
    tape.hvp(lambda x, y: (x * y * b).sum(), (a, a), (b, b))
    shared = nn.Linear(2, 2)
    for model, opt_type in (
        (nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1)), tape.optim.Adam),
        (nn.Sequential(shared, shared), tape.optim.SGD),
    ):
        params = list(model.parameters())
        opt = opt_type(params, lr=0.1)
        model(tape.tensor(np.ones((4, params[0].shape[1]), np.float32))).sum().backward()
        tape.optim.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad()
        model.load_state_dict(model.state_dict())
        opt.load_state_dict(opt.state_dict())
        path = tape.checkpoint.save(model, tmp_path / "c.npz", optimizer=opt)
        tape.checkpoint.load(path, model, optimizer=opt)


# -- random nested compositions against torch.func ----------------------------------------------------------------
# A program is a tree over the variables in scope (vectors of shape (2,)): elementwise ops, and transforms whose
# body sees the enclosing scope plus the transform's own fresh variable(s) -- so a body closes over outer levels'
# variables, and a transform's argument is often an expression of them (it already requires grad). Evaluated by
# either engine; the top level differentiates the program with backward().
UNARY = {"sin": lambda a: a.sin(), "tanh": lambda a: a.tanh(), "sq": lambda a: a * a, "exp": lambda a: (0.5 * a).exp()}
BINARY = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - 0.5 * b}
TRANSFORMS = ("grad", "grad2", "vg", "vjp", "jac", "hess", "hvp")


def random_program(rng, n_vars: int, depth: int, size: int = 5, nest: bool = True):
    """A random expression tree over ``n_vars`` variables with at most ``depth`` nested transforms (exactly
    ``depth`` when ``nest``: the tree starts with a transform whose body nests further)."""
    roll = rng.random()
    if depth > 0 and (nest or roll < 0.4):
        kind = TRANSFORMS[int(rng.integers(len(TRANSFORMS)))]
        arity = 2 if kind == "grad2" else 1
        body = random_program(rng, n_vars + arity, depth - 1, size - 1, nest=depth > 1)
        if rng.random() < 0.5:  # the transform's result inside more arithmetic
            body = ("bin", str(rng.choice(list(BINARY))), body, random_program(rng, n_vars + arity, 0, 2, False))
        args = [random_program(rng, n_vars, 0, 2, False) for _ in range(arity)]
        extra = random_program(rng, n_vars, 0, 1, False)  # the cotangent / tangent; argnums for grad2
        if kind == "grad2":
            extra = (0, 1, (0, 1))[int(rng.integers(3))]
        return (kind, body, args, extra)
    if size <= 0 or roll < 0.25:
        return ("var", int(rng.integers(n_vars)))
    if roll < 0.65:
        return ("un", str(rng.choice(list(UNARY))), random_program(rng, n_vars, depth, size - 1, False))
    return (
        "bin",
        str(rng.choice(list(BINARY))),
        random_program(rng, n_vars, depth, size - 1, False),
        random_program(rng, n_vars, depth, size - 2, False),
    )


def evaluate(E: Engine, tree, env: list):
    kind = tree[0]
    if kind == "var":
        return env[tree[1]]
    if kind == "un":
        return UNARY[tree[1]](evaluate(E, tree[2], env))
    if kind == "bin":
        return BINARY[tree[1]](evaluate(E, tree[2], env), evaluate(E, tree[3], env))
    _, body, arg_trees, extra = tree
    args = [evaluate(E, a, env) for a in arg_trees]
    vector = lambda *fresh: evaluate(E, body, env + list(fresh))  # noqa: E731

    def scalar(*fresh):
        v = vector(*fresh)
        return (v * v).sum()

    if kind == "grad":
        return E.grad(scalar)(*args)
    if kind == "grad2":
        g = E.grad(scalar, argnums=extra)(*args)
        return g[0] - g[1] if isinstance(g, tuple) else g
    if kind == "vg":
        value, g = E.value_and_grad(scalar)(*args)
        return value * g
    if kind == "vjp":
        out, fn = E.vjp(vector, *args)
        return out + fn(evaluate(E, extra, env))[0]
    if kind == "jac":
        return E.jacobian(vector)(*args).sum(0)
    if kind == "hess":
        return E.hessian(scalar)(*args).sum(1)
    return E.hvp(scalar, tuple(args), (evaluate(E, extra, env),))[0]


def run_program(E: Engine, tree, inputs, cotangent):
    """The program's value at leaves ``inputs`` and the gradient of <value, cotangent> by backward() (a zero term
    in every leaf keeps each of them used, so both engines return a gradient for each)."""
    leaves = [E.leaf(x) for x in inputs]
    out = evaluate(E, tree, leaves)
    loss = (out * E.const(cotangent)).sum() + sum((0.0 * leaf).sum() for leaf in leaves)
    loss.backward()
    return E.numpy(out), [E.numpy(leaf.grad) for leaf in leaves]


def nesting(tree) -> int:
    """How many transforms deep the program goes."""
    if tree[0] == "var":
        return 0
    if tree[0] in TRANSFORMS:
        return 1 + nesting(tree[1])
    return max(nesting(t) for t in tree[2:])


def test_random_nested_compositions_agree_with_torch_func(theirs):
    rng = np.random.default_rng(19)
    depths = []
    for case in range(300):
        tree = random_program(rng, n_vars=2, depth=int(rng.integers(1, 4)))
        inputs = [rng.uniform(-1, 1, 2) for _ in range(2)]
        cotangent = rng.uniform(0.5, 1.5, 2)
        value, grads = run_program(OURS, tree, inputs, cotangent)
        expected_value, expected_grads = run_program(theirs, tree, inputs, cotangent)
        close(value, expected_value, f"case {case}: {tree} value")
        close(grads, expected_grads, f"case {case}: {tree} gradients")
        depths.append(nesting(tree))
    assert min(depths.count(d) for d in (1, 2, 3)) >= 80, np.bincount(depths)  # the draw nests, as meant
