"""The op coverage matrix: for every registered op, what is *measured* to work right now.

One row per op: does its forward run on all its samples, is a backward registered for every
differentiable input (or is one a stub), does float64 finite-difference gradcheck pass on its samples,
does it match PyTorch (float64 and float32) where torch has the same op, and -- the second-order column --
is the backward itself differentiable: ``create_graph`` gradients pass float64 gradgradcheck and match torch's
Hessian-vector products where torch double-differentiates the op -- and the two ONNX columns: does the op's
declared lowering give its forward in ONNX Runtime, and do its gradients, exported as the training graph
``tape.compile(backend="onnxruntime")`` runs, give the reverse pass's. Nothing here is a table
kept by hand: ``coverage_rows()`` runs the checks of ``tape.tools.verify`` -- the very ones the generated tests
assert -- at the moment it is called. ``render()`` turns the rows into a terminal table, markdown or JSON;
``python -m tape coverage`` (tape/cli.py) is the command-line face of both.
"""

from __future__ import annotations

import json
import time
import unicodedata
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np

from ..registry import Grad, registered_ops
from . import edges, verify

__all__ = [
    "Cell",
    "CoverageRow",
    "coverage_rows",
    "render",
    "summary",
    "failures",
    "FORMATS",
    "PASS",
    "FAIL",
    "ABSENT",
    "WARN",
]

PASS, FAIL, ABSENT, WARN = "pass", "fail", "absent", "warn"
SYMBOLS = {PASS: "✅", FAIL: "❌", ABSENT: "—", WARN: "⚠"}
COLUMNS = ("forward", "backward", "gradcheck", "parity", "order2", "export", "export_backward")
HEADINGS = (
    "op",
    "family",
    "forward",
    "backward",
    "gradcheck",
    "torch parity",
    "2nd order",
    "ONNX export",
    "ONNX backward",
    "notes",
)
FORMATS = ("table", "markdown", "json")
PARITY_DTYPES = (np.float64, np.float32)
# The second-order column checks samples of more than this many input entries in gradgradcheck's fast mode
# (finite differences along random directions, as PyTorch's fast_mode): a wrong rule still fails, and the whole
# matrix stays under a minute. The generated tests check entry by entry up to verify.FULL_GRADGRADCHECK_UP_TO.
ORDER2_FULL_UP_TO = 16
NOT_EXPORTABLE = "not exportable"  # the export column's text for an op declared lowering(op, not_exportable=why)


@dataclass
class Cell:
    """One verdict: ``status`` is pass / fail / absent (not applicable) / warn; ``text`` says why."""

    status: str
    text: str = ""

    def __str__(self) -> str:
        return f"{SYMBOLS[self.status]} {self.text}".rstrip()


@dataclass
class CoverageRow:
    op: str
    family: str
    inputs: tuple[str, ...]
    forward: Cell
    backward: Cell
    gradcheck: Cell
    parity: Cell
    order2: Cell
    export: Cell
    export_backward: Cell
    notes: str = ""
    problems: list[str] = field(default_factory=list)  # full messages of every failure, for --check
    seconds: float = 0.0

    @property
    def order2_stub(self) -> bool:
        """The op's second order is a declared stub (listed and counted; fails only ``--check-order 2``)."""
        return self.order2.status == FAIL and self.order2.text.startswith("stub")

    @property
    def failed(self) -> bool:
        """A first-order stub or any failed measurement (a wrong second-order number included)."""
        return any(getattr(self, column).status == FAIL for column in COLUMNS if column != "order2") or (
            self.order2.status == FAIL and not self.order2_stub
        )

    def cells(self) -> list[str]:
        return [self.op, self.family] + [str(getattr(self, c)) for c in COLUMNS] + [self.notes]


# -- running the checks ------------------------------------------------------------------------------------
def select_ops(ops=None, family=None) -> list:
    """Registered ops filtered by name and/or family; unknown names raise ValueError listing what exists."""
    registered = registered_ops()
    families = [family] if isinstance(family, str) else list(family or [])
    known_families = sorted({op.family for op in registered})
    unknown = [f for f in families if f not in known_families]
    if unknown:
        raise ValueError(
            f"unknown op family {', '.join(map(repr, unknown))}; registered families: {', '.join(known_families)}"
        )
    selected = registered
    if ops:
        names = [ops] if isinstance(ops, str) else list(ops)
        by_name = {op.name: op for op in registered}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise ValueError(
                f"unknown op {', '.join(map(repr, missing))}; `python -m tape ops` lists the "
                f"{len(by_name)} registered ops"
            )
        selected = [by_name[n] for n in dict.fromkeys(names)]
    if families:
        selected = [op for op in selected if op.family in families]
    family_rank: dict[str, int] = {}
    for op in registered:
        family_rank.setdefault(op.family, len(family_rank))
    return sorted(selected, key=lambda op: family_rank[op.family])  # grouped by family, stable within one


def coverage_rows(
    ops=None,
    family=None,
    torch: bool = True,
    progress=None,
    order2: bool = True,
    jobs: int = 1,
    imports=(),
    export: bool = True,
) -> list[CoverageRow]:
    """Check the selected ops (all by default) and return one row each, in registry order.

    ``ops``: op names; ``family``: a family name or a list of them; ``torch=False`` skips the parity
    column, ``export=False`` the ONNX export one. ``progress(done, total, op)`` is called before each op is
    checked (as each finishes when ``jobs > 1``). ``jobs > 1`` checks ops in that many fresh worker processes
    (spawned, so no thread state is inherited); the workers import ``ops`` and the modules named in ``imports``,
    so an op registered any other way (e.g. in a test) must be checked with ``jobs=1``.
    """
    selected = select_ops(ops, family)
    use_torch = torch and verify.torch_available()
    parity_absent = None if use_torch else Cell(ABSENT, "torch not installed" if torch else "skipped (--no-torch)")
    if jobs > 1 and len(selected) > 1:
        rows = _rows_in_workers(selected, parity_absent, use_torch, order2, jobs, tuple(imports), progress, export)
    else:
        rows = []
        for k, op in enumerate(selected):
            if progress is not None:
                progress(k, len(selected), op)
            rows.append(_checked_quietly(op, parity_absent, use_torch, order2, export))
    if progress is not None:
        progress(len(selected), len(selected), None)
    return rows


def _checked_quietly(op, parity_absent, torch, order2, export=True) -> CoverageRow:
    with warnings.catch_warnings():  # the verdicts say what matters; library warnings would bury them
        warnings.simplefilter("ignore")
        return check_op(op, parity_absent, torch, order2, export)


def _rows_in_workers(selected, parity_absent, torch, order2, jobs, imports, progress, export) -> list[CoverageRow]:
    """``check_op`` over a pool of spawned processes; the rows come back in the order of ``selected``. An op
    a worker does not register the same way (one defined at run time, e.g. by a test) is checked here, and so is
    every op left without a row when a worker process ends abruptly (killed, or the machine forked under it:
    the pool is then broken), with a warning naming them."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    rows: dict[str, CoverageRow] = {}

    def keep(op, row) -> None:
        rows[op.name] = row or _checked_quietly(op, parity_absent, torch, order2, export)
        if progress is not None:
            progress(len(rows), len(selected), op)

    context = multiprocessing.get_context("spawn")
    try:
        with ProcessPoolExecutor(
            max_workers=jobs, mp_context=context, initializer=_worker_imports, initargs=(imports,)
        ) as pool:
            futures = {
                pool.submit(_worker_check, op.name, _origin(op), parity_absent, torch, order2, export): op
                for op in selected
            }
            for future in as_completed(futures):
                keep(futures[future], future.result())
    except BrokenProcessPool:
        left = [op for op in selected if op.name not in rows]
        warnings.warn(
            f"coverage: a worker process ended abruptly; {len(left)} op(s) without a row are checked here, one at a "
            f"time: {', '.join(op.name for op in left)}",
            RuntimeWarning,
            stacklevel=2,
        )
        for op in left:
            keep(op, None)
    return [rows[op.name] for op in selected]


def _origin(op) -> tuple:
    """Where an op's forward comes from: a worker checks an op only when its own registration matches."""
    forward = op.forward
    return (op.family, op.input_names, getattr(forward, "__module__", None), getattr(forward, "__qualname__", None))


def _worker_imports(imports) -> None:
    """A worker's set-up: the op library, and one BLAS / OpenMP thread -- the workers are the parallelism; on a
    2-core machine two workers each running 2-thread GEMMs (numpy's and torch's) stall one another."""
    import importlib
    import os

    import threadpoolctl

    os.environ["OMP_NUM_THREADS"] = "1"  # read by torch when the oracle first imports it, in this worker
    importlib.import_module("ops")
    threadpoolctl.threadpool_limits(1)  # numpy's BLAS, loaded with ops; kept for the worker's life
    for module in imports:
        importlib.import_module(module)


def _worker_check(name, origin, parity_absent, torch, order2, export) -> CoverageRow | None:
    """The row of op ``name`` in a worker, or None when the worker's registry has no such op (or another one)."""
    from ..registry import registered_ops

    op = next((op for op in registered_ops() if op.name == name), None)
    if op is None or _origin(op) != origin:
        return None
    return _checked_quietly(op, parity_absent, torch, order2, export)


def check_op(
    op, parity_absent: Cell | None = None, torch: bool = True, order2: bool = True, export: bool = True
) -> CoverageRow:
    """Measure one op on its own samples. ``parity_absent`` replaces the parity check when given."""
    start = time.perf_counter()
    check = _OpCheck(op)
    forward = check.forward()  # first: the samples whose forward raises are not reported again below
    row = CoverageRow(
        op=op.name,
        family=op.family,
        inputs=op.input_names,
        forward=forward,
        backward=_backward_cell(op),
        gradcheck=check.gradcheck(),
        parity=parity_absent or check.parity(),
        order2=check.order2(torch) if order2 else Cell(ABSENT, "skipped"),
        export=check.export() if export else Cell(ABSENT, "skipped"),
        export_backward=check.export_backward() if export else Cell(ABSENT, "skipped"),
        notes=_notes(op, check.samples, check.outputs),
        problems=check.problem_lines(),
    )
    row.seconds = time.perf_counter() - start
    return row


def _backward_cell(op) -> Cell:
    if op.stubbed_inputs:
        return Cell(FAIL, f"stub: {', '.join(op.stubbed_inputs)}")
    if not op.differentiable_inputs:
        return Cell(ABSENT, "not differentiable")
    return Cell(PASS, ", ".join(op.differentiable_inputs))


class _OpCheck:
    """Runs one op's forward, gradcheck and parity on its samples and collects what went wrong."""

    def __init__(self, op):
        self.op = op
        self.outputs: set[str] = set()  # dtype names of the forward's outputs
        self.broken: set[int] = set()  # samples whose forward raised: their other failures are not repeated
        self.problems: dict[tuple[str, str], list[str]] = {}  # (check, message) -> the samples showing it
        try:
            self.samples = verify.op_samples(op)
            self.sample_error = None
        except Exception as e:  # a broken sample generator is a failure of the op's declaration
            self.samples, self.sample_error = [], f"{type(e).__name__}: {e}"
            self.problem("samples", f"the generator raised {self.sample_error}")
        if op.stubbed_inputs:
            self.problem("backward", f"stub for input(s) {', '.join(op.stubbed_inputs)}")

    def problem(self, check: str, message: str, index: int | None = None) -> None:
        where = self.problems.setdefault((check, message), [])
        if index is not None:
            label = self.samples[index].label
            where.append(f"{index}" + (f" ({label})" if label else ""))

    def problem_lines(self) -> list[str]:
        lines = []
        for (check, message), where in self.problems.items():
            samples = f" on sample{'s' if len(where) > 1 else ''} {', '.join(where)}" if where else ""
            lines.append(f"{check}{samples}: {message}")
        return lines

    def forward(self) -> Cell:
        if self.sample_error:
            return Cell(FAIL, f"samples raised {self.sample_error}")
        if not self.samples:
            return Cell(WARN, "no samples")
        first_error = None
        for i, sample in enumerate(self.samples):
            try:
                out = verify.call(self.op, verify.sample_tensors(self.op, sample), sample.attrs)
                self.outputs.add(verify.joined(out).dtype.name)
            except Exception as e:
                self.broken.add(i)
                self.problem("forward", f"{type(e).__name__}: {e}", i)
                first_error = first_error or f"sample {i}: {type(e).__name__}: {e}"
        if self.broken:
            return Cell(FAIL, f"{len(self.broken)}/{len(self.samples)} samples, {first_error}")
        return Cell(PASS)

    def _report(self, check: str, message: str, index: int) -> None:
        """Record a failure unless the forward already failed there or it only says the backward is a stub."""
        if index not in self.broken and not (self.op.stubbed_inputs and "BackwardNotImplementedError" in message):
            self.problem(check, message, index)

    def gradcheck(self) -> Cell:
        op, samples = self.op, self.samples
        if self.sample_error:
            return Cell(FAIL, "samples raised")
        if not op.differentiable_inputs:
            return Cell(ABSENT, "not differentiable")
        if not samples:
            return Cell(WARN, "no samples")
        checked = [i for i, s in enumerate(samples) if verify.differentiable_positions(op, s)]
        if not checked:
            return Cell(WARN, "no sample with a differentiable input")
        failed = []
        for i in checked:
            result = verify.run_gradcheck(op, samples[i])
            if not result.ok:
                failed.append(result)
                self._report("gradcheck", result.message, i)
        if not failed:
            return Cell(PASS, f"{len(checked)} samples")
        worst = max(r.error for r in failed)
        if np.isfinite(worst):
            return Cell(FAIL, f"{len(failed)}/{len(checked)} samples, worst error {worst:.3g}")
        return Cell(FAIL, f"{len(failed)}/{len(checked)} samples: {failed[0].message.split(':')[0]}")

    def parity(self) -> Cell:
        op, samples = self.op, self.samples
        if op.torch_ref is None:
            return Cell(ABSENT, "no counterpart")
        if self.sample_error:
            return Cell(FAIL, "samples raised")
        compared = [i for i, s in enumerate(samples) if s.torch]
        if not compared:
            return Cell(WARN, "no sample torch supports" if samples else "no samples")
        failed = set()
        for i in compared:
            for dtype in PARITY_DTYPES:
                try:
                    result = verify.run_torch_parity(op, samples[i], dtype)
                except Exception as e:  # the reference itself (or our backward) raised
                    result = verify.CheckResult(False, float("inf"), f"{type(e).__name__}: {e}")
                if result is not None and not result.ok:
                    failed.add(i)
                    self._report(f"torch parity ({np.dtype(dtype).name})", result.message, i)
        of = f" of {len(samples)}" if len(compared) < len(samples) else ""
        if failed:
            return Cell(FAIL, f"{len(failed)}/{len(compared)} samples{of}")
        return Cell(PASS, f"{len(compared)} samples{of}")

    def order2(self, torch: bool) -> Cell:
        op, samples = self.op, self.samples
        if op.second_order is Grad.NOT_DIFFERENTIABLE:
            return Cell(ABSENT, "not differentiable")
        if op.second_order is Grad.STUB:
            return Cell(FAIL, f"stub: {op.second_order_note}" if op.second_order_note else "stub")
        if self.sample_error:
            return Cell(FAIL, "samples raised")
        checked = [i for i, s in enumerate(samples) if verify.differentiable_positions(op, s) and i not in self.broken]
        if not checked:
            return Cell(WARN, "no sample with a differentiable input")
        failed = set()
        compared = 0
        for i in checked:
            result = verify.run_gradgradcheck(op, samples[i], full_up_to=ORDER2_FULL_UP_TO)
            if not result.ok:
                failed.add(i)
                self._report("gradgradcheck", result.message, i)
            if torch:
                try:
                    parity = verify.run_torch_hvp_parity(op, samples[i])
                except Exception as e:  # the reference itself raised
                    parity = verify.CheckResult(False, float("inf"), f"{type(e).__name__}: {e}")
                if parity is not None:
                    compared += 1
                    if not parity.ok:
                        failed.add(i)
                        self._report("torch HVP parity", parity.message, i)
        hvp = f", torch HVP {compared}" if compared else ""
        if failed:
            return Cell(FAIL, f"{len(failed)}/{len(checked)} samples")
        return Cell(PASS, f"{len(checked)} samples{hvp}")

    def export(self) -> Cell:
        """Export each sample (float32 and float64), each edge-value sample (tape/tools/edges.py: NaN, +-inf,
        +-0, huge, subnormal, division by zero, empty) and each sample in every integer dtype and bool, run it
        in ONNX Runtime, compare with the forward. Only an op that declares a lowering is measured (and can
        fail); a case the forward itself refuses is not counted; a float64 one ONNX Runtime has no kernel for,
        or one the lowering refuses with its reason, is counted in the text, not failed."""
        from ..onnx import check_sample, edge_difference, lowering_of, not_exportable_reason

        if not_exportable_reason(self.op) is not None:
            return Cell(ABSENT, f"{NOT_EXPORTABLE}: {not_exportable_reason(self.op)}")
        if lowering_of(self.op) is None:  # tests/tools/test_onnx.py fails for a registered op of the library like this
            return Cell(ABSENT, "no lowering declared")
        if not _onnxruntime_available():
            return Cell(ABSENT, "onnxruntime not installed")
        if not [i for i in range(len(self.samples)) if i not in self.broken]:
            return Cell(WARN, "no samples")
        counts = {group: {"equal": 0, "total": 0} for group in ("samples", "edges", "dtypes")}
        refused = no_kernel = failed = 0
        for group, sample, dtype, scale in edges.export_cases(self.op):
            status, detail = _export_status(check_sample, self.op, sample, dtype, scale=scale)
            if status == "forward refuses":
                continue
            counts[group]["total"] += 1
            if status == "equal":
                counts[group]["equal"] += 1
            elif status == "not exportable":
                refused += 1
            elif status == "no kernel" and edges.dtype_of(sample, dtype) == np.float64:
                no_kernel += 1
            elif group == "edges" and edge_difference(self.op) is not None:
                pass  # the declared difference (the cell says so)
            else:
                failed += 1
                self.problem("export", f"{group}, {edges.dtype_of(sample, dtype).name}, {sample.label}: {detail}")
        c = counts
        declared = edge_difference(self.op)
        if declared is not None and c["edges"]["equal"] == c["edges"]["total"]:
            self.problem("export", f"edge_difference is declared but every edge case agrees: remove it ({declared})")
            return Cell(FAIL, f"declared edge difference no longer shows: {declared}")
        extra = f", {refused} refused" if refused else ""
        extra += f", {no_kernel} no f64 kernel" if no_kernel else ""
        extra += f", edges {c['edges']['equal']}/{c['edges']['total']}"
        extra += f", int/bool {c['dtypes']['equal']}/{c['dtypes']['total']}" if c["dtypes"]["total"] else ""
        total = sum(g["total"] for g in c.values())
        if failed:
            return Cell(FAIL, f"{failed}/{total} differ{extra}")
        if declared is not None:
            return Cell(
                WARN, f"differs at edge values: {declared}; {c['samples']['equal']}/{c['samples']['total']}{extra}"
            )
        return Cell(PASS, f"{c['samples']['equal']}/{c['samples']['total']}{extra}")

    def export_backward(self) -> Cell:
        """Export the gradients of each sample (float64 and float32) as a training graph -- what
        ``tape.compile(backend="onnxruntime")`` runs -- run it in ONNX Runtime and compare with the reverse pass
        (``tape.onnx.check_sample_gradients``). A gradient that differs fails; a backward the export refuses (a
        rule recording an op without a lowering, or reading the data's values) is counted with the first reason,
        and warns when it is every case: compile runs the numpy plan there (exact, warned)."""
        from ..onnx import check_sample_gradients, lowering_of, not_exportable_reason

        if not_exportable_reason(self.op) is not None or lowering_of(self.op) is None:
            return Cell(ABSENT, "no forward lowering")
        if not self.op.differentiable_inputs:
            return Cell(ABSENT, "not differentiable")
        if not _onnxruntime_available():
            return Cell(ABSENT, "onnxruntime not installed")
        equal = total = no_kernel = failed = 0
        refusals: list[str] = []
        for i, sample in enumerate(self.samples):
            if i in self.broken:
                continue
            for dtype in PARITY_DTYPES:
                status, detail = _export_status(check_sample_gradients, self.op, sample, dtype)
                if status in ("not differentiable", "forward refuses"):
                    continue
                total += 1
                if status == "equal":
                    equal += 1
                elif status == "not exportable":
                    refusals.append(_refusal(detail))
                elif status == "no kernel" and dtype == np.float64:
                    no_kernel += 1
                else:
                    failed += 1
                    self.problem("ONNX backward", f"{np.dtype(dtype).name}, {sample.label}: {detail}", i)
        if not total:
            return Cell(WARN, "no sample with a gradient")
        refused = f", {len(refusals)} refused ({refusals[0]})" if refusals else ""
        refused += f", {no_kernel} no f64 kernel" if no_kernel else ""
        if failed:
            return Cell(FAIL, f"{failed}/{total} differ{refused}")
        if not equal:
            return Cell(WARN, f"0/{total}{refused}")
        return Cell(PASS, f"{equal}/{total}{refused}")


def _export_status(check, *args, **kwargs) -> tuple[str, str]:
    """``check(*args, **kwargs)`` (tape.onnx's ``check_sample`` or ``check_sample_gradients``), a crash counted as
    a difference: a lowering that crashes is a failure of the lowering."""
    try:
        return check(*args, **kwargs)
    except Exception as e:
        return "differs", f"{type(e).__name__}: {e}"


def _refusal(message: str) -> str:
    """A refused export's reason in a few words: the op without a lowering and why, or that a rule reads values."""
    import re

    named = re.search(r"op '(\w+)' is not exportable to ONNX: ([^;(]*)", message)
    if named:
        return f"{named.group(1)}: {named.group(2).strip()}"
    baked = re.search(r"op '(\w+)' bakes values", message)
    if baked:
        return f"{baked.group(1)} bakes input values"
    if "reads the values of" in message:
        return "a rule reads input values"
    if "lowered again at other input" in message:
        return "the call fails at other input values"
    return message.split(";")[0][:60]


def _notes(op, samples, outputs) -> str:
    """Why inputs are not differentiable, what the output is when it is not a float, the op's own notes."""
    not_differentiable: dict[str, list[str]] = {}  # "bool " -> ["mask"]: inputs sharing a description
    for i, (name, state) in enumerate(zip(op.input_names, op.input_states)):
        if state != Grad.NOT_DIFFERENTIABLE:
            continue
        kinds = sorted(
            {
                np.asarray(s.inputs[i]).dtype.name
                for s in samples
                if i < len(s.inputs) and s.inputs[i] is not None and np.asarray(s.inputs[i]).dtype.kind != "f"
            }
        )
        not_differentiable.setdefault("/".join(kinds) + " " if kinds else "", []).append(name)
    parts = [f"{', '.join(names)}: {kind}not differentiable" for kind, names in not_differentiable.items()]
    kinds = sorted(o for o in outputs if not o.startswith("float"))
    if kinds:
        parts.append(f"output: {'/'.join(kinds)}")
    if op.gradcheck_tolerance:
        parts.append("gradcheck " + ", ".join(f"{k}={v}" for k, v in sorted(op.gradcheck_tolerance.items())))
    if op.notes:
        parts.append(op.notes)
    return "; ".join(parts)


def _onnxruntime_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnx") is not None and importlib.util.find_spec("onnxruntime") is not None


# -- reading the rows ---------------------------------------------------------------------------------------
def failures(rows, order: int = 1) -> list[str]:
    """One entry per failing op: its name, then every problem measured, one per indented line. With
    ``order=2`` second-order stubs count as failures too."""
    out = []
    for row in rows:
        if row.failed:
            out.append(
                f"{row.op}:\n" + "\n".join("    " + p.replace("\n", "\n      ") for p in row.problems or ["failed"])
            )
        elif order >= 2 and row.order2_stub:
            out.append(f"{row.op}:\n    second order: {row.order2.text}")
    return out


def summary(rows) -> dict[str, Cell]:
    """Counts per column: ``text`` is e.g. '71/72, 1 stub' (71 of 72 pass), ``status`` fail if any failed."""
    cells = {}
    for column in COLUMNS:
        statuses = [getattr(row, column).status for row in rows]
        count = {s: statuses.count(s) for s in SYMBOLS}
        text = f"{count[PASS]}/{len(rows)}"
        if column == "order2":
            stubs = sum(row.order2_stub for row in rows)
            if stubs:
                text += f", {stubs} stub"
            if count[FAIL] - stubs:
                text += f", {count[FAIL] - stubs} ❌"
        elif count[FAIL]:
            text += f", {count[FAIL]} {'stub' if column == 'backward' else '❌'}"
        if count[WARN]:
            text += f", {count[WARN]} ⚠"
        refused = sum(getattr(row, column).text.startswith(NOT_EXPORTABLE) for row in rows) if column == "export" else 0
        if refused:
            text += f", {refused} {NOT_EXPORTABLE}"
        if count[ABSENT] - refused:
            text += f", {count[ABSENT] - refused} —"
        cells[column] = Cell(FAIL if count[FAIL] else PASS, text)
    return cells


def _summary_cells(rows) -> list[str]:
    totals = summary(rows)
    families = len({row.family for row in rows})
    return (
        [f"{len(rows)} ops", f"{families} {'family' if families == 1 else 'families'}"]
        + [f"{SYMBOLS[PASS]} {totals[c].text}" for c in COLUMNS]
        + [""]
    )  # ✅ labels the count of passes


# -- rendering ---------------------------------------------------------------------------------------------
def render(rows, format: str = "table", *, seconds: float | None = None, torch: bool = True) -> str:
    """The matrix as ``table`` (terminal), ``markdown`` (docs) or ``json`` (tools)."""
    if format == "table":
        return _table(rows, seconds)
    if format == "markdown":
        return _markdown(rows, torch)
    if format == "json":
        return _json(rows, seconds)
    raise ValueError(f"render: format must be one of {', '.join(FORMATS)}, got {format!r}")


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _clip(text: str, limit: int | None) -> str:
    text = " ".join(text.split())
    if limit is None or _width(text) <= limit:
        return text
    while _width(text) > limit - 1:
        text = text[:-1]
    return text + "…"


def _table(rows, seconds) -> str:
    limits = (None, None, 36, 28, 36, 24, 28, 28, 28, 48)
    lines = [list(HEADINGS)] + [[_clip(c, m) for c, m in zip(row.cells(), limits)] for row in rows]
    lines.append(_summary_cells(rows))
    widths = [max(_width(line[k]) for line in lines) for k in range(len(HEADINGS))]

    def fmt(cells):
        return "  ".join(c + " " * (w - _width(c)) for c, w in zip(cells, widths)).rstrip()

    rule = "  ".join("─" * w for w in widths)
    out = [fmt(lines[0]), rule] + [fmt(line) for line in lines[1:-1]] + [rule, fmt(lines[-1])]
    if seconds is not None:
        out.append(f"checked {len(rows)} ops in {seconds:.1f} s")
    return "\n".join(out) + "\n"


def _md_escape(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def markdown_header(torch: bool = True) -> str:
    if torch and verify.torch_available():
        version = verify._torch.__version__.split("+")[0]
        parity = (
            f"PyTorch parity compares forward values and input gradients with torch {version} in float64 "
            f"(rtol 1e-7) and float32 (rtol 1e-4)"
        )
    else:
        parity = "PyTorch parity was not run"
    return (
        "# Op coverage matrix\n\n"
        "Generated by `python -m tape coverage --format markdown --output docs/coverage.md`; do not edit by "
        "hand (`tests/tools/test_coverage.py` fails when it is out of date). Every verdict is measured when the "
        "command runs, on each op's own samples: the forward runs on every sample; the backward is "
        "registered for every differentiable input (❌ names stubbed inputs); gradcheck compares the reverse "
        "pass with float64 central finite differences; " + parity + "; 2nd order runs gradgradcheck (float64 "
        "finite differences of the create_graph backward: entry by entry on samples of at most "
        f"{ORDER2_FULL_UP_TO} input entries, along random directions on larger ones, as PyTorch's fast mode) "
        "and compares Hessian-vector products with torch "
        "where torch double-differentiates the op (❌ stub: the second order raises when reached); ONNX export "
        "exports each sample with the op's declared lowering (tape.onnx), runs it in ONNX Runtime and compares "
        "with the forward in float32 (rtol 1e-5) and float64 (rtol 1e-10; refused: the lowering names what it "
        "cannot express; no f64 kernel: ONNX Runtime has none), then the same at the op tests' edge values "
        "(tape/tools/edges.py: NaN, ±inf, ±0, huge, subnormal, division by zero, empty inputs; NaN and the "
        "infinities exactly where the forward has them) and with the samples in every integer dtype and bool "
        '("edges", "int/bool": cases agreeing / cases the forward takes); ⚠ differs at edge values: the '
        "lowering declares where and why ONNX Runtime's kernel differs there; — not exportable: the op declares "
        "why ONNX cannot express it (counted apart); ONNX backward exports each sample's gradients (loss = the sum "
        "of each output times fixed random weights, gradients in every floating input the op differentiates) as "
        'the training graph `tape.compile(backend="onnxruntime")` runs, in float64 and float32, runs it in ONNX '
        "Runtime and compares the loss and gradients with the reverse pass (rtol 1e-10 / 1e-5 of each one's "
        "largest entry); refused: the backward records an op the export refuses, or a rule reads the data's "
        "values (compile runs the exact numpy plan there, with a warning naming it), ⚠ when every case is. "
        "✅ passed, ❌ failed, ⚠ nothing to check (or a declared edge difference), — not applicable.\n"
    )


def _markdown(rows, torch) -> str:
    lines = [markdown_header(torch), "| " + " | ".join(HEADINGS) + " |", "|" + "---|" * len(HEADINGS)]
    for row in rows:
        lines.append("| " + " | ".join(_md_escape(c) for c in row.cells()) + " |")
    lines.append("| " + " | ".join(f"**{c}**" if c else "" for c in _summary_cells(rows)) + " |")
    return "\n".join(lines) + "\n"


def _json(rows, seconds) -> str:
    def cell(c: Cell) -> dict:
        return {"status": c.status, "text": c.text}

    document = {
        "torch": verify._torch.__version__ if verify.torch_available() else None,
        "seconds": seconds,
        "rows": [
            {
                **{k: v for k, v in asdict(row).items() if k not in COLUMNS},
                "inputs": list(row.inputs),
                **{c: cell(getattr(row, c)) for c in COLUMNS},
                "failed": row.failed,
                "order2_stub": row.order2_stub,
            }
            for row in rows
        ],
        "summary": {c: cell(v) for c, v in summary(rows).items()},
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def parse_markdown_table(text: str) -> list[list[str]]:
    """The cells of the first markdown table in ``text`` (header and delimiter rows dropped)."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip().replace("\\|", "|") for c in _split_cells(line.strip("|"))]
        rows.append(cells)
    return [r for r in rows[2:]] if len(rows) >= 2 else []


def _split_cells(line: str) -> list[str]:
    cells, current, escaped = [], "", False
    for ch in line:
        if ch == "|" and not escaped:
            cells.append(current)
            current = ""
        else:
            current += ch
        escaped = ch == "\\" and not escaped
    cells.append(current)
    return cells
