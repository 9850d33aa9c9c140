"""The benchmark harness: every figure in benchmarks/ is measured here, the same way.

Each benchmark script only declares its workloads (a ``Workload``: a name and a function building one
zero-argument *step* for a framework, "minitape" or "torch"). The harness owns everything else:

- **Isolation.** Every (workload, framework, round) runs in its own fresh child process:
  ``python <script> --worker FRAMEWORK WORKLOAD``. torch is never imported by the parent nor by a minitape
  child (a minitape child that ends with torch loaded is an error): in one process torch's OpenMP threads
  contend with numpy's OpenBLAS threads and ``import torch`` changes how glibc's allocator behaves.
- **Alternation.** Rounds alternate minitape, torch, minitape, torch, ... (``--rounds``, default 3), so a
  load spike on this shared machine hits both sides.
- **Equal threads.** Both children get the same thread count (default: the cores this process may use):
  OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS are set in the child's environment and the torch
  child calls ``torch.set_num_threads``. Each child reports what it really got: threadpoolctl's view in the
  minitape child, ``torch.get_num_threads()`` (and threadpoolctl's view) in the torch child.
- **Timing.** A child builds the step (inputs, model: not timed), runs ``warmup`` untimed steps, then
  ``reps`` timed steps (``time.perf_counter`` around each; minor page faults counted around them all), and
  prints its samples as one JSON line. torch inputs live in torch's own memory (``torch.tensor``, never
  ``torch.from_numpy``: on numpy's 16-byte aligned buffers torch's GEMM ran 1.5x slower on this machine).
- **Other load.** The machine is shared. Before each child the parent waits (``--idle-wait``) until other
  processes leave the CPUs at most 20% busy; while the child runs it measures the other processes' share of
  the CPUs (/proc/stat busy time minus the child's own CPU time). A child during which that share exceeded
  25% is run again (``--redo`` times at most, the same rule for both sides); the report marks rows where
  it still happened. Both figures are in the JSON for every child.
- **Memory** (workloads with ``memory_warmup``): before any timing, the child pays one-time costs on a tiny
  problem, builds the real inputs, resets the kernel's resident-set high-water mark
  (``echo 5 > /proc/self/clear_refs``) and runs one step: VmHWM - VmRSS(before) is the *extra peak RSS* of
  that step, measured the same way for both frameworks. The minitape child also reports tracemalloc's peak
  for a second, fresh step (numpy reports its array allocations to tracemalloc; torch's do not go there).
- **Statistics.** Per side: the *median* of all timed repetitions of all rounds pooled, and as *spread* the
  lowest and highest per-round median (how much a fresh process varies). The ratio is
  minitape median / torch median. Raw samples (seconds) are kept in the JSON.

``render_markdown(results)`` turns the JSON document into the markdown of docs/speed.md; it depends on
nothing but its argument, so docs/speed.md can be checked against docs/speed.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import _targets

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python benchmarks/x.py` from a checkout: use that checkout's minitape
    sys.path.insert(0, str(ROOT))

FRAMEWORKS = ("minitape", "torch")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
SLOW_BLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")  # can slow numpy's BLAS: reported when set
KERNEL_VARIABLES = SLOW_BLAS_VARIABLES + ("NPY_DISABLE_CPU_FEATURES", "ATEN_CPU_CAPABILITY")  # the kernel choice
RESULT_MARK = "@@minitape-bench@@ "
FORMAT = "minitape-speed/1"
MiB = 2.0**20
CONTENDED = 0.25  # other processes' share of the CPUs during a child above which it is redone / marked
WAIT_BUDGET = 20  # total idle waiting of a run: at most this many times the per-child --idle-wait


@dataclass(frozen=True)
class Workload:
    """One thing to time. ``build(framework)`` does all the setup and returns a zero-argument step."""

    name: str  # unique id: the worker's command line, the JSON, ``--only``
    label: str  # what the table calls it
    build: Callable[[str], Callable[[], object]]
    reps: int = 10  # timed steps per child (``--quick``: at most 3)
    warmup: int = 2  # untimed steps per child first (``--quick``: 1)
    per: int = 1  # report time / per (the overhead chain reports per op)
    unit: str = "ms"  # "ms" or "µs/op" (with ``per`` ops per step)
    flops: float | None = None  # FLOPs of one step: the report adds GFLOP/s
    peak: str | None = None  # name of the GEMM workload whose GFLOP/s is "the peak" for this one
    memory_warmup: Callable[[str], Callable[[], object]] | None = None  # tiny step: measure memory when set
    minitape_is: str = "minitape"  # what the minitape child really runs (the GEMM reference runs numpy)


# --------------------------------------------------------------------------------------------- child


def _proc_status(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _extra_peak_rss(step) -> dict:
    """Run ``step`` once; how far the resident set's high-water mark rose above the resident set before it.
    Where /proc/self/clear_refs cannot be written, falls back to the growth of ru_maxrss (a lower bound)."""
    import resource

    def maxrss():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    before = _proc_status("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")  # reset VmHWM to the current resident set
        method, high_water = "VmHWM after clear_refs", lambda: _proc_status("VmHWM")
    except OSError:
        method, high_water, before = "ru_maxrss", maxrss, max(before, maxrss())
    step()
    return {"rss_extra_peak_mib": round(max(high_water() - before, 0) / MiB, 2), "rss_method": method}


def _tracemalloc_peak(step) -> float:
    import tracemalloc

    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    step()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return round((peak - base) / MiB, 2)


def _measure_memory(workload: Workload, framework: str) -> dict:
    import gc

    workload.memory_warmup(framework)()  # thread pools, lazy initialisation: not part of the figure
    step = workload.build(framework)
    memory = _extra_peak_rss(step)
    del step
    gc.collect()
    if framework == "minitape":
        step = workload.build(framework)
        memory["tracemalloc_peak_mib"] = _tracemalloc_peak(step)
        del step
        gc.collect()
    return memory


def _threadpools() -> list[dict] | str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl is not installed"
    keys = ("user_api", "internal_api", "version", "num_threads", "threading_layer", "architecture")
    return [{k: pool.get(k) for k in keys} | {"library": os.path.basename(pool.get("filepath", ""))}
            for pool in threadpool_info()]


def _simd(framework: str) -> str:
    """The vector kernels this child's framework dispatches to: numpy's highest CPU feature groups, torch's
    ATen capability (both follow NPY_DISABLE_CPU_FEATURES / ATEN_CPU_CAPABILITY)."""
    if framework == "torch":
        import torch

        return f"ATen {torch.backends.cpu.get_cpu_capability()}"
    import numpy as np

    found = np.show_config(mode="dicts").get("SIMD Extensions", {}).get("found", [])
    return "numpy " + (", ".join(found[-3:]) or "baseline only")


def _worker(workload: Workload, framework: str, reps: int, warmup: int, threads: int, profile: bool) -> None:
    import numpy as np

    report = {"framework": framework, "workload": workload.name, "numpy": np.__version__,
              "python": platform.python_version()}
    if framework == "torch":
        import torch

        torch.set_num_threads(threads)
        report["torch"] = torch.__version__
    memory = _measure_memory(workload, framework) if workload.memory_warmup else None
    step = workload.build(framework)
    for _ in range(warmup):
        step()
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(reps):
            step()
        profiler.disable()
        print(f"cProfile of {reps} {framework} steps of {workload.label} (top 30 by internal time):")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(30)
        return
    import resource

    samples = []
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(reps):
        start = time.perf_counter()
        step()
        samples.append(time.perf_counter() - start)
    report["minor_faults_per_step"] = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / reps
    report["samples_s"] = samples
    report["memory"] = memory
    report["threadpools"] = _threadpools()
    if framework == "torch":
        import torch

        report["torch_threads"] = {"get_num_threads": torch.get_num_threads(),
                                   "get_num_interop_threads": torch.get_num_interop_threads()}
    report["torch_loaded"] = "torch" in sys.modules
    report["env"] = {name: os.environ.get(name) for name in THREAD_VARIABLES + KERNEL_VARIABLES}
    report["simd"] = _simd(framework)
    print(RESULT_MARK + json.dumps(report), flush=True)


# -------------------------------------------------------------------------------------------- parent


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _child_command(script, framework, workload, reps, warmup, threads, quick, profile=False) -> list[str]:
    command = [sys.executable, str(script), "--worker", framework, workload.name, "--reps", str(reps),
               "--warmup", str(warmup), "--threads", str(threads)]
    return command + (["--quick"] if quick else []) + (["--profile"] if profile else [])


def _child_env(threads: int) -> dict:
    env = dict(os.environ)
    env.update({name: str(threads) for name in THREAD_VARIABLES})
    return env


def _cpu_times() -> tuple[int, int]:
    """All CPUs' (total, busy) time so far, in clock ticks, from /proc/stat."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:9]]  # user .. steal (guest time is within user)
    return sum(values), sum(values) - values[3] - values[4]  # minus idle and iowait


def _cpu_busy(interval: float = 0.5) -> float:
    """Fraction of all CPUs' time spent busy over ``interval`` seconds (the parent itself sleeps meanwhile)."""
    (total0, busy0), _, (total1, busy1) = _cpu_times(), time.sleep(interval), _cpu_times()
    return (busy1 - busy0) / max(total1 - total0, 1)


def _children_cpu_seconds() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _wait_for_idle(limit: float | None, threshold: float = 0.2, log=sys.stderr) -> dict:
    """Wait (at most ``limit`` seconds) until other processes keep the CPUs at most ``threshold`` busy."""
    start = time.monotonic()
    busy = _cpu_busy() if limit is not None else None  # None: no waiting, no sampling
    while busy is not None and busy > threshold and time.monotonic() - start < limit:
        time.sleep(2.0)
        busy = _cpu_busy()
    waited = time.monotonic() - start
    if busy is not None and busy > threshold and limit > 0:
        print(f"  (CPUs still {busy:.0%} busy after waiting {waited:.0f} s: starting anyway)", file=log, flush=True)
    return {"cpu_busy_before": None if busy is None else round(busy, 3), "waited_s": round(waited, 1)}


def _run_child(script, framework, workload, reps, warmup, threads, quick, retries=2, log=sys.stderr) -> dict:
    """One child's report. A failing child is retried after a pause (someone may be editing the engine)."""
    command = _child_command(script, framework, workload, reps, warmup, threads, quick)
    for attempt in range(retries + 1):
        (total0, busy0), child0 = _cpu_times(), _children_cpu_seconds()
        done = subprocess.run(command, capture_output=True, text=True, env=_child_env(threads), cwd=ROOT)
        (total1, busy1), child1 = _cpu_times(), _children_cpu_seconds()
        lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARK)]
        if done.returncode == 0 and lines:
            break
        failure = (f"benchmark child failed ({done.returncode}): {shlex.join(command)}\n"
                   f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        if attempt == retries:
            raise RuntimeError(failure)
        print(failure.splitlines()[0] + f"\n  {done.stderr.strip().splitlines()[-1:]}\n  retrying in 60 s",
              file=log, flush=True)
        time.sleep(60)
    report = json.loads(lines[-1][len(RESULT_MARK):])
    # the CPU time other processes took while the child ran (all of its life, imports included), as a
    # fraction of all CPUs' time: busy ticks minus the child's own CPU time
    ticks = os.sysconf("SC_CLK_TCK")
    others = (busy1 - busy0 - (child1 - child0) * ticks) / max(total1 - total0, 1)
    report["others_busy_during"] = round(min(max(others, 0.0), 1.0), 3)
    if framework == "minitape" and report["torch_loaded"]:
        raise RuntimeError(f"the minitape child of {workload.name} imported torch: its figures are not isolated")
    return report


def _median_of(values):
    return statistics.median(values) if values else None


def summarize(result: dict) -> dict:
    """Add each side's median, spread and best (in the workload's unit) and the ratio, from the raw samples."""
    scale = (1e6 if result["unit"] == "µs/op" else 1e3) / result["per"]
    for side in result["sides"].values():
        pooled = [s for r in side["rounds"] for s in r["samples_s"]]
        round_medians = [statistics.median(r["samples_s"]) for r in side["rounds"]]
        side["median"] = statistics.median(pooled) * scale
        side["spread"] = [min(round_medians) * scale, max(round_medians) * scale]
        side["best"] = min(pooled) * scale
        if result["flops"]:
            side["gflops"] = result["flops"] / statistics.median(pooled) / 1e9
        side["minor_faults_per_step"] = statistics.median(r["minor_faults_per_step"] for r in side["rounds"])
        memories = [r["memory"] for r in side["rounds"] if r.get("memory")]
        if memories:
            side["memory"] = {key: sorted(m[key] for m in memories) for key in memories[0] if key.endswith("_mib")}
    sides = result["sides"]
    if "minitape" in sides and "torch" in sides:
        result["ratio"] = sides["minitape"]["median"] / sides["torch"]["median"]
    return result


def run_workloads(jobs, rounds: int, threads: int, quick: bool = False, reps: int | None = None,
                  idle_wait: float = 0.0, redo: int = 0, log=sys.stderr) -> list[dict]:
    """Time ``jobs`` (pairs (script, Workload)): per workload, ``rounds`` rounds of minitape then torch, each
    in a fresh child started once the CPUs are idle (waiting at most ``idle_wait`` s per child and
    WAIT_BUDGET times that in all). A child during which other processes took more than CONTENDED of the
    CPUs is run again, up to ``redo`` times (the same rule for both sides; the discarded runs' loads are kept
    in the JSON). One summarized result per workload."""
    results = []
    wait_budget = WAIT_BUDGET * idle_wait
    for script, workload in jobs:
        n = reps or (min(workload.reps, 3) if quick else workload.reps)
        warmup = 1 if quick else workload.warmup
        sides = {framework: {"rounds": []} for framework in FRAMEWORKS}
        for _ in range(rounds):
            for framework in FRAMEWORKS:  # A B A B ...
                discarded = []
                while True:
                    idle = _wait_for_idle(max(min(idle_wait, wait_budget), 0) if idle_wait > 0 else None, log=log)
                    wait_budget -= idle["waited_s"]
                    report = _run_child(script, framework, workload, n, warmup, threads, quick, log=log)
                    if report["others_busy_during"] <= CONTENDED or len(discarded) >= redo:
                        break
                    discarded.append(report["others_busy_during"])
                    print(f"  ({framework} child of {workload.name}: other processes took "
                          f"{report['others_busy_during']:.0%} of the CPUs meanwhile; running it again)",
                          file=log, flush=True)
                sides[framework]["rounds"].append(report | idle | {"discarded_others_busy": discarded})
        result = summarize({"name": workload.name, "label": workload.label, "unit": workload.unit,
                            "per": workload.per, "flops": workload.flops, "peak": workload.peak,
                            "minitape_is": workload.minitape_is, "reps": n, "warmup": warmup, "sides": sides})
        results.append(result)
        m, t = sides["minitape"], sides["torch"]
        print(f"{workload.label}: minitape {_cell(m, workload.unit)}, torch {_cell(t, workload.unit)}, "
              f"ratio {result['ratio']:.2f}", file=log, flush=True)
    if "torch" in sys.modules:
        raise RuntimeError("the benchmark parent imported torch")
    return results


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def document(results: list[dict], command: str, rounds: int, threads: int, quick: bool, started: float,
             load_before) -> dict:
    """The JSON document: settings, machine, and the results."""
    first = {framework: results[0]["sides"][framework]["rounds"][0] for framework in FRAMEWORKS} if results else {}
    machine = {"cpu": _cpu_model(), "cores": os.cpu_count(), "usable_cores": default_threads(),
               "python": platform.python_version(), "numpy": first.get("minitape", {}).get("numpy"),
               "torch": first.get("torch", {}).get("torch"),
               "minitape_threadpools": first.get("minitape", {}).get("threadpools"),
               "torch_threadpools": first.get("torch", {}).get("threadpools"),
               "torch_threads": first.get("torch", {}).get("torch_threads"),
               "child_env": first.get("minitape", {}).get("env"),
               "simd": {framework: first.get(framework, {}).get("simd") for framework in FRAMEWORKS},
               "load_average_before": load_before, "load_average_after": _loadavg()}
    return {"format": FORMAT, "command": command, "quick": quick, "rounds": rounds, "threads": threads,
            "started_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
            "wall_seconds": round(time.time() - started), "machine": machine, "results": results}


# ----------------------------------------------------------------------------------------- rendering


def _num(value: float) -> str:
    """Three significant digits, never in exponent form: 401, 49.2, 4.41, 0.253."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def _cell(side: dict, unit: str) -> str:
    lo, hi = side["spread"]
    return f"{_num(side['median'])} {unit} [{_num(lo)}–{_num(hi)}]"


def _rounds(result: dict) -> list[dict]:
    return [r for side in result["sides"].values() for r in side["rounds"]]


def _contended(result: dict, threshold: float) -> bool:
    return any(r.get("others_busy_during", 0) > threshold for r in _rounds(result))


def _load_lines(doc: dict) -> list[str]:
    lines = []
    busy = sorted(r["cpu_busy_before"] for result in doc["results"] for r in _rounds(result)
                  if r.get("cpu_busy_before") is not None)
    if doc.get("idle_wait_s") and busy:
        lines.append(f"- Before each child the parent waited (at most {doc['idle_wait_s']:g} s, "
                     f"{doc.get('wait_budget', 10) * doc['idle_wait_s']:g} s in all) for other processes to leave the "
                     f"CPUs at most 20% busy; busy fraction (sampled over 0.5 s) when the children started: median "
                     f"{statistics.median(busy):.0%}, highest {busy[-1]:.0%}.")
    else:
        lines.append("- The children started without waiting for idle CPUs.")
    others = sorted(r["others_busy_during"] for result in doc["results"] for r in _rounds(result)
                    if r.get("others_busy_during") is not None)
    redone = sum(len(r.get("discarded_others_busy", [])) for result in doc["results"] for r in _rounds(result))
    threshold = doc.get("contended", CONTENDED)
    if others:
        lines.append(f"- Other processes' share of all CPUs while a child ran (from /proc/stat, minus the child's "
                     f"own CPU time): median {statistics.median(others):.0%}, highest {others[-1]:.0%}. "
                     f"A child during which it exceeded {threshold:.0%} was run again, at most {doc.get('redo', 0)} "
                     f"times ({redone} child runs discarded so); † marks a workload where a kept child still "
                     f"exceeded it: on 2 cores that stalls 2-thread BLAS/OpenMP code, so read those rows with care.")
    return lines


def _label(result: dict, threshold: float = CONTENDED) -> str:
    return (result["label"] + (f" ({result['minitape_is']} vs torch)" if result["minitape_is"] != "minitape" else "")
            + (" †" if _contended(result, threshold) else ""))


def _range(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return _num(lo) if _num(lo) == _num(hi) else f"{_num(lo)}–{_num(hi)}"


def _blas(pools) -> str:
    if not isinstance(pools, list):
        return str(pools)
    return "; ".join(f"{p['internal_api']}" + (f" {p['version']}" if p.get("version") else "") + f" ({p['library']}"
                     + (f", {p['architecture']} kernel" if p.get("architecture") else "")
                     + (f", {p['threading_layer']}" if p.get("threading_layer") else "")
                     + f", {p['num_threads']} threads)" for p in pools)


def render_markdown(results_json) -> str:
    """The markdown of docs/speed.md for a JSON document (a dict, or its JSON text). Deterministic."""
    doc = json.loads(results_json) if isinstance(results_json, str) else results_json
    machine, results = doc["machine"], doc["results"]
    threshold = doc.get("contended", CONTENDED)
    by_name = {r["name"]: r for r in results}
    env = machine.get("child_env") or {}
    slow = {k: v for k, v in env.items() if k in KERNEL_VARIABLES and v is not None}
    simd = machine.get("simd") or {}
    torch_threads = machine.get("torch_threads") or {}
    lines = [
        "# Speed: minitape against PyTorch (CPU)",
        "",
        "Generated by `render_markdown` in `benchmarks/_harness.py` from the JSON results of the command below "
        "(`benchmarks/run_all.py` writes them to `docs/speed.json` next to this file); do not edit by hand.",
        "",
        *(["**Quick smoke run: small shapes and few repetitions, not figures to quote.**", ""] if doc["quick"] else []),
        f"- Command (from the repository root): `{doc['command']}`, started {doc['started_utc']}, "
        f"took {doc['wall_seconds']} s; load average before / after: {machine.get('load_average_before')} / "
        f"{machine.get('load_average_after')}",
        f"- Machine: {machine['cpu']}, {machine['cores']} cores ({machine['usable_cores']} usable); "
        f"Python {machine['python']}, numpy {machine['numpy']}, torch {machine['torch']}",
        f"- numpy's BLAS (threadpoolctl in the minitape child): {_blas(machine.get('minitape_threadpools'))}",
        *([f"- Vector kernels: {simd.get('minitape')} (minitape child); {simd.get('torch')} (torch child)"]
          if simd.get("minitape") else []),
        f"- Threads: {doc['threads']} per side; the children ran with "
        + ", ".join(f"{k}={env.get(k)}" for k in THREAD_VARIABLES)
        + f"; the torch child called `torch.set_num_threads({doc['threads']})` and reports "
        f"`torch.get_num_threads()` = {torch_threads.get('get_num_threads')} "
        f"(interop {torch_threads.get('get_num_interop_threads')}); threadpoolctl there: "
        f"{_blas(machine.get('torch_threadpools'))}"
        + (f"; set in the environment: {', '.join(f'{k}={v}' for k, v in sorted(slow.items()))}" if slow else ""),
        f"- Method: each framework runs each workload in its own fresh child process, minitape and torch "
        f"alternating for {doc['rounds']} rounds; a child runs untimed warm-up steps, then timed steps. "
        f"**median** = median of all timed steps of all rounds; **[spread]** = lowest–highest per-round median; "
        f"**ratio** = minitape median / torch median (below 1: minitape is faster). float32 throughout.",
        *_load_lines(doc),
        "",
        "| workload | minitape median [spread] | torch median [spread] | minitape / torch |",
        "|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {_label(r, threshold)} | {_cell(r['sides']['minitape'], r['unit'])} | "
                     f"{_cell(r['sides']['torch'], r['unit'])} | {r['ratio']:.2f} |")
    lines.append("")
    lines.append("Timed steps per child: " + ", ".join(f"{r['name']} {r['reps']} (+{r['warmup']} warm-up)"
                                                         for r in results) + ".")
    lines += _targets.render(by_name)
    with_flops = [r for r in results if r["flops"]]
    if with_flops:
        lines += ["", "## Throughput", "",
                  "GFLOP/s from the medians. SDPA FLOPs: forward 4·B·H·L·S·D + backward 10·B·H·L·S·D, halved when "
                  "causal. \"% of peak\": of the machine's GEMM peak, the faster side's GFLOP/s in the GEMM row named "
                  "(2048³); in parentheses, of the same side's own GEMM in that row (numpy's for minitape).", "",
                  "| workload | minitape GFLOP/s | torch GFLOP/s | minitape % of peak (own GEMM) "
                  "| torch % of peak (own GEMM) |",
                  "|---|---|---|---|---|"]
        for r in with_flops:
            peak = by_name.get(r["peak"]) if r["peak"] else None
            cells = []
            for framework in FRAMEWORKS:
                gflops = r["sides"][framework]["gflops"]
                if peak:
                    best = max(side["gflops"] for side in peak["sides"].values())
                    own = peak["sides"][framework]["gflops"]
                    cells.append(f"{100 * gflops / best:.0f}% ({100 * gflops / own:.0f}%) of {peak['name']}")
                else:
                    cells.append("—")
            lines.append(f"| {_label(r, threshold)} | {_num(r['sides']['minitape']['gflops'])} | "
                         f"{_num(r['sides']['torch']['gflops'])} | {cells[0]} | {cells[1]} |")
    with_memory = [r for r in results if r["sides"]["minitape"].get("memory") or r["sides"]["torch"].get("memory")]
    if with_memory:
        lines += ["", "## Extra peak memory of one forward+backward", "",
                  "Measured in each child before its timed steps, after a tiny warm-up problem: the resident set's "
                  "high-water mark is reset (`/proc/self/clear_refs`), one step runs on inputs already built, and "
                  "VmHWM − VmRSS(before) is the extra peak RSS (the same measure for both; it includes the "
                  "gradients of q, k, v). tracemalloc's peak counts numpy's allocations in minitape (torch's "
                  "allocator does not report to it). MiB, lowest–highest over the rounds.", "",
                  "| workload | minitape extra peak RSS | minitape tracemalloc peak | torch extra peak RSS |",
                  "|---|---|---|---|"]
        for r in with_memory:
            m = r["sides"]["minitape"].get("memory", {})
            t = r["sides"]["torch"].get("memory", {})
            cells = [_range(side[key]) if key in side else "—" for side, key in
                     ((m, "rss_extra_peak_mib"), (m, "tracemalloc_peak_mib"), (t, "rss_extra_peak_mib"))]
            lines.append(f"| {r['label']} | " + " | ".join(cells) + " |")
    lines += ["", "## Minor page faults per timed step", "",
              "From `getrusage` around the timed steps of each child (median over the rounds): memory the kernel had "
              "to map in, a cost of allocating fresh large arrays every step.", "",
              "| workload | minitape | torch |", "|---|---|---|"]
    for r in results:
        m, t = r["sides"]["minitape"], r["sides"]["torch"]
        faults = f"{m['minor_faults_per_step']:.0f} | {t['minor_faults_per_step']:.0f}"
        lines.append(f"| {_label(r, threshold)} | {faults} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ CLI


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=None, help="alternating rounds per workload (default 3; quick 1)")
    p.add_argument("--reps", type=int, default=None, help="timed steps per child (default: the workload's own)")
    p.add_argument("--warmup", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true", help="smoke run: small shapes, 1 round, at most 3 steps per child")
    p.add_argument("--only", default="", help="comma-separated substrings of workload names to run")
    p.add_argument("--threads", type=int, default=None,
                   help=f"threads for each side (default: usable cores, here {default_threads()})")
    p.add_argument("--idle-wait", type=float, default=None, metavar="SECONDS",
                   help=f"before each child, wait up to this long ({WAIT_BUDGET}x this in all) for other processes "
                        "to leave the CPUs at most 20%% busy (default 30; quick 0)")
    p.add_argument("--redo", type=int, default=None, metavar="N",
                   help=f"run a child again (at most N times) when other processes took more than "
                        f"{CONTENDED * 100:.0f}%% of the CPUs while it ran (default 2; quick 0)")
    p.add_argument("--json", metavar="PATH", help="also write the results document (JSON) here")
    p.add_argument("--profile", action="store_true",
                   help="instead of timing: cProfile minitape's steps (in a minitape child) and print the top entries")
    p.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "WORKLOAD"), help=argparse.SUPPRESS)
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    return p


def select(workloads: list[Workload], only: str) -> list[Workload]:
    wanted = [w for w in only.split(",") if w]
    return [w for w in workloads if not wanted or any(s in w.name for s in wanted)]


def command_line(script, argv) -> str:
    return shlex.join(["python", os.path.relpath(os.path.abspath(script), ROOT)] + list(argv))


def main(script: str, workloads: Callable[[bool], list[Workload]], description: str, argv=None) -> dict | None:
    """The command line of a benchmark script: the worker entry, or run its workloads and print the table."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser(description).parse_args(argv)
    threads = args.threads or default_threads()
    if args.worker:
        framework, name = args.worker
        (workload,) = [w for w in workloads(args.quick) if w.name == name]
        _worker(workload, framework, args.reps or workload.reps,
                workload.warmup if args.warmup is None else args.warmup, threads, args.profile)
        return None
    selected = select(workloads(args.quick), args.only)
    if args.list:
        print("\n".join(f"{w.name:<24} {w.label}" for w in selected))
        return None
    if args.profile:
        profile([(script, w) for w in selected], threads, args.quick, args.reps)
        return None
    doc = measure([(script, w) for w in selected], command_line(script, argv), args)
    print(render_markdown(doc))
    if args.json:
        write_json(doc, args.json)
    return doc


def measure(jobs, command: str, args) -> dict:
    """Run ``jobs`` with the settings of parsed ``args``; the JSON document."""
    rounds = args.rounds or (1 if args.quick else 3)
    threads = args.threads or default_threads()
    for name in SLOW_BLAS_VARIABLES:
        if name in os.environ:
            print(f"warning: {name}={os.environ[name]} is set and may slow numpy's BLAS", file=sys.stderr)
    started, load_before = time.time(), _loadavg()
    idle_wait = args.idle_wait if args.idle_wait is not None else (0 if args.quick else 30)
    redo = args.redo if args.redo is not None else (0 if args.quick else 2)
    results = run_workloads(jobs, rounds, threads, quick=args.quick, reps=args.reps, idle_wait=idle_wait, redo=redo)
    doc = document(results, command, rounds, threads, args.quick, started, load_before)
    doc.update(idle_wait_s=idle_wait, wait_budget=WAIT_BUDGET, redo=redo, contended=CONTENDED)
    return doc


def profile(jobs, threads: int, quick: bool, reps: int | None) -> None:
    for script, workload in jobs:
        command = _child_command(script, "minitape", workload, reps or workload.reps, workload.warmup, threads,
                                 quick, profile=True)
        subprocess.run(command, env=_child_env(threads), cwd=ROOT, check=True)


def write_json(doc: dict, path) -> None:
    Path(path).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def scratch_dir() -> Path:
    return Path(tempfile.gettempdir()) / "minitape-speed-quick"
