"""Minor page faults per step of a training loop run in a fresh Python process: there malloc's state is the loop's
own, not that of the tests run before (glibc's trim and mmap thresholds follow the sizes freed earlier)."""

import json
import os
import subprocess
import sys

from paths import REPO

_MEASURE = """
import json, resource
for _ in range({warmup}):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range({steps}):
    step()
print(json.dumps((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / {steps}))
"""


def faults_per_step(setup: str, *argv: str, warmup: int = 3, steps: int = 10, pinned_malloc: bool = False) -> float:
    """Run ``setup`` (Python source defining ``step()``; ``sys.argv[1:]`` is ``argv``) in a fresh process with one
    BLAS thread (no BLAS crossover measured at first use), call ``step`` ``warmup`` times, and return the minor
    page faults per call over the next ``steps`` calls. ``pinned_malloc`` fixes glibc's thresholds (trim the heap
    top past 128 KiB free, mmap nothing below 32 MiB) instead of letting them follow the sizes freed before."""
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if pinned_malloc:
        env.update(MALLOC_TRIM_THRESHOLD_="131072", MALLOC_MMAP_THRESHOLD_="33554432")
    script = setup + _MEASURE.format(warmup=warmup, steps=steps)
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], env=env, capture_output=True, text=True, timeout=600, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])
