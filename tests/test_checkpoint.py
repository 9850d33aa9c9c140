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

    def crashing_savez(file, **arrays):
        file.write(b"PK\x03\x04 half a checkpoint")  # something reached the disk, then the process dies
        raise KeyboardInterrupt("simulated crash mid-write")

    monkeypatch.setattr(np, "savez", crashing_savez)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save({"a": np.zeros(3)}, path)
    assert path.read_bytes() == original
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]


def test_crash_before_first_save_leaves_nothing(tmp_path, monkeypatch):
    def crashing_savez(file, **arrays):
        file.write(b"PK\x03\x04")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", crashing_savez)
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
