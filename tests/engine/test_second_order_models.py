"""Whole-model second-order checks against PyTorch autograd, in float64 (issue #14).

The per-op second order is verified by the generated tests; these check that it composes through whole models:

- the Hessian-vector product of a small MLP (tanh and GELU layers; MSE and cross-entropy) by four routes --
  ``tape.gradients`` twice, ``backward(create_graph=True)``, ``tape.hvp`` and nested ``GradientTape``s -- and
  by central differences of the gradient;
- the output, every gradient and an HVP of ``tape.nn.TransformerBlock`` (causal; LayerNorm, and RMSNorm with
  grouped-query attention) against a hand-written ``torch.nn.functional`` mirror of its forward;
- WGAN-GP critic steps: a gradient penalty differentiated with respect to the critic's parameters, then Adam;
- second-order MAML with two inner SGD steps, and its first-order variant.

The MLP, the critic, the MAML learner and the losses are written once, over the API both engines share
(``F.linear``, ``F.gelu``, ``F.mse_loss``, ``Tensor.tanh``, ``grad(outputs, inputs, create_graph=...)``, ...), and
run by each ``Engine``; every model starts from the same float64 numpy arrays. Each test also asserts that the
second-order quantity it compares is far from zero (or from its first-order counterpart), so that an engine that
silently dropped the second-order path would fail.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import ops
import tape
from tape import nn

# float64 end to end: the engines differ only by rounding (summation order, BLAS blocking). Measured over every
# comparison below: at most 2e-15 absolute and 5e-13 relative (on elements above 1e-12; the key bias's gradient is
# exactly zero in exact arithmetic -- softmax ignores a score shift shared by all keys -- and is 1e-17 noise in both).
RTOL, ATOL = 1e-10, 1e-12


@dataclass(frozen=True)
class Engine:
    """One autodiff engine seen through the torch-style API minitape shares with PyTorch."""

    F: Any  # linear, gelu, mse_loss, cross_entropy, layer_norm, rms_norm, scaled_dot_product_attention
    grad: Callable  # torch.autograd.grad(outputs, inputs, grad_outputs=None, *, create_graph=False)
    tensor: Callable  # (array, requires_grad=False) -> tensor holding a copy of the array
    vector_norm: Callable  # torch.linalg.vector_norm(x, ord=2, dim=None, keepdim=False)
    optim: Any  # SGD, Adam
    numpy: Callable  # tensor -> a numpy copy

    def leaves(self, arrays) -> list:
        return [self.tensor(a, requires_grad=True) for a in arrays]

    def constants(self, arrays) -> list:
        return [self.tensor(a) for a in arrays]


OURS = Engine(
    F=ops,
    grad=tape.gradients,
    tensor=lambda a, requires_grad=False: tape.tensor(np.array(a), requires_grad=requires_grad),
    vector_norm=ops.vector_norm,
    optim=tape.optim,
    numpy=lambda t: np.array(t.numpy()),
)


@pytest.fixture
def theirs(torch) -> Engine:
    return Engine(
        F=torch.nn.functional,
        grad=torch.autograd.grad,
        tensor=lambda a, requires_grad=False: torch.tensor(np.array(a), requires_grad=requires_grad),
        vector_norm=torch.linalg.vector_norm,
        optim=torch.optim,
        numpy=lambda t: np.array(t.detach().numpy()),
    )


def assert_all_close(ours, expected, what: str, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Arrays (or lists of arrays) equal within the float64 tolerance, each mismatch named."""
    ours, expected = list(ours), list(expected)
    assert len(ours) == len(expected), what
    for k, (a, b) in enumerate(zip(ours, expected)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"{what}[{k}]")


def norm_of(arrays) -> float:
    return float(np.sqrt(sum(np.sum(np.square(a)) for a in arrays)))


# -- the models, written once for both engines ----------------------------------------------------------------
def mlp_arrays(rng, sizes) -> list[np.ndarray]:
    """[w1, b1, w2, b2, ...] for Linear layers sizes[0] -> sizes[1] -> ..., N(0, 1/fan_in) weights."""
    arrays = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        arrays += [rng.normal(size=(fan_out, fan_in)) / np.sqrt(fan_in), rng.normal(size=fan_out) * 0.3]
    return arrays


def mlp(F, params, x):
    """linear -> tanh -> linear -> gelu -> linear: both activations have non-zero second derivatives."""
    w1, b1, w2, b2, w3, b3 = params
    h = F.linear(x, w1, b1).tanh()
    h = F.gelu(F.linear(h, w2, b2))
    return F.linear(h, w3, b3)


def dot(tensors, direction):
    """sum_k <tensors[k], direction[k]>: its gradient is the Hessian-vector product when tensors are gradients."""
    return sum((t * v).sum() for t, v in zip(tensors, direction))


def grad_and_hvp(engine: Engine, loss, leaves, direction):
    """(d loss/d leaves, H @ direction) by reverse over reverse: the gradient computed with create_graph, then
    the gradient of its dot product with the direction."""
    grads = engine.grad(loss, leaves, create_graph=True)
    hvp = engine.grad(dot(grads, engine.constants(direction)), leaves)
    return [engine.numpy(g) for g in grads], [engine.numpy(h) for h in hvp]


# -- 1. a small MLP: loss, gradient and Hessian-vector product -----------------------------------------------------
MLP_SIZES = (5, 8, 8, 3)


def mlp_problem(loss_name: str, seed: int = 0):
    """(parameter arrays, loss(engine, params)) for a batch of 6 inputs, and a random direction."""
    rng = np.random.default_rng(seed)
    arrays = mlp_arrays(rng, MLP_SIZES)
    x = rng.normal(size=(6, MLP_SIZES[0]))
    targets = rng.normal(size=(6, MLP_SIZES[-1])) if loss_name == "mse" else rng.integers(0, MLP_SIZES[-1], 6)
    direction = [rng.normal(size=a.shape) for a in arrays]

    def loss(engine: Engine, params):
        out = mlp(engine.F, params, engine.tensor(x))
        criterion = engine.F.mse_loss if loss_name == "mse" else engine.F.cross_entropy
        return criterion(out, engine.tensor(targets))

    return arrays, loss, direction


def hvp_by_gradients(loss, arrays, direction):
    params = OURS.leaves(arrays)
    value = loss(OURS, params)
    grads, hvp = grad_and_hvp(OURS, value, params, direction)
    return value.item(), grads, hvp


def hvp_by_backward(loss, arrays, direction):
    """backward(create_graph=True) leaves differentiable gradients in .grad; differentiate their dot product."""
    params = OURS.leaves(arrays)
    value = loss(OURS, params)
    value.backward(create_graph=True)
    grads = [p.grad for p in params]
    hvp = tape.gradients(dot(grads, OURS.constants(direction)), params)
    return value.item(), [g.numpy() for g in grads], [h.numpy() for h in hvp]


def hvp_by_functional(loss, arrays, direction):
    """tape.value_and_grad for the loss and gradient, tape.hvp for the product."""
    value, grads = tape.value_and_grad(lambda *p: loss(OURS, p), argnums=tuple(range(len(arrays))))(*arrays)
    _, hvp = tape.hvp(lambda *p: loss(OURS, p), arrays, direction)
    return value.item(), [g.numpy() for g in grads], [h.numpy() for h in hvp]


def hvp_by_gradient_tapes(loss, arrays, direction):
    """TF style: constant tensors watched by two nested GradientTapes; the inner one's gradient, computed with
    create_graph, is recorded by the outer one, which differentiates its dot product with the direction."""
    params = OURS.constants(arrays)
    with tape.GradientTape() as outer:
        outer.watch(params)
        with tape.GradientTape() as inner:
            inner.watch(params)
            value = loss(OURS, params)
        grads = inner.compute_gradients(value, params, create_graph=True)
        along = dot(grads, OURS.constants(direction))
    hvp = outer.compute_gradients(along, params)
    return value.item(), [g.numpy() for g in grads], [h.numpy() for h in hvp]


@pytest.mark.parametrize("loss_name", ["mse", "cross_entropy"])
@pytest.mark.parametrize(
    "route", [hvp_by_gradients, hvp_by_backward, hvp_by_functional, hvp_by_gradient_tapes], ids=lambda f: f.__name__
)
def test_mlp_loss_gradient_and_hvp_match_torch(theirs, route, loss_name):
    arrays, loss, direction = mlp_problem(loss_name)
    params = theirs.leaves(arrays)
    expected_value = loss(theirs, params)
    expected_grads, expected_hvp = grad_and_hvp(theirs, expected_value, params, direction)
    assert norm_of(expected_hvp) > 0.05 * norm_of(direction)  # the curvature is far from zero

    value, grads, hvp = route(loss, arrays, direction)
    np.testing.assert_allclose(value, expected_value.item(), rtol=RTOL, atol=ATOL)
    assert_all_close(grads, expected_grads, "gradient")
    assert_all_close(hvp, expected_hvp, "hvp")


def test_mlp_hvp_matches_central_differences_of_the_gradient():
    """An oracle independent of torch: (grad(theta + h v) - grad(theta - h v)) / 2h = H v + O(h^2)."""
    arrays, loss, direction = mlp_problem("cross_entropy", seed=1)
    _, _, hvp = hvp_by_gradients(loss, arrays, direction)
    h = 1e-5

    def grad_at(step):
        params = OURS.leaves([a + step * v for a, v in zip(arrays, direction)])
        return [g.numpy() for g in tape.gradients(loss(OURS, params), params)]

    differences = [(up - down) / (2 * h) for up, down in zip(grad_at(h), grad_at(-h))]
    # truncation h^2 |third derivative| plus rounding ~1e-16 / h: measured at most 1.3e-9 absolute, 9e-8 relative
    assert_all_close(hvp, differences, "hvp vs central differences", rtol=1e-6, atol=1e-8)


# -- 2. the flagship's transformer block ----------------------------------------------------------------------------
def torch_block(torch, P: dict, x, block: nn.TransformerBlock):
    """``block.forward`` (pre-norm, dropout off) written with torch.nn.functional from the parameters ``P``."""
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    batch, length, d = x.shape
    hq, hk, hd = block.attn.num_heads, block.attn.num_kv_heads, block.attn.head_dim

    def norm(h, name):
        module = getattr(block, name)
        if isinstance(module, nn.RMSNorm):
            return F.rms_norm(h, (d,), P[f"{name}.weight"], eps=module.eps)
        return F.layer_norm(h, (d,), P[f"{name}.weight"], P[f"{name}.bias"], eps=module.eps)

    qkv = F.linear(norm(x, "norm1"), P["attn.qkv.weight"], P["attn.qkv.bias"])
    qkv = qkv.reshape(batch, length, hq + 2 * hk, hd).permute(0, 2, 1, 3)
    q, k, v = qkv[:, :hq], qkv[:, hq : hq + hk], qkv[:, hq + hk :]
    # torch's default CPU kernel (flash) has no double backward; the MATH backend is differentiable twice
    with sdpa_kernel(SDPBackend.MATH):
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hk != hq)
    merged = heads.transpose(1, 2).reshape(batch, length, hq * hd)
    x = x + F.linear(merged, P["attn.out.weight"], P["attn.out.bias"])
    hidden = F.gelu(F.linear(norm(x, "norm2"), P["mlp.0.weight"], P["mlp.0.bias"]))
    return x + F.linear(hidden, P["mlp.2.weight"], P["mlp.2.bias"])


@pytest.mark.parametrize("norm,num_kv_heads", [("layer", 4), ("rms", 2)], ids=["layernorm", "rmsnorm-gqa"])
def test_transformer_block_output_gradients_and_hvp_match_torch(torch, theirs, norm, num_kv_heads):
    rng = np.random.default_rng(3)
    block = nn.TransformerBlock(
        16, num_heads=4, mlp_hidden=24, num_kv_heads=num_kv_heads, causal=True, norm=norm, dtype=np.float64, rng=rng
    )
    # move the norms off their ones/zeros initialisation so that every parameter's curvature is generic
    block.load_state_dict({name: a + 0.2 * rng.normal(size=a.shape) for name, a in block.state_dict().items()})
    names = [name for name, _ in block.named_parameters()]
    x_array, target = rng.normal(size=(2, 6, 16)), rng.normal(size=(2, 6, 16))
    direction = [rng.normal(size=a.shape) for a in [*block.state_dict().values(), x_array]]

    x = OURS.tensor(x_array, requires_grad=True)
    leaves = [*block.parameters(), x]
    out = block(x)
    grads, hvp = grad_and_hvp(OURS, ops.mse_loss(out, OURS.tensor(target)), leaves, direction)

    P = {name: theirs.tensor(a, requires_grad=True) for name, a in block.state_dict().items()}
    tx = theirs.tensor(x_array, requires_grad=True)
    expected_out = torch_block(torch, P, tx, block)
    expected_loss = theirs.F.mse_loss(expected_out, theirs.tensor(target))
    expected_grads, expected_hvp = grad_and_hvp(theirs, expected_loss, [*P.values(), tx], direction)

    assert list(P) == names and len(names) == (12 if norm == "layer" else 10)  # every parameter is compared
    assert norm_of(expected_hvp) > 0.05 * norm_of(direction)
    np.testing.assert_allclose(out.numpy(), theirs.numpy(expected_out), rtol=RTOL, atol=ATOL)
    assert_all_close(grads, expected_grads, f"gradient of {[*names, 'input']}")
    assert_all_close(hvp, expected_hvp, f"hvp of {[*names, 'input']}")


# -- 3. WGAN-GP critic steps ----------------------------------------------------------------------------------------
CRITIC_SIZES = (4, 16, 16, 1)
PENALTY_WEIGHT = 10.0


def critic_loss(engine: Engine, params, real, fake, eps):
    """(D(fake).mean() - D(real).mean() + lambda * gp, gp) with the gradient penalty
    gp = mean((||dD(x_hat)/dx_hat||_2 - 1)^2) at x_hat = eps * real + (1 - eps) * fake, its gradient computed
    with create_graph so that the loss differentiates through it."""
    x_hat = engine.tensor(eps * real + (1 - eps) * fake, requires_grad=True)
    critic_at_x_hat = mlp(engine.F, params, x_hat)
    ones = engine.tensor(np.ones(tuple(critic_at_x_hat.shape)))
    (slope,) = engine.grad(critic_at_x_hat, [x_hat], grad_outputs=ones, create_graph=True)
    gp = ((engine.vector_norm(slope, dim=1) - 1) ** 2).mean()
    real, fake = engine.tensor(real), engine.tensor(fake)
    return mlp(engine.F, params, fake).mean() - mlp(engine.F, params, real).mean() + PENALTY_WEIGHT * gp, gp


def train_critic(engine: Engine, arrays, batches):
    """One Adam step per batch; returns [(loss, gp, parameter gradients)] per step and the final parameters."""
    params = engine.leaves(arrays)
    optimizer = engine.optim.Adam(params, lr=1e-2, betas=(0.5, 0.9))
    history = []
    for batch in batches:
        optimizer.zero_grad()
        loss, gp = critic_loss(engine, params, *batch)
        loss.backward()
        history.append((loss.item(), gp.item(), [engine.numpy(p.grad) for p in params]))
        optimizer.step()
    return history, [engine.numpy(p) for p in params]


def test_wgan_gp_critic_loss_gradients_and_adam_steps_match_torch(theirs):
    rng = np.random.default_rng(4)
    arrays = mlp_arrays(rng, CRITIC_SIZES)
    batches = [
        (rng.normal(1.0, 1.0, size=(8, 4)), rng.normal(-0.5, 2.0, size=(8, 4)), rng.uniform(size=(8, 1)))
        for _ in range(3)
    ]
    # the penalty's own parameter gradient (second order: through dD/dx_hat) is far from zero, so an engine that
    # treated the slope as a constant would miss PENALTY_WEIGHT times it (the output bias has no slope: unused)
    params = theirs.leaves(arrays)
    _, gp = critic_loss(theirs, params, *batches[0])
    penalty_grads = theirs.grad(gp, params, allow_unused=True)
    assert norm_of(theirs.numpy(g) for g in penalty_grads if g is not None) > 0.05

    history, final = train_critic(OURS, arrays, batches)
    expected_history, expected_final = train_critic(theirs, arrays, batches)
    for step, ((loss, gp, grads), (t_loss, t_gp, t_grads)) in enumerate(zip(history, expected_history)):
        np.testing.assert_allclose([loss, gp], [t_loss, t_gp], rtol=RTOL, atol=ATOL, err_msg=f"step {step}")
        assert_all_close(grads, t_grads, f"step {step} critic gradient")
    assert_all_close(final, expected_final, "parameters after the Adam steps")


# -- 4. MAML ------------------------------------------------------------------------------------------------------
LEARNER_SIZES = (1, 16, 16, 1)
INNER_LR, INNER_STEPS = 0.1, 2


def sine_tasks(rng, count: int = 2, shots: int = 6):
    """(support x, support y, query x, query y) of sine regression tasks y = a sin(x + phase)."""
    tasks = []
    for _ in range(count):
        amplitude, phase = rng.uniform(0.5, 2.0), rng.uniform(0, np.pi)
        xs, xq = rng.uniform(-3, 3, size=(shots, 1)), rng.uniform(-3, 3, size=(shots, 1))
        tasks.append((xs, amplitude * np.sin(xs + phase), xq, amplitude * np.sin(xq + phase)))
    return tasks


def maml_meta_loss(engine: Engine, params, tasks, second_order: bool):
    """Mean query loss after INNER_STEPS SGD steps theta' = theta - alpha grad L_support(theta) per task; with
    second_order the inner gradients are differentiable (create_graph), else they are constants (first-order MAML)."""
    F, total = engine.F, 0
    for task in tasks:
        xs, ys, xq, yq = engine.constants(task)
        fast = params
        for _ in range(INNER_STEPS):
            inner_grads = engine.grad(F.mse_loss(mlp(F, fast, xs), ys), fast, create_graph=second_order)
            fast = [p - INNER_LR * g for p, g in zip(fast, inner_grads)]
        total = total + F.mse_loss(mlp(F, fast, xq), yq)
    return total / len(tasks)


def meta_gradient(engine: Engine, arrays, tasks, second_order: bool):
    params = engine.leaves(arrays)
    meta_loss = maml_meta_loss(engine, params, tasks, second_order)
    meta_loss.backward()
    return meta_loss.item(), [engine.numpy(p.grad) for p in params]


@pytest.mark.parametrize("second_order", [True, False], ids=["second-order", "first-order"])
def test_maml_meta_loss_and_meta_gradient_match_torch(theirs, second_order):
    rng = np.random.default_rng(5)
    arrays, tasks = mlp_arrays(rng, LEARNER_SIZES), sine_tasks(rng)
    loss, grads = meta_gradient(OURS, arrays, tasks, second_order)
    expected_loss, expected_grads = meta_gradient(theirs, arrays, tasks, second_order)
    np.testing.assert_allclose(loss, expected_loss, rtol=RTOL, atol=ATOL)
    assert_all_close(grads, expected_grads, "meta-gradient")


def test_maml_second_order_terms_change_the_meta_gradient():
    """Dropping create_graph in the inner steps (first-order MAML) must change the meta-gradient by far more than
    the tolerance: a silently first-order path could not pass the second-order comparison above."""
    rng = np.random.default_rng(5)
    arrays, tasks = mlp_arrays(rng, LEARNER_SIZES), sine_tasks(rng)
    loss, second = meta_gradient(OURS, arrays, tasks, second_order=True)
    first_loss, first = meta_gradient(OURS, arrays, tasks, second_order=False)
    np.testing.assert_allclose(loss, first_loss, rtol=1e-14)  # the same forward
    difference = norm_of(s - f for s, f in zip(second, first))
    assert difference > 0.01 * norm_of(second), (difference, norm_of(second))


def test_gradcheck_of_a_function_that_differentiates_inside(torch):
    """gradcheck and gradgradcheck evaluate ``fn`` with gradients on, as torch's do: a function that takes a
    gradient inside (a gradient penalty, a MAML inner step) is checkable, and a wrong inner gradient is caught."""
    x = np.random.default_rng(3).standard_normal(5)

    def penalty(t):
        (g,) = tape.gradients((ops.sin(t) * t).sum(), [t], create_graph=True)
        return (g * g).sum()

    assert tape.gradcheck(penalty, [tape.tensor(x, requires_grad=True)])
    assert tape.gradgradcheck(penalty, [tape.tensor(x, requires_grad=True)])
    xt = torch.tensor(x, requires_grad=True)
    (gt,) = torch.autograd.grad((torch.sin(xt) * xt).sum(), [xt], create_graph=True)
    assert torch.autograd.gradcheck(lambda t: (torch.autograd.grad((torch.sin(t) * t).sum(), [t],
                                                                   create_graph=True)[0] ** 2).sum(), [xt])

    def detached_inner(t):  # an inner gradient that is silently a constant: its outer gradient is wrong
        (g,) = tape.gradients((ops.sin(t) * t).sum(), [t], create_graph=True)
        return (g.detach() * t).sum()

    with pytest.raises(tape.GradcheckError):
        tape.gradcheck(detached_inner, [tape.tensor(x, requires_grad=True)])
    # gradgradcheck takes gradcheck's options (before: n_directions was refused) and catches the constant inner
    # gradient one order up: its recorded backward is a constant, the finite differences of it are not
    for options in (dict(), dict(fast_mode=True, n_directions=2)):
        assert tape.gradgradcheck(detached_inner, [tape.tensor(x, requires_grad=True)], raise_exception=False,
                                  **options) is False
        with pytest.raises(tape.GradcheckError):
            tape.gradgradcheck(detached_inner, [tape.tensor(x, requires_grad=True)], **options)
