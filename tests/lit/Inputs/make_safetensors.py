#!/usr/bin/env python3
"""Writes small .safetensors fixtures for the lit tests (stdlib only, no torch).

Usage:
  make_safetensors.py OUT [--truncate N] [--bad-json] [--header-size N] SPEC...

Each SPEC is NAME=SHAPE[:DTYPE]: SHAPE is dims joined by 'x' ("10x8", "8"), or
"scalar" for a rank-0 tensor; DTYPE is a safetensors dtype (F32 default, F16,
BF16, F64, I64, I32, I16, I8, U8, BOOL). Tensor data is a deterministic ramp
(0, 1, 2, ... in the tensor's dtype, wrapped for narrow types) so the files are
reproducible byte for byte.

Corruption modes (for the diagnostics tests):
  --truncate N     drop the last N bytes of the file (N=0: keep everything)
  --bad-json       replace the JSON header with text that is not JSON (same size)
  --header-size N  write N as the 8-byte header length instead of the real one
  --duplicate      name the first tensor twice in the header (valid JSON)
  --nan I,J,...    make F32 elements I, J, ... of the first tensor NaN, +inf, -inf, NaN, ...
"""
import json
import struct
import sys

DTYPES = {
    "F64": ("d", 8), "F32": ("f", 4), "F16": ("e", 2), "BF16": (None, 2),
    "I64": ("q", 8), "I32": ("i", 4), "I16": ("h", 2), "I8": ("b", 1),
    "U8": ("B", 1), "BOOL": ("?", 1),
}


def die(msg):
    sys.stderr.write("make_safetensors.py: " + msg + "\n")
    sys.exit(2)


def parse_spec(spec):
    if "=" not in spec:
        die("expected NAME=SHAPE[:DTYPE], got %r" % spec)
    name, rest = spec.split("=", 1)
    shape_text, _, dtype = rest.partition(":")
    dtype = dtype or "F32"
    if dtype not in DTYPES:
        die("unknown dtype %r" % dtype)
    if shape_text in ("scalar", ""):
        shape = []
    else:
        try:
            shape = [int(d) for d in shape_text.split("x")]
        except ValueError:
            die("bad shape %r" % shape_text)
    return name, shape, dtype


def tensor_bytes(shape, dtype):
    n = 1
    for d in shape:
        n *= d
    fmt, size = DTYPES[dtype]
    out = bytearray()
    for i in range(n):
        if dtype == "BF16":
            out += struct.pack("<f", float(i % 256))[2:]
        elif dtype == "BOOL":
            out += struct.pack("<?", bool(i % 2))
        elif fmt in "fde":
            out += struct.pack("<" + fmt, float(i % 1024))
        else:
            out += struct.pack("<" + fmt, i % 100)
    assert len(out) == n * size
    return bytes(out)


def main(argv):
    if len(argv) < 2:
        die(__doc__.strip().splitlines()[2])
    out_path = argv[1]
    truncate = 0
    bad_json = False
    header_size = None
    duplicate = False
    nan_at = []
    specs = []
    args = argv[2:]
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--truncate":
            truncate = int(args[i + 1])
            i += 2
        elif a == "--bad-json":
            bad_json = True
            i += 1
        elif a == "--duplicate":
            duplicate = True
            i += 1
        elif a == "--nan":
            nan_at = [int(x) for x in args[i + 1].split(",")]
            i += 2
        elif a == "--header-size":
            header_size = int(args[i + 1])
            i += 2
        else:
            specs.append(parse_spec(a))
            i += 1

    header = {}
    data = bytearray()
    for k, (name, shape, dtype) in enumerate(specs):
        blob = bytearray(tensor_bytes(shape, dtype))
        if k == 0:
            for j, at in enumerate(nan_at):
                struct.pack_into("<f", blob, 4 * at, [float("nan"), float("inf"), -float("inf")][j % 3])
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header, separators=(",", ":"), sort_keys=True)
    if duplicate:
        first = specs[0][0]
        text = text[:-1] + "," + json.dumps(first) + ":" + json.dumps(header[first], separators=(",", ":")) + "}"
    text += " " * ((8 - len(text) % 8) % 8)
    if bad_json:
        # Same length, so the size prefix stays consistent: only the JSON is bad.
        broken = '{"oops": [1, 2,,'
        text = (broken + " " * len(text))[:max(len(text), len(broken))]
    raw = text.encode("utf-8")
    prefix = struct.pack("<Q", len(raw) if header_size is None else header_size)
    blob = prefix + raw + bytes(data)
    if truncate:
        blob = blob[:max(0, len(blob) - truncate)]
    with open(out_path, "wb") as f:
        f.write(blob)


if __name__ == "__main__":
    main(sys.argv)
