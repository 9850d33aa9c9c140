"""What ``import tape.torch as torch`` costs beyond ``import tape``: each import in a fresh child process,
alternating, medians of ``--rounds`` (issue #32: under 50 ms).
Run: ``PYTHONPATH=. python benchmarks/bench_import.py``."""

import argparse
import statistics
import subprocess
import sys
import time

STATEMENTS = {
    "import tape": "import tape",
    "import tape.torch as torch": "import tape.torch as torch",
    "torch + nn + optim + first op": "import tape.torch as torch, tape.torch.nn, tape.torch.optim; torch.exp",
}


def seconds(statement: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    times: dict[str, list[float]] = {name: [] for name in STATEMENTS}
    for _ in range(rounds):
        for name, statement in STATEMENTS.items():
            times[name].append(seconds(statement))
    medians = {name: 1000 * statistics.median(t) for name, t in times.items()}
    for name, ms in medians.items():
        print(f"{name:32s} {ms:7.1f} ms")
    extra = medians["import tape.torch as torch"] - medians["import tape"]
    print(f"tape.torch beyond tape: {extra:+.1f} ms (median of {rounds} fresh processes each)")


if __name__ == "__main__":
    main()
