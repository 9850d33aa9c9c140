"""Run every benchmark and write docs/speed.md (the table) and docs/speed.json (the raw results).

Workloads, in this order: the per-op engine overhead (bench_overhead.py), the tiny GPT train step
(bench_train_step.py), both again compiled with ``tape.compile`` (bench_compile.py), the GEMM reference
(bench_gemm.py), SDPA forward+backward (bench_sdpa.py) and the op library (bench_ops.py). Each (workload,
framework, round) runs in its own fresh child process, minitape and torch alternating, with equal thread
settings; see benchmarks/_harness.py for the method. docs/speed.md is exactly
``_harness.render_markdown`` of docs/speed.json.

Run (from the repository root; a full run takes several minutes -- run nothing else heavy meanwhile):
    python benchmarks/run_all.py                 # writes docs/speed.md and docs/speed.json
    python benchmarks/run_all.py --quick         # smoke run: small shapes, 1 round, at most 3 steps per
                                                 # child; writes to a scratch directory unless --out is given
    python benchmarks/run_all.py --only sdpa,gemm --out /tmp/speed
"""

import sys
from pathlib import Path

import _harness
import bench_compile
import bench_gemm
import bench_ops
import bench_overhead
import bench_sdpa
import bench_train_step

MODULES = [bench_overhead, bench_train_step, bench_compile, bench_gemm, bench_sdpa, bench_ops]


def jobs(quick: bool, only: str) -> list:
    """(script, workload) pairs of every module, each workload once (bench_sdpa.py repeats the GEMM peak)."""
    seen, pairs = set(), []
    for module in MODULES:
        for workload in _harness.select(module.workloads(quick), only):
            if workload.name not in seen:
                seen.add(workload.name)
                pairs.append((module.__file__, workload))
    return pairs


def main(argv=None) -> Path | None:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _harness.parser(__doc__.splitlines()[0])
    parser.add_argument("--out", metavar="DIR", help="write speed.md and speed.json here (default: docs/; with "
                                                     "--quick, a scratch directory)")
    args = parser.parse_args(argv)
    selected = jobs(args.quick, args.only)
    if args.list:
        print("\n".join(f"{w.name:<28} {w.label}" for _, w in selected))
        return None
    if args.profile:
        _harness.profile(selected, args.threads or _harness.default_threads(), args.quick, args.reps)
        return None
    doc = _harness.measure(selected, _harness.command_line(__file__, argv), args)
    out = Path(args.out) if args.out else (_harness.scratch_dir() if args.quick else _harness.ROOT / "docs")
    out.mkdir(parents=True, exist_ok=True)
    _harness.write_json(doc, out / "speed.json")
    (out / "speed.md").write_text(_harness.render_markdown(doc))
    if args.json:
        _harness.write_json(doc, args.json)
    print(_harness.render_markdown(doc))
    print(f"wrote {out / 'speed.md'} and {out / 'speed.json'}", file=sys.stderr)
    return out


if __name__ == "__main__":
    main()
