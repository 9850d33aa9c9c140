"""The compiled tape (``tape.compile``) against torch eager: the tiny GPT train step and the 200-op chain.

The workloads are bench_train_step.py's tiny GPT step (zero_grad + forward + mean cross-entropy + backward + Adam
+ ``loss.item()``) and bench_overhead.py's 200-op elementwise chain, with minitape's side compiled: the step is
recorded once (during the warm-up, which also verifies the plan against a second recording) and then replayed
as a flat plan. torch runs the same code eagerly. Compare with the eager rows of those two scripts (run_all.py
runs all of them in one report).

Each side runs in its own child process, alternating rounds, with equal thread settings;
benchmarks/_harness.py does the timing and the statistics (median of all timed steps; spread =
lowest-highest per-round median).

The ``compiled-ort`` rows compile with ``backend="onnxruntime"``: the plan's forward, loss and gradients run as one
ONNX Runtime graph (intra-op threads: the kernels' rule, numpy's BLAS threads).

Run: python benchmarks/bench_compile.py [--rounds 3] [--reps N] [--quick] [--only chain]
     python benchmarks/bench_compile.py --profile     # cProfile's top entries for the compiled steps
"""

import _harness
import bench_overhead
import bench_train_step


def _gpt(framework):
    return bench_train_step.minitape_step(compiled=True) if framework == "minitape" else bench_train_step.torch_step()


def _chain(framework):
    return bench_overhead.build(framework, compiled=True)


def _gpt_ort(framework):
    if framework == "minitape":
        return bench_train_step.minitape_step(compiled=True, backend="onnxruntime")
    return bench_train_step.torch_step()


def _chain_ort(framework):
    return bench_overhead.build(framework, compiled=True, backend="onnxruntime")


def workloads(quick=False):
    gpt = bench_train_step.workloads(quick)[0]  # the plain step (the second is its keep_freed_memory twin)
    chain = bench_overhead.workloads(quick)[0]  # the eager chain (the second is its no-autodiff floor)
    return [
        _harness.Workload("compiled-train-step-gpt", gpt.label.replace("train step", "train step, compiled"), _gpt,
                          reps=gpt.reps, warmup=gpt.warmup),
        _harness.Workload("compiled-chain200", chain.label.replace("eager", "compiled"), _chain, reps=chain.reps,
                          warmup=chain.warmup, per=chain.per, unit=chain.unit),
        _harness.Workload("compiled-ort-train-step-gpt",
                          gpt.label.replace("train step", "train step, compiled with ONNX Runtime"), _gpt_ort,
                          reps=gpt.reps, warmup=gpt.warmup),
        _harness.Workload("compiled-ort-chain200", chain.label.replace("eager", "compiled with ONNX Runtime"),
                          _chain_ort, reps=chain.reps, warmup=chain.warmup, per=chain.per, unit=chain.unit),
    ]


if __name__ == "__main__":
    _harness.main(__file__, workloads, __doc__)
