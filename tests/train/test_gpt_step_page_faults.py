"""The tiny GPT training step of benchmarks/bench_train_step.py does not fault its memory in again every step
(issue #22's target: at most 500 minor page faults per eager step; it took ~1,150 while every step's large arrays
were fresh allocations that glibc's malloc returned to the OS). Run in a fresh process, one BLAS thread: malloc's
state there is the step's own, not that of the tests run before."""

from page_faults import faults_per_step
from paths import REPO

SETUP = """
import sys
sys.path.insert(0, {benchmarks!r})
import bench_train_step
step = bench_train_step.minitape_step()
"""


def test_the_gpt_step_takes_at_most_500_minor_page_faults():
    faults = faults_per_step(SETUP.format(benchmarks=str(REPO / "benchmarks")), warmup=5, steps=20)
    assert faults <= 500, faults
