"""The open issues' speed and memory targets, each checked against one run's results: the "Targets" table of
docs/speed.md. A target whose workloads are not in the run (``--only``, ``--quick``) is left out of the table.

Each target is (what the issue asks, the workload names it reads, a function of those results that returns the
figure as text and whether it is met).
"""

from __future__ import annotations

ROW_OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm", "cross_entropy", "gelu", "gelu-tanh", "softmax-gpt",
           "layer_norm-gpt", "gelu-gpt", "gelu-tanh-gpt", "cross_entropy-gpt")
SDPA = ("sdpa-1x8x1024x64", "sdpa-1x8x1024x64-causal", "sdpa-1x4x4096x64", "sdpa-1x4x4096x64-causal")


def _median(result: dict, framework: str = "minitape") -> float:
    return result["sides"][framework]["median"]


def _ratio_at_most(limit: float):
    def check(result):
        return f"{result['ratio']:.2f}", result["ratio"] <= limit
    return check


def _compiled_vs_eager(compiled, eager):
    ratio = _median(compiled) / _median(eager)
    return f"{ratio:.2f} (minitape {_median(compiled):.3g} vs {_median(eager):.3g} ms)", ratio <= 0.7


def _compiled_chain(compiled, floor):
    floor_share = floor["sides"]["minitape"]["median"] / compiled["sides"]["torch"]["median"]
    return (f"{compiled['ratio']:.2f} (the kernels' calls alone, no engine: {floor_share:.2f}x torch)",
            compiled["ratio"] <= 0.25)


def _faults_at_most(limit: float):
    def check(result):
        faults = result["sides"]["minitape"]["minor_faults_per_step"]
        return f"{faults:.0f} (torch {result['sides']['torch']['minor_faults_per_step']:.0f})", faults <= limit
    return check


def _compiled_faults(compiled, eager):
    ours, theirs = (r["sides"]["minitape"]["minor_faults_per_step"] for r in (compiled, eager))
    return f"{ours:.0f} vs eager's {theirs:.0f}", ours <= 0.1 * theirs


def _sdpa(result, batched_gemm):
    """<= 1.1x torch, or >= 85% of numpy's own batched-GEMM rate where that binds."""
    share = result["sides"]["minitape"]["gflops"] / batched_gemm["sides"]["minitape"]["gflops"]
    return f"{result['ratio']:.2f}x torch; {share:.0%} of numpy's batched GEMM", result["ratio"] <= 1.1 or share >= 0.85


def _causal_share(causal, full):
    share = _median(causal) / _median(full)
    return f"{share:.2f} ({_median(causal):.3g} vs {_median(full):.3g} ms)", share <= 0.55


def _peak_memory(result):
    ours, theirs = (max(result["sides"][f].get("memory", {}).get("rss_extra_peak_mib", [float("nan")]))
                    for f in ("minitape", "torch"))
    return f"{ours:.1f} vs {theirs:.1f} MiB", ours <= theirs


def _gemm_ratio_plus(limit_over: float):
    def check(result, gemm):
        return (f"{result['ratio']:.2f} (numpy vs torch GEMM on the same products: {gemm['ratio']:.2f})",
                result["ratio"] <= gemm["ratio"] + limit_over)
    return check


TARGETS = [
    ("#22 tiny GPT train step, eager <= 1.5x torch", ("train-step-gpt",), _ratio_at_most(1.5)),
    ("#18 #22 tiny GPT train step, compiled <= 1.0x torch", ("compiled-train-step-gpt",), _ratio_at_most(1.0)),
    ("#18 tiny GPT train step, compiled <= 0.7x eager", ("compiled-train-step-gpt", "train-step-gpt"),
     _compiled_vs_eager),
    ("#22 minor page faults per eager GPT step <= 500", ("train-step-gpt",), _faults_at_most(500)),
    ("#18 page faults per compiled GPT step <= 10% of eager's", ("compiled-train-step-gpt", "train-step-gpt"),
     _compiled_faults),
    ("#18 200-op chain, eager <= 0.6x torch", ("overhead-chain200",), _ratio_at_most(0.6)),
    ("#18 200-op chain, compiled <= 0.25x torch", ("compiled-chain200", "floor-chain200"), _compiled_chain),
    *((f"#22 {name}: <= 1.1x torch or >= 85% of numpy's batched-GEMM rate", (name, "gemm-batched"), _sdpa)
      for name in SDPA),
    ("#22 SDPA causal <= 0.55x non-causal at 4096", ("sdpa-1x4x4096x64-causal", "sdpa-1x4x4096x64"), _causal_share),
    *((f"#22 {name}: extra peak memory <= torch's", (name,), _peak_memory) for name in SDPA),
    *((f"#22 {name} fwd+bwd <= 1.3x torch", (f"ops-{name}",), _ratio_at_most(1.3)) for name in ROW_OPS),
    ("#22 conv2d fwd+bwd <= 1.5x torch", ("ops-conv2d",), _ratio_at_most(1.5)),
    ("#22 matmul 512x512 <= the numpy-vs-torch GEMM ratio + 0.1", ("ops-matmul-512", "gemm-matmul-512"),
     _gemm_ratio_plus(0.1)),
    ("#22 matmul 32x128x64 @ 64x128 <= the numpy-vs-torch GEMM ratio + 0.1",
     ("ops-matmul-batched", "gemm-matmul-batched"), _gemm_ratio_plus(0.1)),
]


def render(by_name: dict) -> list[str]:
    """The markdown lines of the Targets section (none when the run holds none of the targets' workloads)."""
    rows = []
    for text, names, check in TARGETS:
        if all(name in by_name for name in names):
            figure, met = check(*(by_name[name] for name in names))
            rows.append(f"| {text} | {figure} | {'met' if met else '**not met**'} |")
    if not rows:
        return []
    return ["", "## Targets", "",
            "The open issues' targets (the issue's number first), each from this run's medians above.", "",
            "| target | this run | |", "|---|---|---|", *rows]
