#!/usr/bin/python3
"""hyperpipe's training step against the same GPT and trainer in eager PyTorch, side by side.

Each row trains the same model on the same batches twice, in turns: `hyperpipe train`
and bench/eager_gpt.py (Debian's python3-torch, the same LibTorch 1.13 kernels), with
the same OMP_NUM_THREADS. It prints the median step time of each (the first steps,
which allocate, left out), the median and range of the rounds' ratios (each round's two
runs are back to back), and the largest difference of the two loss curves, which must
stay at float32 rounding (a ratio of two different computations means nothing). Issue 16's goal is a ratio of at most 0.8.

  bench/eager_compare.py                      # default and mid sizes, 1 and 2 processes
  bench/eager_compare.py --sizes mid --nproc 1 --rounds 5
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# Debian's libtorch links the reference BLAS unless an optimised one is installed: with it
# a default step is matrix products at a few GFLOP/s, and neither side's overhead shows.
OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-openmp"
SIZES = {
    "default": ["--layers", "8", "--hidden", "64", "--heads", "4", "--seq-len", "32"],
    "mid": ["--layers", "8", "--hidden", "256", "--heads", "4", "--seq-len", "128"],
}


def corpus(path):
    """A byte corpus both sides read with --data text:PATH."""
    rng = random.Random(16)
    words = ("the pipeline stage sends its activations to the next rank while the scheduler keeps every "
             "device busy and the gradients flow back through the same channels").split()
    with open(path, "w") as f:
        for _ in range(40000):
            f.write(" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) + ".\n")


def run(cmd, env, metrics=None):
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit("eager_compare.py: %s failed (exit %d):\n%s" % (" ".join(cmd), out.returncode, out.stderr[-2000:]))
    lines = open(metrics).read().splitlines() if metrics else out.stdout.splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hyperpipe", default=os.path.join(HERE, "..", "build", "bin", "hyperpipe"))
    p.add_argument("--python", default="/usr/bin/python3", help="a Python with torch (Debian: python3-torch)")
    p.add_argument("--sizes", default="default,mid", help="comma-separated: " + ", ".join(SIZES))
    p.add_argument("--nproc", default="1,2", help="1: one process, every micro-batch in turn; 2: 1F1B on two ranks")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--skip", type=int, default=5, help="first steps left out of the median")
    p.add_argument("--rounds", type=int, default=3, help="turns of each side per row")
    p.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS of each rank (0: cores / nproc)")
    p.add_argument("--blas", default=OPENBLAS if os.path.isdir(OPENBLAS) else "",
                   help="a folder with libblas.so.3 that both sides load first (default: Debian's OpenBLAS, "
                        "libopenblas0-openmp, when installed; '' for the system's)")
    a = p.parse_args()
    if a.steps <= a.skip:
        sys.exit("eager_compare.py: --steps %d must exceed --skip %d" % (a.steps, a.skip))
    for s in a.sizes.split(","):
        if s not in SIZES:
            sys.exit("eager_compare.py: --sizes takes %s, got %s" % (", ".join(SIZES), s))

    tmp = tempfile.mkdtemp(prefix="eager_compare.")
    data = os.path.join(tmp, "corpus.txt")
    corpus(data)
    metrics = os.path.join(tmp, "metrics.jsonl")
    print("BLAS: " + (a.blas or "the system's libblas.so.3"))
    print("size      nproc  threads  hyperpipe ms   eager ms   ratio (range)          max |loss diff|")
    worst = 0.0
    for size in a.sizes.split(","):
        for nproc in (int(n) for n in a.nproc.split(",")):
            threads = a.threads or max(1, (os.cpu_count() or 1) // nproc)
            env = dict(os.environ, OMP_NUM_THREADS=str(threads))
            if a.blas:
                env["LD_LIBRARY_PATH"] = a.blas + os.pathsep + env.get("LD_LIBRARY_PATH", "")
            common = SIZES[size] + ["--steps", str(a.steps), "--data", "text:" + data, "--nproc", str(nproc)]
            hp_cmd = [a.hyperpipe, "train", "--schedule", "no-pipelining" if nproc == 1 else "1f1b",
                      "--metrics", metrics, "--log-interval", str(a.steps)] + common
            py_cmd = [a.python, os.path.join(HERE, "eager_gpt.py")] + common
            hp_ms, py_ms, diff = [], [], 0.0
            for _ in range(a.rounds):
                hp = run(hp_cmd, env, metrics)
                py = run(py_cmd, env)
                hp_ms.append(statistics.median(r["step_ms"] for r in hp[a.skip:]))
                py_ms.append(statistics.median(r["step_ms"] for r in py[a.skip:]))
                diff = max([diff] + [abs(x["loss"] - y["loss"]) for x, y in zip(hp, py)])
            # Each round's two runs are back to back: their ratio cancels what load the machine had then.
            ratios = sorted(h / e for h, e in zip(hp_ms, py_ms))
            worst = max(worst, diff)
            print("%-9s %5d %8d %14.2f %10.2f %7.3f (%.3f-%.3f)   %.2e" % (
                size, nproc, threads, statistics.median(hp_ms), statistics.median(py_ms), statistics.median(ratios),
                ratios[0], ratios[-1], diff), flush=True)
    if worst > 1e-3:
        sys.exit("eager_compare.py: the loss curves differ by %.2e: the two sides do not compute the same step" % worst)


if __name__ == "__main__":
    main()
