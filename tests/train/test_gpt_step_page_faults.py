"""The tiny GPT training step of benchmarks/bench_train_step.py does not fault its memory in again every step
(issue #22's target: at most 500 minor page faults per eager step; it took ~1,150 while every step's large arrays
were fresh allocations that glibc's malloc returned to the OS). Run in a fresh process, one BLAS thread: malloc's
state there is the step's own, not that of the tests run before."""

import json
import os
import subprocess
import sys

from paths import REPO

SCRIPT = """
import json, resource, sys
sys.path.insert(0, {benchmarks!r})
import bench_train_step
step = bench_train_step.minitape_step()
for _ in range(5):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print(json.dumps((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20))
"""


def test_the_gpt_step_takes_at_most_500_minor_page_faults():
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(benchmarks=str(REPO / "benchmarks"))],
        env=env, capture_output=True, text=True, timeout=600, check=True,
    )
    faults = json.loads(done.stdout.strip().splitlines()[-1])
    assert faults <= 500, faults
