"""The tiny GPT's training graph alone in ONNX Runtime: what ``tape.compile(backend="onnxruntime")`` runs per step,
without the trace of fn's Python, the feeds or Adam.

The graph is bench_train_step.py's step (forward, mean cross-entropy, gradients of every parameter) exported with
``tape.onnx.training_graph`` -- the path the compiled step builds its session from -- and run ``--reps`` times in one
session (intra-op threads: the kernels' rule). Prints the median and spread of the run time, the node count by op
type, and with ``--profile`` ONNX Runtime's own per-node profile (the node types taking the most time). One process:
the figure is for finding where the graph's time goes, not for comparing frameworks (bench_compile.py does that).

Run: python benchmarks/bench_ort_graph.py [--reps 200] [--profile] [--top 15]
"""

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time

import bench_train_step

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))


def build():
    """(the ONNX model, the feeds it runs on) for the tiny GPT's training step."""
    from tape.onnx import training_graph

    model, inputs, targets, fn = bench_train_step.minitape_parts()
    params = list(model.parameters())
    graph, _, _ = training_graph(fn, [inputs, targets], ["inputs", "targets"], params)
    feeds = {"inputs": inputs, "targets": targets}
    names = [i.name for i in graph.graph.input]
    feeds.update({name: p.numpy() for name, p in zip(names[2:], params, strict=True)})
    return graph, feeds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="ONNX Runtime's per-node profile, by node type")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    import onnxruntime as ort

    from ops._kernels import runtime

    model, feeds = build()
    counts = collections.Counter(node.op_type for node in model.graph.node)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = runtime.threads(), 1
    profile_dir = tempfile.mkdtemp() if args.profile else None
    if profile_dir:
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(profile_dir, "gpt")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    for _ in range(10):
        session.run(None, feeds)
    times = []
    for _ in range(args.reps):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    ms = sorted(t * 1e3 for t in times)
    print(f"tiny GPT training graph: {len(model.graph.node)} nodes; ONNX Runtime run {statistics.median(ms):.2f} ms "
          f"median [{ms[len(ms) // 10]:.2f}-{ms[-len(ms) // 10 - 1]:.2f} p10-p90] over {args.reps} runs, "
          f"{runtime.threads()} intra-op threads")
    print("nodes by type: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    if profile_dir:
        events = json.load(open(session.end_profiling()))
        by_type = collections.defaultdict(float)
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                by_type[e["args"]["op_name"]] += e["dur"] / (args.reps + 10) / 1e3
        total = sum(by_type.values())
        print(f"kernel time per run by node type (ms; {total:.2f} in all):")
        for name, value in sorted(by_type.items(), key=lambda kv: -kv[1])[: args.top]:
            print(f"  {name:24s} {value:7.3f}  ({counts[name]} nodes)")


if __name__ == "__main__":
    main()
