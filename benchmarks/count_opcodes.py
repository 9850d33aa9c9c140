"""Python opcodes one step executes: a measure of the engine's own work that the machine's load does not move.

Wall-clock A/B on a shared machine is noise for changes of a few percent; the number of Python opcodes a step runs
is exact (``sys.settrace`` with ``f_trace_opcodes``, one step after three warm-up steps). It does not weigh what a
C call costs (numpy's kernels): use it to compare two versions of the engine on the same workload, the harness
(run_all.py) for what a user waits.

Run: python benchmarks/count_opcodes.py [--by-function N]   (the 200-op chain and the tiny GPT step, eager and
compiled; --by-function lists the N functions that run the most opcodes in each)
"""

import argparse
import collections
import os
import sys

import bench_overhead
import bench_train_step

STEPS = {
    "chain200": lambda compiled: bench_overhead.build("minitape", compiled),
    "train-step-gpt": bench_train_step.minitape_step,
}


def count(step) -> collections.Counter:
    """Opcodes of one call of ``step`` by function (file:name)."""
    counts: collections.Counter = collections.Counter()

    def trace(frame, event, arg):
        frame.f_trace_opcodes = True
        if event == "opcode":
            code = frame.f_code
            counts[f"{os.path.basename(code.co_filename)}:{code.co_name}"] += 1
        return trace

    sys.settrace(trace)
    try:
        step()
    finally:
        sys.settrace(None)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--by-function", type=int, default=0, metavar="N")
    args = parser.parse_args()
    for name, build in STEPS.items():
        for compiled in (False, True):
            step = build(compiled)
            for _ in range(3):
                step()
            counts = count(step)
            print(f"{name} {'compiled' if compiled else 'eager'}: {sum(counts.values()):,} opcodes")
            for function, n in counts.most_common(args.by_function):
                print(f"  {n:9,} {function}")


if __name__ == "__main__":
    main()
