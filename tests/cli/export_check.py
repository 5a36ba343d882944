"""Reads a `hyperpipe checkpoint export` pair with PyTorch (torch.load) and with a
safetensors reader written here from Hugging Face's specification, and checks
every tensor bitwise against the reference the C++ test wrote from the
checkpoint itself (name, dtype, shape, hex of the little-endian bytes).

usage: export_check.py REFERENCE MODEL.pt MODEL.safetensors
Prints "export_check: N tensors equal" and exits 0, or names the first difference.
"""
import json
import struct
import sys

import numpy as np
import torch

NUMPY = {"F64": "<f8", "F32": "<f4", "I64": "<i8", "I32": "<i4"}
TORCH = {"F64": torch.float64, "F32": torch.float32, "I64": torch.int64, "I32": torch.int32}


def reference(path):
    out = {}
    for line in open(path):
        name, dtype, shape, data = line.split()
        out[name] = (dtype, [int(d) for d in shape.split(",") if d], bytes.fromhex(data))
    return out


def safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    buffer = raw[8 + n :]
    out = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], np.frombuffer(buffer[begin:end], dtype=NUMPY[e["dtype"]]).reshape(e["shape"]))
    return out, meta


def main():
    ref = reference(sys.argv[1])
    state = torch.load(sys.argv[2])
    if not isinstance(state, dict) or set(state) != set(ref):
        sys.exit("export_check: torch.load gave %s with names %s" % (type(state).__name__, sorted(state)[:5]))
    st, meta = safetensors(sys.argv[3])
    if set(st) != set(ref) or meta.get("format") != "pt":
        sys.exit("export_check: the safetensors file holds %s, metadata %s" % (sorted(st)[:5], meta))
    for name, (dtype, shape, data) in ref.items():
        t = state[name]
        if not isinstance(t, torch.Tensor) or t.dtype != TORCH[dtype] or list(t.shape) != shape:
            sys.exit("export_check: torch file's %s is %s %s" % (name, t.dtype, list(t.shape)))
        if t.contiguous().numpy().astype(NUMPY[dtype]).tobytes() != data:
            sys.exit("export_check: torch file's %s differs from the checkpoint" % name)
        s_dtype, s_shape, array = st[name]
        if s_dtype != dtype or list(s_shape) != shape or array.tobytes() != data:
            sys.exit("export_check: safetensors file's %s differs from the checkpoint" % name)
    print("export_check: %d tensors equal" % len(ref))


if __name__ == "__main__":
    main()
