"""The coverage matrix (tape/coverage.py) and its command line (`python -m tape coverage`, tape/cli.py).

Throwaway ops -- one with a stub backward, one with a wrong backward, one whose torch reference
disagrees, and a few well-declared ones -- are registered for a test and unregistered in a finally, and
the matrix must show what is wrong with each. The real registry must pass ``--check``, and
docs/coverage.md must match what the command generates now.
"""

import io
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from oracle import require_torch
from paths import REPO

import tape
from tape.tools import coverage
from tape.tools.cli import main
from tape.tools.coverage import ABSENT, FAIL, PASS, WARN
from tape.tools.verify import op_samples, torch_available

DOCS = REPO / "docs" / "coverage.md"
REGENERATE = "python -m tape coverage --format markdown --output docs/coverage.md"

# Registered in-process by the fixture below and, for the subprocess test, by importing a file holding it.
BROKEN_OPS_SOURCE = textwrap.dedent("""
    import numpy as np
    import tape

    def covtest_samples(rng):
        return [tape.Sample((rng.uniform(-1, 1, (2, 3)),), {}, "matrix"),
                tape.Sample((rng.uniform(-1, 1, (4,)),), {}, "vector")]

    tape.defop("covtest_stub", family="covtest", inputs=("x",), forward=np.sin, vjps=(tape.STUB,),
               samples=covtest_samples, torch_ref=lambda torch, x: torch.sin(x))
    tape.defop("covtest_wrong", family="covtest", inputs=("x",), forward=np.sin,
               vjps=(lambda g, ans, x: 1.5 * g * np.cos(x),),  # the derivative is cos(x), not 1.5 cos(x)
               samples=covtest_samples, torch_ref=lambda torch, x: torch.sin(x))
""")
BROKEN = ["covtest_stub", "covtest_wrong"]


def _masked_samples(rng):
    return [tape.Sample((rng.uniform(-1, 1, (3, 4)), rng.uniform(size=(3, 4)) > 0.5), {}, "bool mask")]


def _declare_well_formed_ops(namespace):
    tape.defop("covtest_cube", family="covtest", inputs=("x",), forward=lambda x: x ** 3,
               vjps=(lambda g, ans, x: 3 * g * x * x,), samples=namespace["covtest_samples"],
               torch_ref=lambda torch, x: torch.pow(x, 3))
    tape.defop("covtest_bad_ref", family="covtest", inputs=("x",), forward=lambda x: x ** 3,
               vjps=(lambda g, ans, x: 3 * g * x * x,), samples=namespace["covtest_samples"],
               torch_ref=lambda torch, x: torch.pow(x, 2))  # a wrong oracle: parity must fail, gradcheck pass
    tape.defop("covtest_masked", family="covtest", inputs=("x", "mask"),
               forward=lambda x, mask: np.where(mask, x, 0.0),
               vjps=(lambda g, ans, x, mask: np.where(mask, g, 0.0), tape.NOT_DIFFERENTIABLE),
               samples=_masked_samples, torch_ref=lambda torch, x, mask: torch.where(mask, x, 0.0),
               notes="a test op")
    tape.defop("covtest_unsampled", family="covtest", inputs=("x",), forward=np.negative,
               vjps=(lambda g, ans, x: -g,))


THROWAWAY = BROKEN + ["covtest_cube", "covtest_bad_ref", "covtest_masked", "covtest_unsampled"]


@pytest.fixture
def throwaway_ops():
    namespace = {}
    try:
        exec(compile(BROKEN_OPS_SOURCE, "<covtest ops>", "exec"), namespace)
        _declare_well_formed_ops(namespace)
        yield {name: tape.get_op(name) for name in THROWAWAY}
    finally:
        for name in THROWAWAY:
            tape.unregister_op(name)


def _rows(names, **options):
    return {row.op: row for row in coverage.coverage_rows(ops=names, **options)}


# -- the matrix, through the Python API ----------------------------------------------------------------------
def test_stub_and_wrong_backward_show_as_failures(throwaway_ops):
    rows = _rows(BROKEN)
    stub, wrong = rows["covtest_stub"], rows["covtest_wrong"]
    assert stub.backward.status == FAIL and "stub" in stub.backward.text and "x" in stub.backward.text
    assert stub.gradcheck.status == FAIL and "BackwardNotImplementedError" in stub.gradcheck.text
    assert wrong.backward.status == PASS
    assert wrong.gradcheck.status == FAIL and "2/2 samples, worst error" in wrong.gradcheck.text
    require_torch()
    assert stub.parity.status == FAIL and wrong.parity.status == FAIL
    assert stub.forward.status == wrong.forward.status == PASS
    assert stub.failed and wrong.failed
    listed = coverage.failures(rows.values())
    assert [line.split(":")[0] for line in listed] == BROKEN
    assert "stub for input(s) x" in listed[0] and "gradcheck" in listed[1]
    assert tape.stubbed_backward_op_names() == ["covtest_stub"]


def test_well_declared_ops_pass_and_absent_checks_are_marked(throwaway_ops):
    rows = _rows(["covtest_cube", "covtest_masked", "covtest_unsampled"])
    cube, masked, unsampled = rows["covtest_cube"], rows["covtest_masked"], rows["covtest_unsampled"]
    n = len(op_samples(throwaway_ops["covtest_cube"]))
    assert (cube.forward.status, cube.backward.status, cube.gradcheck.status) == (PASS, PASS, PASS)
    assert cube.gradcheck.text == f"{n} samples" and not cube.failed
    assert masked.backward.status == PASS and masked.backward.text == "x"  # the mask is not listed
    assert "mask: bool not differentiable" in masked.notes and "a test op" in masked.notes
    assert masked.gradcheck.status == PASS
    assert unsampled.forward.status == WARN and unsampled.gradcheck.status == WARN
    assert unsampled.parity.status == ABSENT
    require_torch()  # without torch the parity column says "torch not installed" for every op
    assert "no counterpart" in unsampled.parity.text
    assert cube.parity.status == PASS and masked.parity.status == PASS


def _cube_lowering(g, rec, x):
    """x * x * x in the output's dtype (a bool input's cube is an int8 one, as numpy's)."""
    from ops._onnx import cast_to

    x = cast_to(g, x, rec.inputs[0].dtype, rec.output.dtype)
    return g.op("Mul", g.op("Mul", x, x), x)


def test_export_column_measures_declared_lowerings_only(throwaway_ops):
    """A right lowering passes, a wrong one fails (and counts for --check), an op without one is marked absent."""
    if os.environ.get("MINITAPE_REQUIRE_ONNX") != "1":  # CI requires it: there the column must be measured
        pytest.importorskip("onnxruntime")
    from tape.onnx import lowering

    lowering(throwaway_ops["covtest_cube"], _cube_lowering)
    lowering(throwaway_ops["covtest_bad_ref"], lambda g, rec, x: g.op("Mul", x, x))  # x^2 for x^3: wrong
    rows = _rows(["covtest_cube", "covtest_bad_ref", "covtest_masked"], torch=False, order2=False)
    n = len(op_samples(throwaway_ops["covtest_cube"]))
    cube = rows["covtest_cube"].export
    assert cube.status == PASS and cube.text.startswith(f"{2 * n}/{2 * n}, edges "), cube.text
    bad = rows["covtest_bad_ref"]
    assert bad.export.status == FAIL and bad.failed and any(p.startswith("export") for p in bad.problems)
    assert rows["covtest_masked"].export.status == ABSENT
    assert rows["covtest_masked"].export.text == "no lowering declared"
    # declared not exportable: the reason is shown, and the summary counts it apart from the absent ones
    lowering(throwaway_ops["covtest_masked"], not_exportable="covtest: no ONNX form")
    declared = _rows(["covtest_masked"], torch=False, order2=False)["covtest_masked"]
    assert declared.export.status == ABSENT and declared.export.text == "not exportable: covtest: no ONNX form"
    totals = coverage.summary([rows["covtest_cube"], declared, rows["covtest_masked"]])
    assert totals["export"].text == "1/3, 1 not exportable, 1 —", totals["export"].text


def test_backward_export_column_measures_the_exported_gradients(throwaway_ops):
    """The ONNX backward column exports each sample's gradients (what tape.compile(backend="onnxruntime") runs)
    and compares them with the reverse pass: a rule recording an op whose lowering is wrong fails it (the forward
    export column stays green), a rule recording an op declared not exportable is counted and warned, a right one
    passes -- in float32 and float64."""
    if os.environ.get("MINITAPE_REQUIRE_ONNX") != "1":
        pytest.importorskip("onnxruntime")
    from tape.onnx import lowering

    samples = throwaway_ops["covtest_cube"].samples
    n = len(op_samples(throwaway_ops["covtest_cube"]))
    slope = tape.defop("covtest_slope", family="covtest", inputs=("x",), forward=lambda x: 3 * x * x,
                       vjps=(lambda g, ans, x: 6 * g * x,), samples=samples)
    opaque = tape.defop("covtest_opaque", family="covtest", inputs=("x",), forward=lambda x: 3 * x * x,
                        vjps=(lambda g, ans, x: 6 * g * x,), samples=samples)

    def via(inner):  # a rule recording ``inner`` on Tensors (create_graph, an export), numpy otherwise
        return lambda g, ans, x: g * inner(x) if isinstance(x, tape.Tensor) else 3 * g * x * x

    through = {name: tape.defop(name, family="covtest", inputs=("x",), forward=lambda x: x ** 3,
                                vjps=(via(inner),), samples=samples)
               for name, inner in (("covtest_via_slope", slope), ("covtest_via_opaque", opaque))}
    try:
        lowering(throwaway_ops["covtest_cube"], _cube_lowering)
        lowering(slope, lambda g, rec, x: g.op("Mul", x, x))  # x^2 for 3 x^2: a wrong lowering of the backward
        lowering(opaque, not_exportable="covtest: no ONNX form")
        for op in through.values():
            lowering(op, _cube_lowering)
        rows = _rows(["covtest_cube", "covtest_via_slope", "covtest_via_opaque", "covtest_masked"], torch=False,
                     order2=False)
        cube, wrong, refused = rows["covtest_cube"], rows["covtest_via_slope"], rows["covtest_via_opaque"]
        assert cube.export_backward.status == PASS and cube.export_backward.text == f"{2 * n}/{2 * n}", cube
        assert wrong.export.status == PASS and wrong.export_backward.status == FAIL and wrong.failed, wrong
        assert any(p.startswith("ONNX backward") and "gradient in input 0" in p for p in wrong.problems), wrong
        assert refused.export_backward.status == WARN and not refused.failed
        assert refused.export_backward.text == f"0/{2 * n}, {2 * n} refused (covtest_opaque: covtest: no ONNX form)"
        assert rows["covtest_masked"].export_backward.status == ABSENT  # no forward lowering: nothing to export
    finally:
        for name in ("covtest_slope", "covtest_opaque", *through):
            tape.unregister_op(name)


def test_export_column_checks_edge_values_and_declared_differences(throwaway_ops):
    """A lowering that agrees on the samples but not at an edge value (ONNX's Sign of NaN is NaN, the op's 0)
    fails the column, naming the edge case; declared with its reason it is ⚠, and a declaration that no longer
    shows fails."""
    if os.environ.get("MINITAPE_REQUIRE_ONNX") != "1":
        pytest.importorskip("onnxruntime")
    from tape.onnx import lowering

    sign = tape.defop("covtest_sign", family="covtest", inputs=("x",), forward=lambda x: np.nan_to_num(np.sign(x)),
                      vjps=(lambda g, ans, x: 0 * g,), samples=throwaway_ops["covtest_cube"].samples)
    try:
        lowering(sign, "Sign")
        row = _rows(["covtest_sign"], torch=False, order2=False)["covtest_sign"]
        assert row.export.status == FAIL and any("export: edges" in p and "nan" in p for p in row.problems), row
        lowering(sign, "Sign", edge_difference="covtest: NaN gives NaN")
        row = _rows(["covtest_sign"], torch=False, order2=False)["covtest_sign"]
        assert row.export.status == WARN and "covtest: NaN gives NaN" in row.export.text, row.export
        lowering(throwaway_ops["covtest_cube"], _cube_lowering, edge_difference="covtest: none")
        row = _rows(["covtest_cube"], torch=False, order2=False)["covtest_cube"]
        assert row.export.status == FAIL and "no longer shows" in row.export.text, row.export
    finally:
        tape.unregister_op("covtest_sign")


def test_a_disagreeing_torch_reference_fails_parity_only(throwaway_ops, torch):
    row = _rows(["covtest_bad_ref"])["covtest_bad_ref"]
    assert row.gradcheck.status == PASS and row.parity.status == FAIL and row.failed
    assert any("torch parity" in p for p in row.problems)


def test_no_torch_skips_the_parity_column(throwaway_ops):
    row = _rows(["covtest_bad_ref"], torch=False)["covtest_bad_ref"]
    assert row.parity.status == ABSENT and not row.failed


def test_filters(throwaway_ops):
    assert {r.op for r in coverage.coverage_rows(family="covtest")} == set(THROWAWAY)
    assert [r.op for r in coverage.coverage_rows(ops=["covtest_masked", "covtest_cube"])] == [
        "covtest_masked", "covtest_cube"]
    with pytest.raises(ValueError, match="unknown op 'nope'"):
        coverage.coverage_rows(ops=["covtest_cube", "nope"])
    with pytest.raises(ValueError, match="unknown op family 'nope'"):
        coverage.coverage_rows(family="nope")


def test_worker_processes_give_the_rows_of_one_process():
    names = ["tanh", "split", "sort", "cross_entropy"]  # one output, several, an int output, a saving joint rule
    serial = coverage.coverage_rows(ops=names, jobs=1)
    parallel = coverage.coverage_rows(ops=names, jobs=2)
    assert [r.cells() for r in parallel] == [r.cells() for r in serial]
    assert [r.problems for r in parallel] == [r.problems for r in serial]


def test_ops_registered_at_run_time_are_checked_by_the_parent_when_workers_lack_them(throwaway_ops):
    serial = coverage.coverage_rows(family="covtest", torch=False, jobs=1)
    parallel = coverage.coverage_rows(family="covtest", torch=False, jobs=2)
    assert [r.cells() for r in parallel] == [r.cells() for r in serial]
    assert any(r.failed for r in parallel)  # the throwaway family holds broken ops: their failures are kept


DYING_WORKER_SOURCE = textwrap.dedent("""
    import multiprocessing
    import os

    import numpy as np
    import tape

    def forward(x):
        if multiprocessing.parent_process() is not None:  # a coverage worker: die as a killed process does
            os._exit(1)
        return np.negative(x)

    tape.defop("covtest_dies", family="covtest", inputs=("x",), forward=forward,
               vjps=(lambda g, ans, x: -g,), samples=lambda rng: [tape.Sample((rng.normal(size=3),), {})])
""")


def test_a_worker_killed_midway_leaves_its_ops_to_the_parent(tmp_path, monkeypatch):
    """A worker process terminated abruptly (here by its op; on CI the VM was forked under it) broke the whole
    pool and the command died with BrokenProcessPool. The ops without a row are checked in this process, with a
    warning naming them; the rows equal a one-process run's."""
    (tmp_path / "covtest_dying.py").write_text(DYING_WORKER_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import covtest_dying  # noqa: F401  -- registers the op here too

    names = ["covtest_dies", "tanh", "sort", "split"]
    try:
        serial = coverage.coverage_rows(ops=names, torch=False, export=False, jobs=1)
        with pytest.warns(RuntimeWarning, match=r"coverage: a worker process ended abruptly; .* checked here"):
            parallel = coverage.coverage_rows(ops=names, torch=False, export=False, jobs=2, imports=("covtest_dying",))
        assert [r.cells() for r in parallel] == [r.cells() for r in serial]
    finally:
        tape.unregister_op("covtest_dies")
        sys.modules.pop("covtest_dying", None)


def test_summary_counts_each_column(throwaway_ops):
    totals = coverage.summary(coverage.coverage_rows(ops=["covtest_stub", "covtest_wrong", "covtest_cube"],
                                                     torch=False))
    assert (totals["backward"].status, totals["backward"].text) == (FAIL, "2/3, 1 stub")
    assert (totals["gradcheck"].status, totals["gradcheck"].text) == (FAIL, "1/3, 2 ❌")
    assert (totals["forward"].status, totals["forward"].text) == (PASS, "3/3")
    assert (totals["parity"].status, totals["parity"].text) == (PASS, "0/3, 3 —")


def test_render_formats(throwaway_ops):
    rows = coverage.coverage_rows(family="covtest", torch=False)
    document = json.loads(coverage.render(rows, "json"))
    assert [r["op"] for r in document["rows"]] == [r.op for r in rows]
    stub = next(r for r in document["rows"] if r["op"] == "covtest_stub")
    assert stub["backward"] == {"status": "fail", "text": "stub: x"} and stub["failed"] is True
    assert document["summary"]["backward"]["status"] == "fail"

    table = coverage.render(rows, "table")
    assert all(name in table for name in THROWAWAY) and "❌ stub: x" in table
    assert f"✅ {len(rows) - 1}/{len(rows)}, 1 stub" in table.splitlines()[-1]  # the summary row

    parsed = coverage.parse_markdown_table(coverage.render(rows, "markdown"))
    assert parsed[:-1] == [row.cells() for row in rows]  # the last row is the summary
    assert parsed[-1][0] == f"**{len(rows)} ops**"
    with pytest.raises(ValueError, match="format"):
        coverage.render(rows, "html")


# -- the command line, in process ----------------------------------------------------------------------------
def test_check_exits_1_listing_the_failing_ops(throwaway_ops, capsys):
    assert main(["coverage", "--check", "--ops", *BROKEN]) == 1
    out, err = capsys.readouterr()
    assert "covtest_stub" in out and "❌ stub: x" in out
    assert "FAILED for 2 of 2 ops" in err and "covtest_stub:" in err and "covtest_wrong:" in err
    assert err.count("\r") == 0  # no progress bar when stderr is not a terminal

    assert main(["coverage", "--check", "--ops", "covtest_cube", "covtest_masked"]) == 0
    assert "passed" in capsys.readouterr().err


def test_json_output_and_family_filter(throwaway_ops, capsys):
    assert main(["coverage", "--family", "covtest", "--format", "json", "--no-torch"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert sorted(r["op"] for r in document["rows"]) == sorted(THROWAWAY)


@pytest.mark.parametrize("argv,message", [
    (["coverage", "--ops", "no_such_op"], "unknown op 'no_such_op'"),
    (["coverage", "--family", "no_such_family"], "unknown op family 'no_such_family'"),
    (["coverage", "--format", "html"], "invalid choice"),
    (["ops", "--family", "no_such_family"], "unknown op family"),
    (["no_such_command"], "invalid choice"),
    (["ops", "--import", "no_such_module_xyz"], "no_such_module_xyz"),
])
def test_usage_errors_exit_2(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_no_command_prints_help(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "coverage" in out and "ops" in out and "usage" in out


def test_ops_lists_ops_and_backward_states(throwaway_ops, capsys):
    assert main(["ops", "--family", "covtest"]) == 0
    lines = capsys.readouterr().out.splitlines()
    by_op = {line.split()[0]: line for line in lines[1:-1]}
    assert set(by_op) == set(THROWAWAY)
    assert "x: stub" in by_op["covtest_stub"]
    assert "x: rule, mask: not differentiable" in by_op["covtest_masked"] and "x, mask" in by_op["covtest_masked"]
    assert lines[-1].startswith(f"{len(THROWAWAY)} ops, 1 family, 1 with a stub backward")


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_shows_on_a_terminal_only(throwaway_ops):
    from tape.tools.cli import _Progress

    op = throwaway_ops["covtest_cube"]
    terminal, pipe = _Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        with _Progress(stream) as progress:
            progress(1, 4, op)
    assert "1/4 covtest: covtest_cube" in terminal.getvalue()
    assert pipe.getvalue() == ""


# -- the real entry point, in a fresh process ----------------------------------------------------------------
def _run(*argv, pythonpath=()):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), str(REPO), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "tape", *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=600)


def test_entry_point_check_fails_on_broken_ops(tmp_path):
    (tmp_path / "covtest_broken_ops.py").write_text(BROKEN_OPS_SOURCE)
    result = _run("coverage", "--check", "--ops", *BROKEN, "--import", "covtest_broken_ops", pythonpath=[tmp_path])
    assert result.returncode == 1, result.stderr
    assert "covtest_stub" in result.stderr and "covtest_wrong" in result.stderr
    assert "❌ stub: x" in result.stdout


@pytest.fixture(scope="module")
def library_matrix(tmp_path_factory):
    """`python -m tape coverage --check` over the real registry, written as markdown."""
    output = tmp_path_factory.mktemp("coverage") / "coverage.md"
    result = _run("coverage", "--check", "--format", "markdown", "--output", str(output))
    return result, output


def test_library_passes_check(library_matrix):
    result, _ = library_matrix
    assert result.returncode == 0, f"`python -m tape coverage --check` failed:\n{result.stderr}"


def test_docs_coverage_md_is_up_to_date(library_matrix):
    result, output = library_matrix
    assert output.exists(), result.stderr
    fresh = coverage.parse_markdown_table(output.read_text(encoding="utf-8"))
    assert DOCS.exists(), f"docs/coverage.md is missing; generate it with `{REGENERATE}`"
    stored = coverage.parse_markdown_table(DOCS.read_text(encoding="utf-8"))
    columns = list(range(len(coverage.HEADINGS)))
    if not torch_available():  # the parity columns cannot be reproduced here
        require_torch()  # fails, or skips knowingly under MINITAPE_ALLOW_NO_TORCH=1

    kept = lambda cells: [cells[k] for k in columns]
    stored_rows, fresh_rows = {r[0]: kept(r) for r in stored[:-1]}, {r[0]: kept(r) for r in fresh[:-1]}
    added = [op for op in fresh_rows if op not in stored_rows]
    removed = [op for op in stored_rows if op not in fresh_rows]
    changed = [f"{op}: {stored_rows[op]} -> {fresh_rows[op]}" for op in fresh_rows
               if op in stored_rows and stored_rows[op] != fresh_rows[op]]
    assert not (added or removed or changed), (
        f"docs/coverage.md is out of date: ops added {added}, removed {removed}, changed {changed[:3]}. "
        f"Regenerate it with `{REGENERATE}`")
    assert list(stored_rows) == list(fresh_rows), f"docs/coverage.md lists the ops in another order: `{REGENERATE}`"
    assert kept(stored[-1]) == kept(fresh[-1]), f"docs/coverage.md's summary row is out of date: `{REGENERATE}`"


def test_check_without_torch_fails_unless_skipping_parity_is_explicit(monkeypatch, capsys):
    monkeypatch.setattr(coverage.verify, "torch_available", lambda: False)
    monkeypatch.delenv("MINITAPE_ALLOW_NO_TORCH", raising=False)
    assert main(["coverage", "--check", "--ops", "add"]) == 1
    assert "torch parity could not be checked" in capsys.readouterr().err
    assert main(["coverage", "--check", "--ops", "add", "--no-torch"]) == 0
    monkeypatch.setenv("MINITAPE_ALLOW_NO_TORCH", "1")
    assert main(["coverage", "--check", "--ops", "add"]) == 0
