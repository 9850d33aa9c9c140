"""Checkpoints: round trip, atomic writes, and clear refusals of broken, foreign or pickled files."""

import os
import pickle
import zipfile

import numpy as np
import pytest

import tape
from tape import checkpoint
from tape.train.checkpoint import CheckpointError


def _state():
    rng = np.random.default_rng(0)
    return {"embed.weight": rng.normal(size=(5, 3)).astype(np.float32),
            "blocks.0.norm1.bias": np.zeros(3, dtype=np.float32),
            "step": np.array(42, dtype=np.int64),
            "w64": rng.normal(size=(2, 2))}


def test_round_trip_keeps_names_order_values_and_dtypes(tmp_path):
    state = _state()
    path = checkpoint.save(state, tmp_path / "model.npz")
    loaded = checkpoint.load(path)
    assert list(loaded) == list(state)
    for name, array in state.items():
        assert loaded[name].dtype == array.dtype
        np.testing.assert_array_equal(loaded[name], array)


def test_save_accepts_tensors(tmp_path):
    t = tape.tensor(np.arange(4.0), requires_grad=True)
    checkpoint.save({"t": t}, tmp_path / "t.npz")
    np.testing.assert_array_equal(checkpoint.load(tmp_path / "t.npz")["t"], np.arange(4.0))


def test_save_overwrites_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "ckpt.npz"
    checkpoint.save({"a": np.ones(2)}, path)
    checkpoint.save({"a": np.zeros(2)}, path)
    np.testing.assert_array_equal(checkpoint.load(path)["a"], np.zeros(2))
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]


def test_crash_during_write_keeps_the_old_file_and_no_partial_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    checkpoint.save({"a": np.ones(3)}, path)
    original = path.read_bytes()

    def crashing_write(file, array, **kwargs):
        file.write(b"half an array")  # something reached the disk, then the process dies
        raise KeyboardInterrupt("simulated crash mid-write")

    monkeypatch.setattr(np.lib.format, "write_array", crashing_write)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save({"a": np.zeros(3)}, path)
    assert path.read_bytes() == original
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]


def test_crash_before_first_save_leaves_nothing(tmp_path, monkeypatch):
    def crashing_write(file, array, **kwargs):
        file.write(b"\x93NUMPY")
        raise OSError("disk full")

    monkeypatch.setattr(np.lib.format, "write_array", crashing_write)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save({"a": np.zeros(3)}, tmp_path / "new.npz")
    assert os.listdir(tmp_path) == []


def test_save_refuses_object_arrays(tmp_path):
    with pytest.raises(TypeError, match="'bad'.*object"):
        checkpoint.save({"bad": np.array([{"x": 1}], dtype=object)}, tmp_path / "x.npz")
    assert os.listdir(tmp_path) == []


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        checkpoint.load(tmp_path / "nope.npz")


def test_truncated_file_is_a_clear_error(tmp_path):
    path = tmp_path / "ckpt.npz"
    checkpoint.save(_state(), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated|corrupted"):
        checkpoint.load(path)


def test_corrupted_bytes_are_a_clear_error(tmp_path):
    path = tmp_path / "ckpt.npz"
    checkpoint.save({"w": np.arange(200.0)}, path)
    data = bytearray(path.read_bytes())
    data[200:260] = b"\xff" * 60  # inside the stored array: the zip CRC check must catch it
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupted"):
        checkpoint.load(path)


def test_foreign_npz_is_a_clear_error(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, weights=np.ones(3))
    with pytest.raises(CheckpointError, match="not a minitape checkpoint"):
        checkpoint.load(path)


def test_text_file_is_a_clear_error(tmp_path):
    path = tmp_path / "notes.npz"
    path.write_text("hello, I am not a checkpoint\n")
    with pytest.raises(CheckpointError, match="not a minitape checkpoint"):
        checkpoint.load(path)


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_pickle_file_is_refused_not_executed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.npz"
    path.write_bytes(pickle.dumps(_Boom()))
    with pytest.raises(CheckpointError, match="pickle"):
        checkpoint.load(path)
    assert not (tmp_path / "PWNED").exists()


def test_object_array_inside_npz_is_refused_not_executed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.npz"
    evil = np.empty(1, dtype=object)
    evil[0] = _Boom()
    with zipfile.ZipFile(path, "w") as zf:  # a checkpoint-looking archive carrying a pickled object array
        for name, array in {checkpoint.FORMAT_KEY: np.array(1), "w": evil}.items():
            with zf.open(f"{name}.npy", "w") as f:
                np.lib.format.write_array(f, array, allow_pickle=True)
    with pytest.raises(CheckpointError, match="pickle"):
        checkpoint.load(path)
    assert not (tmp_path / "PWNED").exists()


def test_future_format_version_is_refused(tmp_path):
    path = tmp_path / "future.npz"
    np.savez(path, **{checkpoint.FORMAT_KEY: np.array(99), "w": np.ones(2)})
    with pytest.raises(CheckpointError, match="version"):
        checkpoint.load(path)


# -- members that are not plain numeric .npy data, and headers that lie about their size --------------------------
def _npy_bytes(header: dict, payload: bytes) -> bytes:
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + payload


def _archive(path, members: dict[str, bytes], version: int = checkpoint.FORMAT_VERSION):
    """A checkpoint-looking archive with the given raw members (name -> .npy bytes) after a valid format key."""
    import io

    key = io.BytesIO()
    np.lib.format.write_array(key, np.array(version, dtype=np.int64))
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{checkpoint.FORMAT_KEY}.npy", key.getvalue())
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _npy_of(array) -> bytes:
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=True)
    return buffer.getvalue()


@pytest.mark.parametrize("array", [
    np.array(["abc", "de"]),                                     # str
    np.array([b"abc", b"de"]),                                   # bytes
    np.zeros(3, dtype="V4"),                                     # void
    np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]),             # structured
    np.zeros(2, dtype=("<f8", (3,))).view(np.dtype([("x", "<f8", (3,))])),  # structured with a sub-array
    np.array([1 + 2j]),                                          # complex
    np.array(["2024-01-01"], dtype="datetime64[D]"),             # datetime
], ids=["str", "bytes", "void", "structured", "subarray", "complex", "datetime"])
def test_member_with_a_non_numeric_dtype_is_refused(tmp_path, array):
    path = _archive(tmp_path / "x.npz", {"model/w.npy": _npy_of(array)})
    with pytest.raises(CheckpointError, match=r"'model/w\.npy'.*dtype"):
        checkpoint.load(path)


def test_object_member_is_refused_from_its_header_without_unpickling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evil = np.empty(1, dtype=object)
    evil[0] = _Boom()
    path = _archive(tmp_path / "evil.npz", {"model/w.npy": _npy_of(evil)})
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("load() unpickled something"))
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("load() unpickled something"))
    with pytest.raises(CheckpointError, match="pickle"):
        checkpoint.load(path)
    assert not (tmp_path / "PWNED").exists()


def test_header_declaring_a_huge_array_is_refused_before_allocating(tmp_path):
    # 2**40 float64 elements (8 TiB) declared, 16 bytes present: the loader must compare, not allocate
    data = _npy_bytes({"descr": "<f8", "fortran_order": False, "shape": (2**40,)}, b"\0" * 16)
    path = _archive(tmp_path / "lie.npz", {"model/w.npy": data})
    with pytest.raises(CheckpointError, match=r"'model/w\.npy'.*declares.*1099511627776 elements.*16 bytes"):
        checkpoint.load(path)


def test_header_declaring_more_than_the_member_holds_allocates_nothing_large(tmp_path):
    import tracemalloc

    declared = 50_000_000  # 400 MB of float64 declared, 8 bytes present
    data = _npy_bytes({"descr": "<f8", "fortran_order": False, "shape": (declared,)}, b"\0" * 8)
    path = _archive(tmp_path / "lie.npz", {"model/w.npy": data})
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match="declares"):
            checkpoint.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000, f"load allocated {peak} bytes for a member holding 8"


def test_header_declaring_fewer_elements_than_the_member_holds_is_refused(tmp_path):
    data = _npy_bytes({"descr": "<f8", "fortran_order": False, "shape": (2,)}, b"\0" * 64)
    path = _archive(tmp_path / "lie.npz", {"model/w.npy": data})
    with pytest.raises(CheckpointError, match=r"declares 2 elements.*holds 64 bytes"):
        checkpoint.load(path)


@pytest.mark.parametrize("shape", [(-1,), (3, -2), (True,)])
def test_header_with_an_invalid_shape_is_refused(tmp_path, shape):
    data = _npy_bytes({"descr": "<f8", "fortran_order": False, "shape": shape}, b"\0" * 8)
    path = _archive(tmp_path / "bad.npz", {"model/w.npy": data})
    with pytest.raises(CheckpointError, match="shape"):
        checkpoint.load(path)


def test_member_that_is_not_npy_data_is_refused(tmp_path):
    path = _archive(tmp_path / "bad.npz", {"model/w.npy": b"not an npy header at all"})
    with pytest.raises(CheckpointError, match=r"'model/w\.npy'"):
        checkpoint.load(path)


def test_unknown_member_is_refused_not_dropped(tmp_path):
    path = _archive(tmp_path / "bad.npz", {"model/w.npy": _npy_of(np.ones(2)), "notes.txt": b"hello"})
    with pytest.raises(CheckpointError, match="notes.txt"):
        checkpoint.load(path)


def test_fortran_order_and_big_endian_members_load_as_native_values(tmp_path):
    w = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    b = np.arange(3, dtype=">i4")
    path = _archive(tmp_path / "ok.npz", {"model/w.npy": _npy_of(w), "model/b.npy": _npy_of(b)})
    state = checkpoint.load(path)
    np.testing.assert_array_equal(state["w"], w)
    assert state["b"].dtype == np.dtype(np.int32) and state["b"].dtype.isnative
    np.testing.assert_array_equal(state["b"], [0, 1, 2])


# -- names: nothing collides with np.savez's arguments, nothing is dropped ----------------------------------------
NAMES = ["file", "allow_pickle", "args", "kwds", "a.b.c", "a/b", "a/b/c.npy", "/leading", "..", "dir/../up",
         "with space", "ünï cödé", "x.npy", checkpoint.FORMAT_KEY, "model/w", "optimizer/state.0.step",
         "back\\slash", "100%", "%25", "%5C", "nul\0byte"]


def test_every_name_round_trips(tmp_path):
    state = {name: np.full(2, i, dtype=np.int64) for i, name in enumerate(NAMES)}
    path = checkpoint.save(state, tmp_path / "names.npz")
    loaded = checkpoint.load(path)
    assert list(loaded) == NAMES
    for name in NAMES:
        np.testing.assert_array_equal(loaded[name], state[name])


@pytest.mark.parametrize("name", ["", 3, None])
def test_unusable_names_are_refused_at_save(tmp_path, name):
    with pytest.raises((ValueError, TypeError), match="checkpoint.save"):
        checkpoint.save({name: np.ones(2)}, tmp_path / "x.npz")
    assert os.listdir(tmp_path) == []


# -- file mode and durability -----------------------------------------------------------------------------------
@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_file_mode_follows_the_umask_without_changing_it(tmp_path, monkeypatch):
    previous = os.umask(0o027)
    try:
        def no_umask(mask):
            raise AssertionError("checkpoint.save changed the process-wide umask")

        monkeypatch.setattr(os, "umask", no_umask)
        path = checkpoint.save({"a": np.ones(2)}, tmp_path / "ckpt.npz")
        monkeypatch.undo()
    finally:
        os.umask(previous)
    assert os.stat(path).st_mode & 0o777 == 0o640


@pytest.mark.skipif(not hasattr(os, "O_DIRECTORY"), reason="no O_DIRECTORY on this platform")
def test_file_then_directory_are_fsynced_around_the_rename(tmp_path, monkeypatch):
    import stat

    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        return real_fsync(fd)

    def replace(src, dst):
        events.append("rename")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    checkpoint.save({"a": np.ones(2)}, tmp_path / "ckpt.npz")
    assert events == ["fsync file", "rename", "fsync dir"]


# -- model, optimizer, schedule and extra values in one file ------------------------------------------------------
def _model_and_optimizer(seed):
    from tape import nn, optim

    model = nn.Sequential(nn.Linear(3, 4, rng=np.random.default_rng(seed)), nn.GELU(),
                          nn.Linear(4, 2, rng=np.random.default_rng(seed + 1)))
    opt = optim.AdamW(model.parameters(), lr=0.1)
    schedule = optim.WarmupCosineLR(opt, warmup_steps=2, total_steps=10)
    return model, opt, schedule


def _one_step(model, opt, schedule):
    x = tape.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    opt.zero_grad()
    (model(x) ** 2).sum().backward()
    opt.step()
    schedule.step()


def test_model_optimizer_schedule_and_extras_round_trip(tmp_path):
    model, opt, schedule = _model_and_optimizer(0)
    for _ in range(3):
        _one_step(model, opt, schedule)
    path = checkpoint.save(model, tmp_path / "train.npz", optimizer=opt, schedule=schedule, step=3,
                           best=np.float32(1.5))
    other, other_opt, other_schedule = _model_and_optimizer(7)
    extra = checkpoint.load(path, other, optimizer=other_opt, schedule=other_schedule)
    assert sorted(extra) == ["best", "step"] and int(extra["step"]) == 3 and extra["best"].dtype == np.float32
    for a, b in zip(model.state_dict().values(), other.state_dict().values()):
        np.testing.assert_array_equal(a, b)
    for (ka, a), (kb, b) in zip(opt.state_dict().items(), other_opt.state_dict().items()):
        assert ka == kb and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert other_schedule.state_dict().keys() == schedule.state_dict().keys()
    assert other_opt.lr == opt.lr and other_schedule.last_step == 3
    assert list(checkpoint.load(path)) == list(model.state_dict())  # the one-argument form: the model's state


def test_read_returns_every_part(tmp_path):
    model, opt, schedule = _model_and_optimizer(0)
    path = checkpoint.save(model, tmp_path / "train.npz", optimizer=opt, epoch=2)
    parts = checkpoint.read(path)
    assert list(parts.model) == list(model.state_dict())
    assert parts.optimizer.keys() == opt.state_dict().keys()
    assert parts.schedule is None and list(parts.extra) == ["epoch"]


def test_loading_an_optimizer_from_a_file_without_one_is_an_error(tmp_path):
    model, opt, _ = _model_and_optimizer(0)
    path = checkpoint.save(model, tmp_path / "model_only.npz")
    with pytest.raises(CheckpointError, match="no optimizer state"):
        checkpoint.load(path, model, optimizer=opt)


def test_failed_load_changes_neither_model_nor_optimizer(tmp_path):
    from tape import optim

    model, opt, schedule = _model_and_optimizer(0)
    _one_step(model, opt, schedule)
    path = checkpoint.save(model, tmp_path / "train.npz", optimizer=opt)
    other, _, _ = _model_and_optimizer(7)
    sgd = optim.SGD(other.parameters(), lr=0.1, momentum=0.9)  # AdamW state does not fit an SGD
    before = {k: v.numpy().copy() for k, v in other.state_dict().items()}
    with pytest.raises(ValueError, match="SGD.load_state_dict"):
        checkpoint.load(path, other, optimizer=sgd)
    for k, v in other.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_save_with_the_arguments_swapped_is_a_clear_error(tmp_path):
    model, _, _ = _model_and_optimizer(0)
    with pytest.raises(TypeError, match=r"checkpoint.save: .*state_dict.*got str"):
        checkpoint.save(str(tmp_path / "x.npz"), model)


def test_extra_values_must_be_numeric(tmp_path):
    model, _, _ = _model_and_optimizer(0)
    with pytest.raises(TypeError, match="'note'"):
        checkpoint.save(model, tmp_path / "x.npz", note="hello")


def test_version_1_files_still_load(tmp_path):
    path = tmp_path / "v1.npz"
    w = np.arange(3.0)
    np.savez(path, **{"embed.weight": w, checkpoint.FORMAT_KEY: np.array(1)})
    loaded = checkpoint.load(path)
    assert list(loaded) == ["embed.weight"]
    np.testing.assert_array_equal(loaded["embed.weight"], w)


def test_compressed_and_duplicated_members_are_refused(tmp_path):
    compressed = tmp_path / "compressed.npz"
    with zipfile.ZipFile(compressed, "w") as zf:
        zf.writestr(f"{checkpoint.FORMAT_KEY}.npy", _npy_of(np.array(2)))
        zf.writestr("model/w.npy", _npy_of(np.zeros(100)), compress_type=zipfile.ZIP_DEFLATED)
    with pytest.raises(CheckpointError, match=r"'model/w\.npy'.*compressed"):
        checkpoint.load(compressed)
    duplicated = tmp_path / "duplicated.npz"
    with pytest.warns(UserWarning, match="Duplicate"), zipfile.ZipFile(duplicated, "w") as zf:
        zf.writestr(f"{checkpoint.FORMAT_KEY}.npy", _npy_of(np.array(2)))
        zf.writestr("model/w.npy", _npy_of(np.zeros(2)))
        zf.writestr("model/w.npy", _npy_of(np.ones(2)))
    with pytest.raises(CheckpointError, match=r"more than once"):
        checkpoint.load(duplicated)


def test_files_stay_readable_by_numpy_with_portable_member_names(tmp_path):
    path = checkpoint.save({"embed.weight": np.ones(2), "back\\slash": np.zeros(1)}, tmp_path / "x.npz", step=4)
    with zipfile.ZipFile(path) as zf:
        assert zf.namelist() == [f"{checkpoint.FORMAT_KEY}.npy", "model/embed.weight.npy", "model/back%5Cslash.npy",
                                 "extra/step.npy"]
    with np.load(path, allow_pickle=False) as archive:
        np.testing.assert_array_equal(archive["model/embed.weight"], np.ones(2))
        assert int(archive["extra/step"]) == 4


def test_the_same_state_gives_the_same_bytes(tmp_path):
    state = _state()
    first = checkpoint.save(state, tmp_path / "a.npz")
    second = checkpoint.save(state, tmp_path / "b.npz")
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes(), (first, second)
