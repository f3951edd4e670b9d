#!/usr/bin/env python3
"""Reference interpreter for printed tfc IR, in numpy (f32).

It executes what `tfc compile --emit=mlir-import` (unfused) or `--emit=mlir` (fused)
prints, reading weights from the safetensors file the model was compiled with. It is
the oracle the tests use to check, before and independently of the runtime, that
  - the frontend's IR computes the same numbers as the PyTorch source (goldens), and
  - the fusion passes do not change the numbers (fused vs unfused).
It is deliberately simple (one numpy expression per op, straight from the op
descriptions in ir/TfcOps.td) so that it can be read against the dialect docs.

Usage:
  tfc_interp.py model.mlir --weights W.safetensors --input src=src.npy ... \
      [--output out.npy] [--compare golden.npy --atol 1e-4]
Needs only numpy (Debian python3-numpy).
"""
import argparse
import json
import math
import re
import struct
import sys

import numpy as np

# ---------------------------------------------------------------------------
# safetensors (the format is 8-byte header length, JSON header, raw data)

_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64,
              "I64": np.int64, "I32": np.int32, "BOOL": np.bool_, "U8": np.uint8}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        if info["dtype"] == "BF16":
            raw = np.frombuffer(data[b:e], dtype=np.uint16).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(data[b:e], dtype=_ST_DTYPES[info["dtype"]])
        out[name] = arr.reshape(info["shape"]).astype(np.float32, copy=False)
    return out


# ---------------------------------------------------------------------------
# Parsing the printed IR

def split_top(s, sep=","):
    """Splits |s| at |sep| outside <>, [], (), {} and quotes."""
    parts, depth, cur, q = [], 0, "", False
    for ch in s:
        if ch == '"':
            q = not q
        if not q:
            if ch in "<[({":
                depth += 1
            elif ch in ">])}":
                depth -= 1
            elif ch == sep and depth == 0:
                parts.append(cur.strip())
                cur = ""
                continue
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse_float(tok):
    tok = tok.strip()
    if tok.startswith("0x"):
        bits = int(tok, 16)
        if len(tok) > 10:
            return struct.unpack("<d", struct.pack("<Q", bits))[0]
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    return float(tok)


def parse_attr_value(v):
    v = v.strip()
    m = re.match(r"array<i64(?::\s*(.*))?>$", v)
    if m:
        return [int(x) for x in m.group(1).split(",")] if m.group(1) else []
    m = re.match(r"#tfc<\w+ (\w+)>$", v)
    if m:
        return m.group(1)
    if v in ("true", "false"):
        return v == "true"
    if v.startswith('"'):
        return v[1:-1]
    m = re.match(r"(.*) : (i\d+|f\d+)$", v)
    if m:
        return int(m.group(1)) if m.group(2).startswith("i") else parse_float(m.group(1))
    try:
        return int(v)
    except ValueError:
        return parse_float(v)


def parse_attrs(text):
    attrs = {}
    for part in split_top(text):
        if "=" in part:
            k, v = part.split("=", 1)
            attrs[k.strip()] = parse_attr_value(v)
    return attrs


def parse_dense(text, type_text):
    m = re.match(r"dense<(.*)>", text.strip())
    body = m.group(1).strip()
    dtype = np.int64 if "xi64>" in type_text or "<i64>" in type_text else np.float32
    if body.startswith("["):
        vals = [parse_float(x) for x in re.findall(r"[-+0-9.eExa-fA-F]+", body)]
    else:
        vals = [parse_float(body)]
    shape = [int(d) for d in re.findall(r"(\d+)x", type_text)]
    if len(vals) == 1:  # a splat
        return np.full(shape, vals[0], dtype=dtype)
    return np.array(vals, dtype=dtype).reshape(shape)


OP_RE = re.compile(r"^\s*%([\w#]+) = (tfc\.\w+)\s*(.*)$")


def parse_function(text):
    m = re.search(r"func\.func @forward\((.*?)\) -> ", text, re.S)
    # Only @forward's body: tfc compile also derives @encode/@decode_step.
    body = text[m.end():]
    nxt = re.search(r"^\s*func\.func ", body, re.M)
    if nxt:
        body = body[:nxt.start()]
    args = []
    for a in split_top(m.group(1)):
        name = re.match(r"%(\w+)", a).group(1)
        tn = re.search(r'tfc\.name = "(\w+)"', a)
        args.append((name, tn.group(1) if tn else name))
    ops, ret = [], None
    for line in body.splitlines():
        om = OP_RE.match(line)
        if om:
            ops.append((om.group(1), om.group(2), om.group(3)))
            continue
        rm = re.match(r"\s*(?:func\.)?return %([\w#]+)", line)
        if rm:
            ret = rm.group(1)
    return args, ops, ret


# ---------------------------------------------------------------------------
# Op semantics

def sinusoid(variant, rows, dim):
    pos = np.arange(rows, dtype=np.float32)[:, None]
    pe = np.zeros((rows, dim), dtype=np.float32)
    if variant == "standard":
        # torch: exp(arange(0, d, 2) * (-log(10000) / d)) in f32, then sin/cos in f32
        div = np.exp(np.arange(0, dim, 2, dtype=np.float32) *
                     np.float32(-math.log(10000.0) / dim)).astype(np.float32)
        pe[:, 0::2] = np.sin(pos * div)
        pe[:, 1::2] = np.cos(pos * div)
    else:
        # Tutorials 001/003 compute each entry with Python's math (double), then store f32.
        for p in range(rows):
            for i in range(0, dim, 2):
                pe[p, i] = math.sin(p / (10000 ** ((2 * i) / dim)))
                e = (2 * (i + 1)) / dim if variant == "exp2i_cos_next" else (2 * i) / dim
                pe[p, i + 1] = math.cos(p / (10000 ** e))
    return pe


_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x, approx):
    if approx in ("tanh", "gelu_tanh"):
        return (0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))).astype(np.float32)
    return (0.5 * x * (1 + _erf(x / math.sqrt(2)))).astype(np.float32)


def softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def reshape(x, spec):
    shape = [x.shape[i] if s == 0 else s for i, s in enumerate(spec)]
    return x.reshape(shape)


def attention(q, k, v, mask, a):
    kind, h = a["mask_kind"], a["num_heads"]
    b, sq, d = q.shape
    sk = k.shape[1]
    split = lambda t, s: t.reshape(b, s, h, d // h).transpose(0, 2, 1, 3)
    s = (split(q, sq) @ split(k, sk).transpose(0, 1, 3, 2)) * np.float32(a["scale"])
    fill = np.float32(a.get("mask_value", -1e9))
    masked = np.zeros((b, 1, sq, sk), dtype=bool)
    if kind in ("key_padding", "padding_causal"):
        masked |= (mask == a.get("pad_id", 0))[:, None, None, :]
    if kind in ("causal", "padding_causal"):
        masked |= np.triu(np.ones((sq, sk), dtype=bool), k=1)[None, None]
    if kind == "additive":
        s = s + mask
    s = np.where(masked, fill, s)
    o = softmax(s, -1) @ split(v, sk)
    return o.transpose(0, 2, 1, 3).reshape(b, sq, d)


def layer_norm(x, g, bt, variant, eps):
    mean = x.mean(-1, keepdims=True)
    xc = x - mean
    if variant == "std_norm":
        std = np.sqrt((xc * xc).sum(-1, keepdims=True) / (x.shape[-1] - 1))
        return g * xc / (std + np.float32(eps)) + bt
    var = (xc * xc).mean(-1, keepdims=True)
    return xc / np.sqrt(var + np.float32(eps)) * g + bt


def run(text, weights, inputs):
    args, ops, ret = parse_function(text)
    env = {}
    for name, user_name in args:
        env[name] = inputs[user_name]
    for res, op, rest in ops:
        # Split "operands {attrs} : types" (attrs optional).
        head, _, types = rest.rpartition(" : ")
        attrs = {}
        am = re.search(r"\{(.*)\}\s*$", head)
        if am and not head.lstrip().startswith("dense"):
            attrs = parse_attrs(am.group(1))
            head = head[:am.start()]
        kw = re.match(r"\s*([a-z_]+)\s+(?=%)", head)  # enum keyword (mask kind, predicate, ...)
        if kw and op not in ("tfc.weight",):
            attrs["_kw"] = kw.group(1)
            head = head[kw.end():]
        names = re.findall(r"(bias\(|residual\(|positions\(|types\()?%([\w#]+)", head)
        xs = [env[n] for _, n in names]
        tags = [t.rstrip("(") for t, _ in names]
        f32 = np.float32
        if op == "tfc.weight":
            nm = re.match(r'\s*"([^"]+)"', rest).group(1)
            y = weights[nm]
        elif op == "tfc.constant":
            y = parse_dense(rest.rsplit(" : ", 1)[0], rest.rsplit(" : ", 1)[1])
        elif op == "tfc.sinusoid_table":
            y = sinusoid(attrs["_kw"] if "_kw" in attrs else re.match(r"\s*(\w+)", rest).group(1),
                         attrs["rows"], attrs["dim"])
        elif op == "tfc.positions":
            ax = attrs["axis"] % xs[0].ndim
            shape = [1] * xs[0].ndim
            shape[ax] = xs[0].shape[ax]
            y = np.arange(xs[0].shape[ax], dtype=np.int64).reshape(shape)
        elif op == "tfc.nopeak_mask":
            s = xs[0].shape[1]
            y = (np.triu(np.ones((1, s, s)), k=1) == 0)
        elif op == "tfc.embedding":
            y = xs[0][xs[1]]
        elif op == "tfc.token_embedding":
            ids, table = xs[0], xs[1]
            y = table[ids] * f32(attrs.get("scale", 1.0))
            i = 2
            if "positions" in tags:
                ax = attrs.get("position_axis", 1)
                pos = np.arange(ids.shape[ax])
                pe = xs[i][pos]
                y = y + (pe[None] if ax == 1 else pe[:, None])
                i += 1
            if "types" in tags:
                y = y + xs[i + 1][xs[i]]
        elif op == "tfc.linear":
            y = xs[0] @ xs[1].T + (xs[2] if len(xs) > 2 else 0)
        elif op == "tfc.fused_linear":
            y = xs[0] @ xs[1].T
            if "bias" in tags:
                y = y + xs[tags.index("bias")]
            act = attrs.get("activation", "none")
            if act == "relu":
                y = np.maximum(y, 0)
            elif act in ("gelu", "gelu_tanh"):
                y = gelu(y, act)
            if "residual" in tags:
                y = y + xs[tags.index("residual")]
        elif op == "tfc.matmul":
            b = xs[1].swapaxes(-1, -2) if attrs.get("transpose_b") else xs[1]
            y = xs[0] @ b
        elif op in ("tfc.add", "tfc.sub", "tfc.mul", "tfc.div", "tfc.and"):
            fn = {"tfc.add": np.add, "tfc.sub": np.subtract, "tfc.mul": np.multiply,
                  "tfc.div": np.divide, "tfc.and": np.logical_and}[op]
            y = fn(xs[0], xs[1])
        elif op == "tfc.compare":
            fn = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                  "gt": np.greater, "ge": np.greater_equal}[attrs["_kw"]]
            y = fn(xs[0], xs[1])
        elif op == "tfc.not":
            y = np.logical_not(xs[0])
        elif op == "tfc.cast":
            to = types.split("->")[-1].strip()
            y = xs[0].astype({"f32": np.float32, "i64": np.int64, "i1": np.bool_}[to])
        elif op == "tfc.masked_fill":
            y = np.where(xs[1], f32(attrs["value"]), xs[0])
        elif op == "tfc.select":
            y = np.where(xs[0], xs[1], xs[2])
        elif op == "tfc.reshape":
            y = reshape(xs[0], attrs["shape"])
        elif op == "tfc.transpose":
            y = xs[0].transpose(attrs["perm"])
        elif op == "tfc.unsqueeze":
            y = np.expand_dims(xs[0], attrs["axis"])
        elif op == "tfc.slice":
            ax = attrs["axis"] % xs[0].ndim
            y = np.take(xs[0], range(attrs["start"], attrs["start"] + attrs["size"]), axis=ax)
        elif op == "tfc.concat":
            y = np.concatenate(xs, axis=attrs["axis"])
        elif op in ("tfc.reduce_mean", "tfc.reduce_sum"):
            fn = np.mean if op == "tfc.reduce_mean" else np.sum
            y = fn(xs[0], axis=attrs["axis"], keepdims=attrs.get("keepdim", True))
        elif op == "tfc.sqrt":
            y = np.sqrt(xs[0])
        elif op == "tfc.relu":
            y = np.maximum(xs[0], 0)
        elif op == "tfc.gelu":
            y = gelu(xs[0], attrs.get("approximate", "none"))
        elif op == "tfc.softmax":
            y = softmax(xs[0], attrs["axis"])
        elif op == "tfc.log_softmax":
            x = xs[0] - np.max(xs[0], axis=attrs["axis"], keepdims=True)
            y = x - np.log(np.sum(np.exp(x), axis=attrs["axis"], keepdims=True))
        elif op == "tfc.layer_norm":
            y = layer_norm(xs[0], xs[1], xs[2], attrs["_kw"], attrs["eps"])
        elif op == "tfc.attention":
            attrs["mask_kind"] = attrs["_kw"]
            y = attention(xs[0], xs[1], xs[2], xs[3] if len(xs) > 3 else None, attrs)
        else:
            raise SystemExit(f"tfc_interp: unsupported op {op}")
        if isinstance(y, np.ndarray) and y.dtype == np.float64:
            y = y.astype(np.float32)
        env[res] = np.asarray(y)
    return env[ret]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mlir")
    ap.add_argument("--weights", required=True)
    ap.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    ap.add_argument("--output")
    ap.add_argument("--compare", help="golden .npy to compare against")
    ap.add_argument("--atol", type=float, default=1e-4)
    a = ap.parse_args()
    inputs = {}
    for spec in a.input:
        k, v = spec.split("=", 1)
        inputs[k] = np.load(v).astype(np.int64)
    with open(a.mlir) as f:
        out = run(f.read(), read_safetensors(a.weights), inputs)
    if a.output:
        np.save(a.output, out.astype(np.float32))
    if a.compare:
        gold = np.load(a.compare)
        if gold.shape != out.shape:
            print(f"FAIL: shape {out.shape} != golden {gold.shape}")
            return 1
        err = float(np.max(np.abs(out.astype(np.float64) - gold)))
        ok = np.isfinite(out).all() and err <= a.atol
        print(f"{'PASS' if ok else 'FAIL'}: max abs error {err:.3e} (atol {a.atol:g}), shape {list(out.shape)}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
