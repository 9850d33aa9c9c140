"""minitape's command line: ``python -m tape <command>`` (or the ``minitape`` console script).

Commands:
  coverage   the op coverage matrix, measured live (forward, backward, gradcheck, torch parity, second order);
             ``--check`` makes it a CI gate (exit 1 when an op has a stub or fails a check; ``--check-order 2``
             also fails on second-order stubs)
  ops        list the registered ops: name, family, tensor inputs and the backward state of each
  export     an example's trained checkpoint as an ONNX model (``python -m tape export examples/reverse.py
             reverse.npz -o reverse.onnx --dynamic-batch``), through the example's ``exported(state)`` hook

Exit status: 0 ok, 1 a check failed, 2 usage error. New commands add a subparser in ``build_parser``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

from ..registry import registered_ops
from . import coverage

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tape", description="minitape: a small, exact autodiff engine.")
    commands = parser.add_subparsers(dest="command", metavar="<command>")
    _add_coverage_command(commands)

    listing = commands.add_parser(
        "ops",
        help="list the registered ops and the backward state of their inputs",
        description="List the registered ops: name, family, tensor inputs, backward.",
    )
    listing.add_argument("--family", nargs="+", metavar="F", help="only the ops of these families")
    _add_import_option(listing)
    listing.set_defaults(run=_ops_command, parser=listing)

    export = commands.add_parser(
        "export",
        help="write an example's trained checkpoint as an ONNX model",
        description="Rebuild an example's model (its exported(state) hook), load the checkpoint into it and "
        "write it with tape.onnx.export: parameters as named initializers, named inputs and outputs.",
    )
    export.add_argument("example", metavar="EXAMPLE.py", help="the example that trained the checkpoint")
    export.add_argument("checkpoint", metavar="CHECKPOINT", help="the .npz its --save wrote")
    export.add_argument("--output", "-o", metavar="FILE", required=True, help="the .onnx file to write")
    export.add_argument(
        "--dynamic-batch", action="store_true", help="leave axis 0 of every input and output free (any batch size)"
    )
    export.add_argument("--opset", type=int, default=23, help="the ONNX opset (default 23)")
    _add_import_option(export)
    export.set_defaults(run=_export_command, parser=export)
    return parser


def _add_coverage_command(commands) -> None:
    """``python -m tape coverage``: its options."""
    cov = commands.add_parser(
        "coverage",
        help="the op coverage matrix, measured now (forward, backward, gradcheck, torch parity)",
        description="Check every registered op on its own samples -- forward, registered backward, float64 "
        "finite-difference gradcheck, PyTorch parity -- and print one row per op.",
    )
    cov.add_argument(
        "--format",
        choices=coverage.FORMATS,
        default="table",
        help="table for terminals (default), markdown for docs, json for tools",
    )
    cov.add_argument("--ops", nargs="+", metavar="NAME", help="only these ops")
    cov.add_argument("--family", nargs="+", metavar="F", help="only the ops of these families")
    cov.add_argument("--no-torch", action="store_true", help="skip the torch parity column")
    cov.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if any op has a stub backward or fails a measured check (forward, gradcheck, parity, "
        "gradgradcheck, torch HVP parity); second-order stubs are listed and counted",
    )
    cov.add_argument(
        "--check-order",
        type=int,
        choices=(1, 2),
        default=None,
        metavar="N",
        help="like --check; with 2, second-order stubs fail the check too",
    )
    cov.add_argument("--no-order2", action="store_true", help="skip the second-order column (faster)")
    cov.add_argument("--no-export", action="store_true", help="skip the ONNX export column (faster)")
    cov.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="check ops in N worker processes (default: the number of CPUs; 1 checks in this process)",
    )
    cov.add_argument("--output", "-o", metavar="FILE", help="write the matrix to FILE instead of stdout")
    _add_import_option(cov)
    cov.set_defaults(run=_coverage_command, parser=cov)


def _add_import_option(parser) -> None:
    parser.add_argument(
        "--import",
        dest="modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first, so the ops it registers are included (repeatable)",
    )


def main(argv=None) -> int:
    """Run a command; returns the exit status (argparse's own exits are returned, not raised)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        for module in args.modules:
            try:
                importlib.import_module(module)
            except ImportError as e:
                args.parser.error(f"--import {module}: {e}")
        return args.run(args, args.parser)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else 2
    except BrokenPipeError:  # the reader went away (e.g. `| head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


# -- coverage ----------------------------------------------------------------------------------------------
def _coverage_command(args, parser) -> int:
    try:
        coverage.select_ops(args.ops, args.family)
    except ValueError as e:
        parser.error(str(e))
    _ensure_utf8(sys.stdout)
    start = time.perf_counter()
    with _Progress(sys.stderr) as progress:
        rows = coverage.coverage_rows(
            args.ops,
            args.family,
            torch=not args.no_torch,
            progress=progress,
            order2=not args.no_order2,
            jobs=max(1, args.jobs),
            imports=args.modules,
            export=not args.no_export,
        )
    seconds = time.perf_counter() - start
    text = coverage.render(rows, args.format, seconds=seconds, torch=not args.no_torch)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {args.output} ({len(rows)} ops, {seconds:.1f} s)", file=sys.stderr)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    order = args.check_order or (1 if args.check else 0)
    if not order:
        return 0
    if not args.no_torch and not coverage.verify.torch_available():
        # a parity column nobody could fill is not a pass: skip it only when asked to, explicitly
        if os.environ.get("MINITAPE_ALLOW_NO_TORCH") != "1":
            print(
                "coverage check FAILED: torch is not installed, so torch parity could not be checked; install "
                "the test extras (pip install -e '.[test]'), or pass --no-torch (or set "
                "MINITAPE_ALLOW_NO_TORCH=1) to check without it",
                file=sys.stderr,
            )
            return 1
        print("coverage check: torch is not installed, so torch parity was not checked", file=sys.stderr)
    failed = coverage.failures(rows, order)
    stubs = [row.op for row in rows if row.order2_stub]
    if stubs and order < 2:
        print(
            f"coverage check: {len(stubs)} second-order stub(s), listed in the 2nd order column "
            f"(--check-order 2 fails on them): {', '.join(stubs)}",
            file=sys.stderr,
        )
    if failed:
        print(f"coverage check FAILED for {len(failed)} of {len(rows)} ops:", file=sys.stderr)
        for entry in failed:
            print(f"  {entry}", file=sys.stderr)
        return 1
    print(f"coverage check passed: {len(rows)} ops", file=sys.stderr)
    return 0


class _Progress:
    """A one-line progress bar on a terminal (rewritten in place); silent when the stream is piped."""

    def __init__(self, stream):
        self.stream = stream
        self.active = hasattr(stream, "isatty") and stream.isatty()

    def __enter__(self):
        return self

    def __call__(self, done: int, total: int, op) -> None:
        if not self.active:
            return
        filled = 30 * done // max(total, 1)
        where = f"{op.family}: {op.name}" if op is not None else "done"
        self.stream.write(f"\r\033[Kcoverage [{'#' * filled}{'.' * (30 - filled)}] {done}/{total} {where}")
        self.stream.flush()

    def __exit__(self, *exc):
        if self.active:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _ensure_utf8(stream) -> None:
    """The matrix uses ✅/❌: switch a stream whose encoding cannot write them to UTF-8."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        "✅❌⚠—".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8")


# -- ops ---------------------------------------------------------------------------------------------------
def _ops_command(args, parser) -> int:
    try:
        selected = coverage.select_ops(family=args.family)
    except ValueError as e:
        parser.error(str(e))
    _ensure_utf8(sys.stdout)
    lines = [("op", "family", "inputs", "backward")]
    for op in selected:
        inputs = ", ".join(name + ("?" if optional else "") for name, optional in zip(op.input_names, op.optional))
        states = ", ".join(f"{name}: {state.value}" for name, state in zip(op.input_names, op.input_states))
        lines.append((op.name, op.family, inputs, states + (" (joint)" if op.joint_vjp is not None else "")))
    widths = [max(len(line[k]) for line in lines) for k in range(3)]
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line[:3], widths)) + "  " + line[3])
    stubs = sum(1 for op in selected if op.stubbed_inputs)
    families = len({op.family for op in selected})
    print(
        f"{len(selected)} ops, {families} {'family' if families == 1 else 'families'}, {stubs} with a stub "
        f"backward ({len(registered_ops())} registered)"
    )
    return 0


# -- export --------------------------------------------------------------------------------------------------
def _example_module(path: str, parser: argparse.ArgumentParser):
    """The example file at ``path`` imported as a module (its directory on sys.path, for its ``common``)."""
    import importlib.util

    if not os.path.isfile(path):
        parser.error(f"argument EXAMPLE.py: no such file: {path}")
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        parser.error(f"argument EXAMPLE.py: {path} is not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "exported", None)):
        parser.error(
            f"argument EXAMPLE.py: {path} defines no exported(state) hook; expected a function returning "
            "(model, example_inputs, input_names, output_names)"
        )
    return module


def _export_command(args, parser) -> int:
    from .. import onnx
    from ..train import checkpoint

    module = _example_module(args.example, parser)
    state = checkpoint.read(args.checkpoint).model
    model, inputs, input_names, output_names = module.exported(state)
    model.load_state_dict(state)
    model.eval()
    axes = {name: {0: "batch"} for name in [*input_names, *output_names]} if args.dynamic_batch else None
    written = onnx.export(
        model,
        inputs,
        args.output,
        opset=args.opset,
        input_names=input_names,
        output_names=output_names,
        dynamic_axes=axes,
    )
    batch = "dynamic" if args.dynamic_batch else f"fixed at {len(inputs[0])}"
    print(
        f"{args.output}: {len(written.graph.node)} nodes, {len(written.graph.initializer)} initializers; "
        f"inputs {', '.join(input_names)} -> outputs {', '.join(output_names)} (batch {batch})"
    )
    return 0
