#!/usr/bin/python3
"""hyperpipe's GPT and trainer written in eager PyTorch: the baseline of issue 16.

The same model (parameter names, initial values, operations), the same batches
(`--data text:PATH`, hyperpipe's SplitMix64 sampler), the same loss weighting,
clipping, AdamW and learning-rate schedule, run by the Python interpreter on
the same LibTorch kernels (Debian's python3-torch 1.13). One process runs every
micro-batch in turn (hyperpipe's no-pipelining); `--nproc 2` starts two ranks
that run 1F1B over torch.distributed (Gloo) send/recv, as a user of
torch.distributed would write it.

It prints one JSON line per step: {"step", "loss", "step_ms", "grad_norm"},
the numbers hyperpipe's `--metrics` writes, so bench/eager_compare.py can put
the two side by side and check that the losses agree.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

MASK64 = (1 << 64) - 1


def fnv1a64(text):
    h = 14695981039346656037
    for c in text.encode():
        h = ((h ^ c) * 1099511628211) & MASK64
    return h


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


def initial_value(name, shape, a):
    """model/gpt.cpp's initial_parameter_value."""
    if name.endswith("norm.weight"):
        return torch.ones(shape)
    if name.endswith(".bias"):
        return torch.zeros(shape)
    g = torch.Generator()
    seed = a.seed ^ fnv1a64(name)
    g.manual_seed(seed - (1 << 64) if seed >= (1 << 63) else seed)  # the same 64 bits
    std = 0.02
    if name.endswith("attention.proj.weight") or name.endswith("mlp.fc2.weight"):
        std /= math.sqrt(2.0 * a.layers)
    return torch.empty(shape, dtype=torch.float64).normal_(0.0, std, generator=g).float()


class Block(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        h = a.hidden
        self.heads, self.head_dim = a.heads, h // a.heads
        self.attn_norm = torch.nn.LayerNorm(h)
        self.attention = torch.nn.Module()
        self.attention.qkv = torch.nn.Linear(h, 3 * h)
        self.attention.proj = torch.nn.Linear(h, h)
        self.mlp_norm = torch.nn.LayerNorm(h)
        self.mlp = torch.nn.Module()
        self.mlp.fc1 = torch.nn.Linear(h, 4 * h)
        self.mlp.fc2 = torch.nn.Linear(4 * h, h)

    def attend(self, x):
        b, s = x.size(0), x.size(1)
        qkv = self.attention.qkv(x).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        future = torch.ones(s, s, dtype=torch.bool).triu(1)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        scores = scores.masked_fill(future, float("-inf"))
        y = torch.matmul(torch.softmax(scores, -1), v)
        return self.attention.proj(y.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))

    def forward(self, x):
        h = x + self.attend(self.attn_norm(x))
        return h + self.mlp.fc2(F.gelu(self.mlp.fc1(self.mlp_norm(h))))


class Chunk(torch.nn.Module):
    """Layers [begin, end) of the GPT, with the embedding on the first chunk and the head on the last."""

    def __init__(self, a, begin, end):
        super().__init__()
        self.first, self.last = begin == 0, end == a.layers
        if self.first:
            self.embedding = torch.nn.Module()
            self.embedding.word = torch.nn.Embedding(a.vocab, a.hidden)
            self.embedding.position = torch.nn.Embedding(a.seq_len, a.hidden)
        self.layers = torch.nn.ModuleDict({str(i): Block(a) for i in range(begin, end)})
        if self.last:
            self.final_norm = torch.nn.LayerNorm(a.hidden)
            self.lm_head = torch.nn.Linear(a.hidden, a.vocab, bias=False)
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.copy_(initial_value(name, p.shape, a))

    def forward(self, x):
        if self.first:
            x = self.embedding.word(x) + self.embedding.position.weight[: x.size(1)]
        for block in self.layers.values():
            x = block(x)
        if self.last:
            x = self.lm_head(self.final_norm(x))
        return x


def batches(a, tokens, step):
    """data/batch_sampler.cpp's sample_batch, split as runtime/microbatch.cpp does."""
    window = a.seq_len + 1
    rng = SplitMix64(a.seed * 0x100000001B3 + step)
    starts = len(tokens) - window + 1
    rows = [tokens[s : s + window] for s in (rng.next() % starts for _ in range(a.micro_batch_size * a.mb))]
    whole = torch.tensor(rows, dtype=torch.long)
    return [(t[:, :-1], t[:, 1:]) for t in torch.tensor_split(whole, a.mb, 0)]


def lr_at(a, s):
    warmup, decay = a.warmup_steps, max(a.steps, max(1, a.warmup_steps))
    if warmup > 0 and s <= warmup:
        return a.lr * s / warmup
    if s >= decay:
        return a.min_lr
    r = (s - warmup) / (decay - warmup)
    return a.min_lr + 0.5 * (math.cos(math.pi * r) + 1.0) * (a.lr - a.min_lr)


def optimizer_of(a, model):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        # Megatron-LM's rule (and hyperpipe's): biases and 1-D parameters are not decayed.
        (no_decay if name.endswith("bias") or p.dim() == 1 else decay).append(p)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=a.lr, betas=(0.9, 0.999), eps=1e-8)


def clip(params, max_norm, group=None):
    """train/grad_clip.cpp: the norm in double over every rank's gradients."""
    sq = sum((p.grad.double() * p.grad.double()).sum() for p in params if p.grad is not None)
    if group is not None:
        t = sq.reshape(1)
        dist.all_reduce(t)
        sq = t[0]
    total = math.sqrt(sq.item())
    if max_norm > 0 and math.isfinite(total) and total > max_norm:
        scale = max_norm / (total + 1e-6)
        for p in params:
            if p.grad is not None:
                p.grad.mul_(scale)
    return total


def one_f_one_b(a, model, micros, rank, world, shape):
    """1F1B on `world` ranks: warm-up forwards, steady one-forward-one-backward, cool-down backwards."""
    first, last = rank == 0, rank == world - 1
    warmup = min(world - rank - 1, a.mb)
    inputs, outputs, sends, loss = [], [], [], 0.0

    def forward(m):
        nonlocal loss
        x, target = micros[m]
        if not first:
            x = torch.empty(shape)
            dist.recv(x, rank - 1)
            x.requires_grad_()
        y = model(x)
        if last:
            y = F.cross_entropy(y.reshape(-1, a.vocab), target.reshape(-1)) / a.mb
            loss += y.detach()
        else:
            sends.append(dist.isend(y.detach(), rank + 1))
        inputs.append(x)
        outputs.append(y)

    def backward():
        x, y = inputs.pop(0), outputs.pop(0)
        if last:
            y.backward()
        else:
            g = torch.empty(shape)
            dist.recv(g, rank + 1)
            y.backward(g)
        if not first:
            sends.append(dist.isend(x.grad, rank - 1))

    for m in range(warmup):
        forward(m)
    for m in range(warmup, a.mb):
        forward(m)
        backward()
    for _ in range(warmup):
        backward()
    for work in sends:
        work.wait()
    return loss


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default in [("layers", 8), ("hidden", 64), ("heads", 4), ("vocab", 256), ("seq-len", 32),
                          ("micro-batch-size", 2), ("mb", 8), ("steps", 20), ("seed", 1234),
                          ("warmup-steps", 10), ("nproc", 1), ("port", 29611)]:
        p.add_argument("--" + flag, type=int, default=default)
    for flag, default in [("lr", 3e-3), ("min-lr", 3e-4), ("weight-decay", 0.01), ("clip-grad", 1.0)]:
        p.add_argument("--" + flag, type=float, default=default)
    p.add_argument("--data", required=True, help="text:PATH, the file hyperpipe trains on with the same flag")
    p.add_argument("--profile-ops", type=int, default=0,
                   help="also profile the last step: rank 0 prints its N operators with the most self time"
                        " (as hyperpipe bench --profile-ops)")
    a = p.parse_args()
    if not a.data.startswith("text:"):
        sys.exit("eager_gpt.py: --data must be text:PATH (one byte, one token), got " + a.data)
    if a.nproc not in (1, 2):
        sys.exit("eager_gpt.py: --nproc must be 1 (every micro-batch in turn) or 2 (1F1B), got %d" % a.nproc)
    with open(a.data[5:], "rb") as f:
        tokens = list(f.read())

    rank = int(os.environ.get("RANK", "0"))
    if a.nproc > 1 and "RANK" not in os.environ:  # start the ranks
        import subprocess
        procs = [subprocess.Popen([sys.executable] + sys.argv, env=dict(os.environ, RANK=str(r)),
                                  stdout=None if r == 0 else subprocess.DEVNULL) for r in range(a.nproc)]
        sys.exit(max(proc.wait() for proc in procs))
    if a.nproc > 1:
        store = dist.TCPStore("127.0.0.1", a.port, a.nproc, rank == 0)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=a.nproc)
        half = a.layers // 2
        model = Chunk(a, 0, half) if rank == 0 else Chunk(a, half, a.layers)
    else:
        model = Chunk(a, 0, a.layers)
    optimizer = optimizer_of(a, model)
    params = list(model.parameters())
    shape = (a.micro_batch_size, a.seq_len, a.hidden)
    profiler = None
    for step in range(1, a.steps + 1):
        if a.profile_ops > 0 and step == a.steps:
            profiler = torch.autograd.profiler.profile()
            profiler.__enter__()
        t0 = time.perf_counter()
        micros = batches(a, tokens, step - 1)
        if a.nproc > 1:
            loss = one_f_one_b(a, model, micros, rank, a.nproc, shape)
            t = torch.tensor([float(loss)], dtype=torch.float64)
            dist.all_reduce(t)
            loss = t.item()
            norm = clip(params, a.clip_grad, group=True)
        else:
            loss = 0.0
            for x, target in micros:
                y = F.cross_entropy(model(x).reshape(-1, a.vocab), target.reshape(-1)) / a.mb
                y.backward()
                loss += y.detach()
            loss = float(loss)
            norm = clip(params, a.clip_grad)
        lr = lr_at(a, step - 1)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        ms = (time.perf_counter() - t0) * 1000
        if profiler is not None:
            profiler.__exit__(None, None, None)
            if rank == 0:
                print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.profile_ops),
                      file=sys.stderr)
        if rank == 0:
            print(json.dumps({"step": step, "loss": loss, "step_ms": ms, "grad_norm": norm}), flush=True)
    if a.nproc > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
