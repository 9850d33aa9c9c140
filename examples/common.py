"""What the example scripts share: the command-line flags, a progress bar, the loss plot, the graph of one
attention block, and ``TinyGPT`` -- a small decoder-only transformer built from ``tape.nn`` layers.

Nothing here is needed to use minitape; it keeps each example focused on its task and training loop.
"""

from __future__ import annotations

import os
import tempfile

# The examples multiply small matrices (at most 1024 x 256): one BLAS thread does it as fast, and it
# spares OpenBLAS threads from spinning against other processes on a busy machine (we measured 5-10x
# slower training steps with two threads on a loaded 2-core machine). This must run before numpy is
# first imported, so each example imports this module first; an explicit OPENBLAS_NUM_THREADS wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import ops  # noqa: E402
import tape  # noqa: E402
from tape import checkpoint, nn, optim  # noqa: E402

__all__ = ["example_parser", "parse_args", "count", "ProgressBar", "plot_losses", "render_block_graph",
           "save_checkpoint", "Trainer", "TinyGPT", "tinygpt_for_export"]


OUTPUTS = ("save", "plot", "graph", "report")  # the flags naming a file the run writes (after training)
# the environment an MPI launcher gives each rank: the number of ranks (MPICH/Hydra, Open MPI)
MPI_SIZE = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")


def count(minimum: int = 1):
    """An argparse type: an int >= ``minimum`` (a count of steps, rows, tokens...), refused before training."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an int >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an int >= {minimum}, got {value}")
        return value

    return parse


def example_parser(description: str, steps: int, seed: int = 0) -> argparse.ArgumentParser:
    """The flags every example accepts; an example adds its own with ``parser.add_argument``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=count(), default=steps, help=f"training steps (default {steps})")
    parser.add_argument("--seed", type=int, default=seed, help="random seed: data, initial weights, dropout")
    parser.add_argument("--save", metavar="PATH", help="save the trained model's state dict (.npz) here")
    parser.add_argument("--plot", metavar="PNG", help="plot the training loss curve to this file (needs matplotlib)")
    parser.add_argument("--graph", metavar="SVG", help="render one attention block's recorded DAG with Graphviz")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (nor its log lines)")
    parser.add_argument("--compile", nargs="?", const="numpy", default=None, choices=["numpy", "onnxruntime"],
                        help="run the step with tape.compile: numpy (the default: eager's numbers bit for bit, not "
                             "faster) or onnxruntime (the step as one ONNX Runtime graph: eager's within float32 "
                             "1e-5; needs pip install -e '.[onnx]')")
    return parser


def parse_args(parser: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """Parse the flags and check, before any training, that what the chosen outputs need is installed, that each
    output file can be written, and that an MPI launch and ``--distributed`` go together."""
    args = parser.parse_args(argv)
    problems = missing_requirements(args) + unwritable_outputs(args) + launch_mismatch(args)
    if problems:
        parser.error("; ".join(problems))
    return args


def unwritable_outputs(args: argparse.Namespace) -> list[str]:
    """Each output flag whose file could not be written (its directory missing or read-only, or a directory
    given), found before training rather than after it."""
    problems = []
    for flag in OUTPUTS:
        path = getattr(args, flag, None)
        if not path:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            problems.append(f"--{flag} {path}: is a directory, expected a file path")
        elif not os.path.isdir(folder):
            problems.append(f"--{flag} {path}: the directory {folder} does not exist")
        elif not _can_create_in(folder):
            problems.append(f"--{flag} {path}: the directory {folder} is not writable")
    return problems


def _can_create_in(folder: str) -> bool:
    """Whether a file can be made in ``folder``, by making one (removed at once): os.access says yes to root for
    read-only mounts such as /proc, where the write after training then failed."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def launch_mismatch(args: argparse.Namespace) -> list[str]:
    """An MPI launch of several ranks without ``--distributed`` (each rank would train a full copy of its own), or
    ``--distributed`` outside one (it would train on one rank and say nothing)."""
    size = next((int(os.environ[k]) for k in MPI_SIZE if os.environ.get(k, "").isdigit()), None)
    distributed = getattr(args, "distributed", False)
    if distributed and size is None:
        return ["--distributed needs an MPI launch: mpiexec -n N python <example> --distributed"]
    if not distributed and size is not None and size > 1:
        flag = "add --distributed" if hasattr(args, "distributed") else "this example trains in one process"
        return [f"launched by mpiexec on {size} ranks without --distributed: every rank would train its own full "
                f"copy ({flag}, or run it without mpiexec)"]
    return []


def missing_requirements(args: argparse.Namespace) -> list[str]:
    """What ``--graph`` (Graphviz: the ``graphviz`` package and the ``dot`` program) and ``--plot`` (matplotlib)
    need and is not installed, each with its install line."""
    missing = []
    if getattr(args, "graph", None):
        if importlib.util.find_spec("graphviz") is None:
            missing.append("--graph needs the graphviz Python package (pip install -e '.[graph]' in this repository)")
        if shutil.which("dot") is None:
            missing.append("--graph needs Graphviz's `dot` program (apt-get install graphviz, or brew install "
                           "graphviz); `--report run.html` draws the DAG without it")
    if getattr(args, "compile", None) == "onnxruntime" and (
            importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None):
        missing.append("--compile onnxruntime needs onnx and onnxruntime (pip install -e '.[onnx]' in this repository)")
    if getattr(args, "plot", None) and importlib.util.find_spec("matplotlib") is None:
        missing.append("--plot needs matplotlib (pip install matplotlib, or pip install -e '.[plot]' in this "
                       "repository)")
    return missing


def duration(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour on), as the progress bar shows elapsed and remaining time."""
    whole = max(0, int(round(seconds)))
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class ProgressBar:
    """Step, bar, loss (smoothed), throughput, elapsed time and the time left (the mean step time so far times the
    steps left) on stderr: one line rewritten in place on a terminal; written to a file or pipe (a log) it is one
    plain line every ``log_every`` steps (default: 20 lines per run) instead.

    Hand-written rather than tqdm (measured: 0.37 vs 0.35 us per update, both nothing next to a training step): into
    a log tqdm writes carriage-return updates on one line (400 steps of 5 ms: 22 of them, 1 newline), and it would
    be an optional dependency with this bar as its fallback anyway -- two paths for one line of output."""

    def __init__(self, total: int, unit: str = "tok", enabled: bool = True, width: int = 24,
                 log_every: int | None = None, stream=None, clock=time.perf_counter):
        self.total, self.unit, self.enabled, self.width = total, unit, enabled, width
        self.stream = sys.stderr if stream is None else stream
        self.terminal = self.stream.isatty()
        self.log_every = log_every or max(1, total // 20)
        self.clock = clock
        self.start = clock()
        self.items = 0
        self.smoothed = None
        self.last_draw = 0.0

    def update(self, step: int, loss: float, items: int) -> None:
        """Record one finished step (1-based ``step``) that trained on ``items`` units (tokens, sequences, tasks:
        what the step's loss is computed over, not what was drawn)."""
        self.items += items
        self.smoothed = loss if self.smoothed is None else 0.9 * self.smoothed + 0.1 * loss
        now = self.clock()
        if not self.enabled:
            return
        elapsed = max(now - self.start, 1e-9)
        rate, left = self.items / elapsed, elapsed / step * (self.total - step)
        if not self.terminal:
            if step % self.log_every == 0 or step == self.total:
                self.stream.write(f"step {step}/{self.total} loss {self.smoothed:.4f} {rate:,.0f} {self.unit}/s "
                                  f"elapsed {duration(elapsed)} ETA {duration(left)}\n")
                self.stream.flush()
        elif now - self.last_draw > 0.25 or step == self.total:
            self.last_draw = now
            done = int(self.width * step / self.total)
            self.stream.write(f"\rstep {step:>5}/{self.total} [{'#' * done}{'.' * (self.width - done)}] "
                              f"loss {self.smoothed:.4f}  {rate:,.0f} {self.unit}/s  "
                              f"{duration(elapsed)}<{duration(left)} ")
            self.stream.flush()

    def close(self) -> float:
        """End the line (on a terminal); returns the elapsed seconds."""
        if self.enabled and self.terminal:
            self.stream.write("\n")
            self.stream.flush()
        return self.clock() - self.start


class Trainer:
    """One update per call: the loss of a batch and its gradients, clipping, optimizer and schedule step.

    By default every step runs eagerly; ``compiled=True`` (or "numpy") replays it with ``tape.compile`` (the same
    numbers bit for bit; a few percent slower, since a plan does eager's work after re-tracing: docs/compile.md);
    ``compiled="onnxruntime"`` runs a matched plan as one ONNX Runtime graph (eager's numbers within 1e-5 float32).
    ``on_gradients()`` (e.g. ``tape.report.Recorder.gradients``) is called after the backward, before the gradients
    are clipped. ``distributed=True`` (after
    ``tape.distributed.init()``): each rank passes its shard of the batch, the gradients are averaged over the
    ranks before clipping, and the returned loss is the mean over the ranks -- the whole batch's loss."""

    def __init__(self, loss_fn, model: nn.Module, optimizer, schedule, *, compiled: bool | str | None = False,
                 max_grad_norm: float = 1.0, on_gradients=None, distributed: bool = False):
        self.loss_fn, self.model, self.optimizer, self.schedule = loss_fn, model, optimizer, schedule
        self.max_grad_norm = max_grad_norm
        self.on_gradients = on_gradients
        self.distributed = distributed
        self.compiled = tape.compile(loss_fn, model.parameters(), backend=backend(compiled)) if compiled else None

    def __call__(self, *batch) -> float:
        self.optimizer.zero_grad()
        if self.compiled is None:
            loss = self.loss_fn(*batch)
            loss.backward()
        else:
            loss, _ = self.compiled(*batch)
        if self.distributed:
            tape.distributed.allreduce_gradients(self.model)
        if self.on_gradients is not None:
            self.on_gradients()
        optim.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.schedule.step()
        return float(tape.distributed.allreduce(loss.item(), average=True)) if self.distributed else loss.item()


def backend(compiled: bool | str | None) -> str:
    """tape.compile's backend for ``--compile [numpy|onnxruntime]`` (True: numpy)."""
    return "numpy" if compiled is True else str(compiled)


def plot_losses(losses, path: str, title: str) -> None:
    """Plot the per-step loss to ``path`` on a log axis (a linear one hides everything after the first drop).
    Needs matplotlib: ``parse_args`` checks that before training."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(np.arange(1, len(losses) + 1), losses, lw=0.8)
    if np.all(np.asarray(losses) > 0):
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"loss curve written to {path}")


def render_block_graph(block: nn.Module, x, path: str, *, model: nn.Module | None = None, **kwargs) -> str:
    """Run ``block`` once on ``x`` and render the recorded DAG to ``path`` with Graphviz: parameters and module
    outputs named by their paths in ``model`` (default: in ``block``), ops clustered by module, call sites as
    tooltips."""
    with tape.report.Trace(block if model is None else model) as recorded:
        block(x, **kwargs)
    written = recorded.render(path, view=recorded.view())
    print(f"graph of one attention block ({len(recorded)} ops) written to {written}")
    return written


def save_checkpoint(model: nn.Module, path: str, distributed: bool = False) -> None:
    """Save the model's state dict; ``distributed``: called on every rank, rank 0 writes and prints."""
    if not distributed:
        checkpoint.save(model.state_dict(), path)
    elif tape.distributed.save_checkpoint(model.state_dict(), path) and tape.distributed.rank() != 0:
        return
    print(f"checkpoint ({model.num_parameters():,} parameters) written to {os.path.abspath(path)}")


def positions(tokens):
    """0, 1, ..., length - 1 (int64) for (batch, length) tokens, computed with ops from the tokens rather than
    np.arange(tokens.shape[-1]): an exported model then takes any sequence length (tape.onnx refuses a size
    baked from a dynamic axis)."""
    row = tokens[(0,) * (np.ndim(tokens) - 1)] if np.ndim(tokens) > 1 else tokens
    return ops.cumsum(ops.ones_like(row), dim=0) - 1


class TinyGPT(nn.Module):
    """A decoder-only transformer: token + learned position embeddings, ``num_layers`` causal pre-norm
    blocks, a final LayerNorm and a linear head giving next-token logits."""

    def __init__(self, vocab_size: int, context: int, d_model: int = 64, num_heads: int = 4, num_layers: int = 2,
                 mlp_hidden: int | None = None, dropout: float = 0.0, dtype=np.float32, rng=None):
        super().__init__()
        self.context = context
        self.token_embedding = nn.Embedding(vocab_size, d_model, dtype=dtype, rng=rng)
        self.position_embedding = nn.Embedding(context, d_model, dtype=dtype, rng=rng)
        self.blocks = [nn.TransformerBlock(d_model, num_heads, mlp_hidden, causal=True, dropout=dropout, dtype=dtype,
                                           rng=rng) for _ in range(num_layers)]
        self.norm = nn.LayerNorm(d_model, dtype=dtype)
        self.head = nn.Linear(d_model, vocab_size, dtype=dtype, rng=rng)

    def forward(self, tokens):
        """(batch, length) int tokens -> (batch, length, vocab) logits."""
        length = tokens.shape[-1]
        if length > self.context:
            raise ValueError(f"TinyGPT: sequence length {length} exceeds the context {self.context}")
        x = self.token_embedding(tokens) + self.position_embedding(positions(tokens))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    def loss(self, tokens, targets):
        """Mean cross-entropy of the next-token logits; targets equal to -100 are ignored."""
        logits = self(tokens)
        return ops.cross_entropy(ops.reshape(logits, (-1, logits.shape[-1])), ops.reshape(targets, (-1,)))


def tinygpt_for_export(state: dict, num_heads: int = 4):
    """``python -m tape export``'s hook for the TinyGPT examples: the model a checkpoint's state dict fits (its
    sizes read from the arrays' shapes; the examples all use 4 heads), example tokens, the input and output names."""
    vocab, d_model = state["token_embedding.weight"].shape
    context = state["position_embedding.weight"].shape[0]
    layers = len({name.split(".")[1] for name in state if name.startswith("blocks.")})
    hidden = state["blocks.0.mlp.0.weight"].shape[0]
    model = TinyGPT(vocab, context, d_model, num_heads, layers, mlp_hidden=hidden)
    tokens = np.random.default_rng(0).integers(0, vocab, size=(2, context))
    return model, (tokens,), ["tokens"], ["logits"]
