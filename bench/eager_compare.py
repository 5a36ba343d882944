#!/usr/bin/python3
"""hyperpipe's training step against the same GPT and trainer in eager PyTorch, side by side.

Each row trains the same model on the same batches twice, in turns: `hyperpipe train`
and bench/eager_gpt.py (Debian's python3-torch, the same LibTorch 1.13 kernels), with
the same OMP_NUM_THREADS. It prints the median step time of each (the first steps,
which allocate, left out), the median and range of the rounds' ratios (each round's two
runs are back to back), and the largest difference of the two loss curves, which must
stay at float32 rounding (a ratio of two different computations means nothing). Issue 16's goal is a ratio of at most 0.8.

Where each side's time goes: both run with bench/sgemm_timer.c preloaded (built here with cc),
which times every matrix product where it runs; "(products)" after each step time is the
median step's share of them (the busiest rank's with 2 processes), and the rest of the step is
everything else: the other kernels, LibTorch's dispatch and autograd, and the runtime.
"floor" is hyperpipe's products over eager's step: the ratio a runtime that spent no time of
its own beside these products would get.

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


def sgemm_timer(tmp):
    """bench/sgemm_timer.c built into tmp, or None (and a note) where no C compiler builds it."""
    lib = os.path.join(tmp, "libsgemm_timer.so")
    out = subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, os.path.join(HERE, "sgemm_timer.c"), "-ldl", "-lpthread"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if out.returncode != 0:
        print("note: bench/sgemm_timer.c did not build (%s): no products column" % out.stdout.strip()[-200:])
        return None
    return lib


def covered_ms(calls):
    """Milliseconds covered by at least one of the (start, end) intervals in ns: calls made at
    once from several threads count once."""
    total, reach = 0, None
    for start, end in sorted(calls):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total / 1e6


def products_per_step(prefix, steps, skip):
    """The median over steps skip.. of the products' ms per step, for the busiest process that
    sgemm_timer wrote under prefix (its files are removed); None when no process wrote, or one
    did not make the same calls each step."""
    folder, name = os.path.split(prefix)
    per_process = []
    for f in sorted(os.listdir(folder)):
        if f.startswith(name + "."):
            with open(os.path.join(folder, f)) as lines:
                per_process.append([tuple(int(t) for t in line.split()) for line in lines])
            os.remove(os.path.join(folder, f))
    busiest = None
    for calls in per_process:
        n = len(calls) // steps
        if n * steps != len(calls):
            return None
        ms = statistics.median(covered_ms(calls[s * n:(s + 1) * n]) for s in range(skip, steps))
        busiest = ms if busiest is None else max(busiest, ms)
    return busiest


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
    timer = sgemm_timer(tmp)
    print("BLAS: " + (a.blas or "the system's libblas.so.3"))
    print("size    nproc threads  hyperpipe ms (products)   eager ms (products)  ratio (range)        "
          "floor  max |loss diff|")
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
            timed = dict(env, LD_PRELOAD=timer, SGEMM_TIMER_OUT=os.path.join(tmp, "sgemm")) if timer else env
            ms = {"hp": [], "py": [], "hp products": [], "py products": []}
            diff = 0.0

            def record(side, steps):
                ms[side].append(statistics.median(r["step_ms"] for r in steps[a.skip:]))
                if timer:
                    ms[side + " products"].append(products_per_step(timed["SGEMM_TIMER_OUT"], a.steps, a.skip))
                return steps
            for _ in range(a.rounds):
                hp = record("hp", run(hp_cmd, timed, metrics))
                py = record("py", run(py_cmd, timed))
                diff = max([diff] + [abs(x["loss"] - y["loss"]) for x, y in zip(hp, py)])
            # Each round's runs are back to back: their ratio cancels what load the machine had then.
            ratios = sorted(h / e for h, e in zip(ms["hp"], ms["py"]))
            floors = [h / e for h, e in zip(ms["hp products"], ms["py"]) if h is not None]
            worst = max(worst, diff)

            def med(key):
                values = [v for v in ms[key] if v is not None]
                return "%7.1f" % statistics.median(values) if values else "      -"
            print("%-7s %5d %7d %13s (%s) %13s (%s)  %.3f (%.3f-%.3f)  %s  %.2e" % (
                size, nproc, threads, med("hp"), med("hp products"), med("py"), med("py products"),
                statistics.median(ratios), ratios[0], ratios[-1],
                "%.3f" % statistics.median(floors) if floors else "    -", diff), flush=True)
    if worst > 1e-3:
        sys.exit("eager_compare.py: the loss curves differ by %.2e: the two sides do not compute the same step" % worst)


if __name__ == "__main__":
    main()
