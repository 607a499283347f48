"""What the PyTorch anchors (torch_gpt.py, torch_llama.py) share: their command line, their threads and clock,
how a call is timed, and the line they print.

    python3 torch_<block>.py train|sample <shape...> [--cpu-time] [--seconds S]

--cpu-time: one thread (torch.set_num_threads(1), and OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1 set before torch
loads, or Debian's OpenBLAS keeps spinning threads of its own that count as CPU time), timed by time.process_time,
this process's CPU time. Without it: 2 threads, timed by time.perf_counter. S: seconds of timed calls (default 5).
"""
import os
import sys
import time


class Options:
    def __init__(self, shape_names, defaults):
        argv = sys.argv[1:]
        self.cpu_time = "--cpu-time" in argv
        self.seconds = 5.0
        if "--seconds" in argv:
            at = argv.index("--seconds")
            self.seconds = float(argv[at + 1])
            del argv[at : at + 2]
        words = [a for a in argv if not a.startswith("--")]
        self.mode = words[0] if words else "train"
        if self.mode not in ("train", "sample"):
            sys.exit(f"mode must be train or sample; got {self.mode!r}")
        numbers = words[1:]
        if numbers and len(numbers) != len(shape_names):
            sys.exit(f"the shape is {' '.join(shape_names)} ({len(shape_names)} numbers); got {len(numbers)}")
        self.shape = dict(zip(shape_names, [int(x) for x in numbers] if numbers else defaults))
        self.clock = time.process_time if self.cpu_time else time.perf_counter


def options(shape_names, defaults):
    """Reads the command line and, before torch is imported, limits the native thread pools for --cpu-time."""
    opts = Options(shape_names, defaults)
    if opts.cpu_time:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1 if opts.cpu_time else 2)
    return opts


def timed(opts, fn, tokens_per_call, warmup=2):
    """Calls per second and tokens per second of `fn`: warm-up calls, then as many as fit in opts.seconds."""
    for _ in range(warmup):
        fn()
    calls, start = 0, opts.clock()
    while opts.clock() - start < opts.seconds or calls < 2:
        fn()
        calls += 1
    elapsed = opts.clock() - start
    return calls / elapsed, calls * tokens_per_call / elapsed


def report(opts, block, params, calls_per_s, tokens_per_s):
    """The one line bench/lib/torch-anchor.ts reads (params= and tokens/s=)."""
    import torch

    shape = " ".join(f"{k}={v}" for k, v in opts.shape.items())
    print(
        f"torch {torch.__version__} {block} mode={opts.mode} threads={torch.get_num_threads()} cpu_time={int(opts.cpu_time)} "
        f"{shape} params={params} calls/s={calls_per_s:.3f} tokens/s={tokens_per_s:.0f}"
    )
