"""Copies of a Module (copy.copy, copy.deepcopy, pickle): new parameters with their own identities, read-only
arrays and version counters, the model's structure (tied parameters stay tied), and gradients that land in
the copy that was differentiated -- an EMA teacher never leaks gradients into its student."""

import copy
import pickle

import numpy as np
import pytest

import tape
from tape import nn, optim

COPIES = {
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "pickle": lambda m: pickle.loads(pickle.dumps(m)),
}


class Tied(nn.Module):
    """Embedding and output head share one weight; one layer is frozen."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.embed = nn.Embedding(5, 4, rng=rng)
        self.body = nn.Sequential(nn.Linear(4, 4, rng=rng), nn.GELU())
        self.frozen = nn.Linear(4, 4, rng=rng)
        self.frozen.weight.requires_grad = False
        self.head = nn.Linear(4, 5, bias=False, rng=rng)
        self.head.weight = self.embed.weight
        self.note = "kept"

    def forward(self, tokens):
        return self.head(self.frozen(self.body(self.embed(tokens))))


def _trainable(model):
    return [p for p in model.parameters() if p.requires_grad]


TOKENS = np.array([[0, 1, 4], [2, 3, 3]])


@pytest.fixture(params=list(COPIES))
def pair(request):
    model = Tied()
    return model, COPIES[request.param](model)


def test_copy_has_new_parameters_with_new_ids(pair):
    model, twin = pair
    ours, theirs = dict(model.named_parameters()), dict(twin.named_parameters())
    assert list(ours) == list(theirs)
    for name in ours:
        assert theirs[name] is not ours[name], name
        assert theirs[name].id != ours[name].id, name
        assert isinstance(theirs[name], nn.Parameter), name
        assert theirs[name].requires_grad == ours[name].requires_grad, name
        assert theirs[name].dtype == ours[name].dtype
        np.testing.assert_array_equal(theirs[name].numpy(), ours[name].numpy())
    assert {p.id for p in model.parameters()}.isdisjoint({p.id for p in twin.parameters()})
    assert twin.note == "kept" and twin.training == model.training


def test_copy_keeps_tied_parameters_tied(pair):
    _, twin = pair
    assert twin.head.weight is twin.embed.weight
    assert len(list(twin.parameters())) == len(list(Tied().parameters()))


def test_copy_has_its_own_module_tree(pair):
    model, twin = pair
    assert twin.body is not model.body and twin.body[0] is not model.body[0]
    twin.extra = nn.Linear(2, 2)
    twin.body[0].bias = nn.Parameter(np.zeros(4, dtype=np.float32))
    assert "extra" not in dict(model.named_children())
    assert model.body[0].bias is not twin.body[0].bias
    assert not np.array_equal(model.body[0].bias.numpy(), twin.body[0].bias.numpy())


def test_copied_arrays_stay_read_only(pair):
    _, twin = pair
    for name, p in twin.named_parameters():
        assert not p.numpy().flags.writeable, name
        with pytest.raises(ValueError):
            p.numpy()[...] = 0
        with pytest.raises(ValueError):
            p.numpy().setflags(write=True)


def test_copies_have_their_own_version_counters(pair):
    model, twin = pair
    out = twin(TOKENS).sum()  # recorded on the copy's parameters
    opt = optim.SGD(_trainable(model), lr=0.1)
    model.zero_grad()
    model(TOKENS).sum().backward()
    versions = {name: p._version for name, p in twin.named_parameters()}
    opt.step()  # replaces the original's arrays
    assert {name: p._version for name, p in twin.named_parameters()} == versions
    out.backward()  # the copy's graph is still valid: its parameters did not change
    assert twin.body[0].weight.grad is not None


def test_original_keeps_working_after_its_copy_is_updated(pair):
    model, twin = pair
    before = {name: p.numpy().copy() for name, p in model.named_parameters()}
    out = model(TOKENS).sum()
    opt = optim.SGD(_trainable(twin), lr=0.1)
    twin.zero_grad()
    twin(TOKENS).sum().backward()
    opt.step()
    out.backward()
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(p.numpy(), before[name])


def test_gradients_of_the_copy_never_land_in_the_original(pair):
    model, twin = pair
    twin(TOKENS).sum().backward()
    assert all(p.grad is None for p in model.parameters())
    assert all((p.grad is not None) == p.requires_grad for p in twin.parameters())


def test_ema_teacher_deepcopy_with_a_gradient_tape():
    student = Tied()
    teacher = copy.deepcopy(student)
    for p in teacher.parameters():
        p.requires_grad = False
    assert all(p.requires_grad for name, p in student.named_parameters() if not name.startswith("frozen."))

    with tape.GradientTape(persistent=True) as gt:
        gt.watch(list(teacher.parameters()))
        loss = (teacher(TOKENS) * student(TOKENS)).sum()
    student_params, teacher_params = list(student.parameters()), list(teacher.parameters())
    from_teacher = gt.compute_gradients(loss, teacher_params)
    from_student = gt.compute_gradients(loss, student_params)
    assert all(g is not None for g in from_teacher)
    # the gradient with respect to a student parameter is the student's, not the teacher's
    teacher_out = teacher(TOKENS).numpy()
    with tape.GradientTape() as only_student:
        student_loss = (tape.tensor(teacher_out) * student(TOKENS)).sum()
    expected = only_student.compute_gradients(student_loss, student_params)
    for name, g, e in zip([n for n, _ in student.named_parameters()], from_student, expected):
        if e is None:
            assert g is None, name
        else:
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, err_msg=name)
    assert all(p.grad is None for p in student.parameters())
    assert all(p.grad is None for p in teacher.parameters())

    # an EMA update moves the teacher only
    student_before = {n: p.numpy().copy() for n, p in student.named_parameters()}
    with tape.no_grad():
        for t, s in zip(teacher_params, student_params):
            t.data = 0.9 * t.numpy() + 0.1 * (s.numpy() + 1)
    for n, p in student.named_parameters():
        np.testing.assert_array_equal(p.numpy(), student_before[n])


def test_pickled_model_computes_the_same_outputs():
    model = Tied().eval()
    twin = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(model(TOKENS).numpy(), twin(TOKENS).numpy())
