#!/usr/bin/env python3
"""Regenerates the fuzzers' seed corpora under tests/fuzz/corpus/<target>/.

Seeds are small on purpose (the whole tree of them stays well under 1 MB):
  fuzz_model_load, fuzz_model_run: model.bin files compiled by the normal
      build's tfc from the bundled models at tiny sizes (d_model 8, 1 layer);
      fuzz_model_run also int8 and bf16 ones and one with NaN and inf weights
      (RUN_MODELS);
  fuzz_safetensors: small files written here, one per dtype and edge case;
  fuzz_npy: arrays written with numpy.save, every dtype tfrun reads;
  fuzz_yaml: the bundled models with tiny params and no checkpoint, plus the
      frontend's diagnostic inputs (tests/lit/diagnostics, tests/lit/Inputs).

Regression inputs (files named regress-*) are never deleted: a crash the
fuzzers found stays in the corpus after it is fixed (docs/testing.md). Nor are
the v5-* model seeds: files of model.bin format version 5, compiled before the
weight descriptors of version 6, which the loader still reads (and upgrades).

Usage: tests/fuzz/make_corpus.py [--tfc build/bin/tfc]
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")

# name -> (model yaml, --set overrides)
MODELS = {
    "floydhub": ("tutorial-floydhub.yaml",
                 "d_model=8 heads=2 d_ff=16 layers=1 max_len=8 max_batch=2 "
                 "src_vocab=16 tgt_vocab=16"),
    "gpt2": ("gpt2.yaml",
             "d_model=8 heads=2 layers=1 vocab=16 max_len=8 max_batch=2 bos_id=1 eos_id=1"),
    "bert": ("bert.yaml",
             "d_model=8 heads=2 d_ff=16 layers=1 vocab=16 max_len=8 max_batch=2"),
    "simple": ("tutorial-simple.yaml",
               "d_model=8 heads=2 layers=1 vocab=16 max_len=8 max_batch=2"),
    # rms_norm, the relative position bias table in (cached) attention, gated
    # and ungated feed-forwards, the generation defaults of format 5.
    "t5": ("hf/t5.yaml",
           "d_model=8 d_kv=4 heads=2 d_ff=16 enc_layers=1 dec_layers=1 vocab=16 buckets=4 "
           "max_distance=8 max_len=8 max_batch=2 num_beams=2 no_repeat_ngram_size=2"),
    # RMSNorm, grouped-query heads, SwiGLU, and the rotary folded into the
    # cached attention (its inv_freq operand).
    "llama": ("hf/llama.yaml",
              "d_model=8 heads=2 kv_heads=1 head_dim=4 d_ff=16 layers=1 vocab=16 rope_dim=4 "
              "max_len=8 max_batch=2"),
}
# fuzz_model_run only: int8 and bf16 plans (max_batch 4, so that beam 4 runs), and
# a model whose output head holds a NaN weight and a +inf bias (issue 21: non-finite
# logits in greedy, beam search and sampling).
# name -> (model yaml, --set overrides, extra tfc flags, {weight: {flat index: value}})
RUN_MODELS = {
    "floydhub-int8": ("tutorial-floydhub.yaml",
                      "d_model=8 heads=2 d_ff=16 layers=1 max_len=8 max_batch=4 "
                      "src_vocab=16 tgt_vocab=16", ["--precision", "int8"], None),
    "gpt2-bf16": ("gpt2.yaml",
                  "d_model=8 heads=2 layers=1 vocab=16 max_len=8 max_batch=4 bos_id=1 "
                  "eos_id=2", ["--precision", "bf16"], None),
    "gpt2-int8": ("gpt2.yaml",
                  "d_model=8 heads=2 layers=1 vocab=16 max_len=8 max_batch=4 bos_id=1 "
                  "eos_id=2", ["--precision", "int8"], None),
    # int8 with 8-bit activation blocks (format 9's act_bits).
    "gpt2-int8-a8": ("gpt2.yaml",
                     "d_model=8 heads=2 layers=1 vocab=16 max_len=8 max_batch=4 bos_id=1 "
                     "eos_id=2", ["--precision", "int8", "--activation-bits", "8"], None),
    "floydhub-nan": ("tutorial-floydhub.yaml",
                     "d_model=8 heads=2 d_ff=16 layers=1 max_len=8 max_batch=4 "
                     "src_vocab=16 tgt_vocab=16", [],
                     # token 5's logit NaN, token 7's +inf at every step
                     {"out.weight": {5 * 8: float("nan")}, "out.bias": {7: float("inf")}}),
}
# Params made tiny in the YAML seeds, whichever model declares them.
TINY = {"d_model": "8", "heads": "2", "d_ff": "16", "layers": "1", "vocab": "16",
        "src_vocab": "16", "tgt_vocab": "16", "max_len": "8", "pe_len": "8",
        "max_batch": "2", "bos_id": "1", "eos_id": "2", "type_vocab": "2"}


def reset(target):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if not f.startswith(("regress-", "v5-")):
            os.remove(os.path.join(d, f))
    return d


def model_bins(tfc):
    dirs = [reset("fuzz_model_load"), reset("fuzz_model_run")]
    for name, (yaml, sets) in MODELS.items():
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "m.bin")
            cmd = [tfc, "compile", os.path.join(ROOT, "models", yaml), "-o", out]
            for s in sets.split():
                cmd += ["--set", s]
            subprocess.run(cmd, check=True)
            for d in dirs:
                shutil.copy(out, os.path.join(d, name + ".bin"))


def weights_with(tfc, cmd, changes, path):
    """Writes |path|: every weight the model declares (names and shapes from
    --emit=mlir-import), small random values, then |changes| applied."""
    ir = subprocess.run(cmd + ["--emit=mlir-import"], check=True,
                        capture_output=True, text=True).stdout
    rng = np.random.default_rng(21)
    tensors = []
    for name, dims in re.findall(r'tfc\.weight "([^"]+)" : tensor<([0-9x]*)xf32>', ir):
        shape = [int(d) for d in dims.split("x")]
        w = rng.uniform(-0.5, 0.5, size=shape).astype("<f4")
        for i, v in changes.get(name, {}).items():
            w.reshape(-1)[i] = v
        tensors.append((name, "F32", shape, w.tobytes()))
    missing = set(changes) - {t[0] for t in tensors}
    if missing:
        sys.exit(f"make_corpus.py: no weight {sorted(missing)} in {cmd[2]}")
    with open(path, "wb") as f:
        f.write(st_bytes(tensors))


def run_model_bins(tfc):
    d = os.path.join(CORPUS, "fuzz_model_run")
    for name, (yaml, sets, flags, changes) in RUN_MODELS.items():
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "m.bin")
            cmd = [tfc, "compile", os.path.join(ROOT, "models", yaml)]
            for s in sets.split():
                cmd += ["--set", s]
            if changes:
                st = os.path.join(tmp, "w.safetensors")
                weights_with(tfc, cmd, changes, st)
                cmd += ["--weights", st]
            subprocess.run(cmd + flags + ["-o", out], check=True)
            shutil.copy(out, os.path.join(d, name + ".bin"))


def st_bytes(tensors, metadata=None, pad=True):
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def safetensors():
    d = reset("fuzz_safetensors")
    f32 = np.arange(6, dtype="<f4").tobytes()
    seeds = {
        "f32.safetensors": st_bytes([("w", "F32", [2, 3], f32)], {"format": "pt"}),
        "mixed.safetensors": st_bytes([
            ("a.weight", "F16", [2, 2], np.ones(4, "<f2").tobytes()),
            ("a.bias", "BF16", [2], b"\x80\x3f\x00\x40"),
            ("ids", "I64", [], struct.pack("<q", 7)),
            ("i32", "I32", [1, 1], struct.pack("<i", -1)),
            ("i16", "I16", [1], struct.pack("<h", 3)),
            ("i8", "I8", [2], b"\x01\xff"),
            ("u8", "U8", [1], b"\x09"),
            ("mask", "BOOL", [3], b"\x01\x00\x01"),
            ("f64", "F64", [1], struct.pack("<d", 0.5)),
        ]),
        "empty-tensor.safetensors": st_bytes([("e", "F32", [0, 4], b"")]),
        "empty-header.safetensors": st_bytes([]),
        "unpadded.safetensors": st_bytes([("w", "F32", [2], f32[:8])], pad=False),
    }
    # The bundled demo checkpoint's header, with its data cut to the first tensor.
    with open(os.path.join(ROOT, "models", "demo-reverse.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    first = min((k for k in header if k != "__metadata__"),
                key=lambda k: header[k]["data_offsets"][0])
    meta = header.get("__metadata__")
    t = header[first]
    size = t["data_offsets"][1] - t["data_offsets"][0]
    seeds["demo-reverse-first.safetensors"] = st_bytes(
        [(first, t["dtype"], t["shape"], bytes(size))], meta)
    for name, b in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(b)


def npys():
    d = reset("fuzz_npy")
    arrays = {
        "f4.npy": np.arange(6, dtype="<f4").reshape(2, 3),
        "i8.npy": np.array([[1, 2, 3, 4]], dtype="<i8"),
        "i4.npy": np.array([5, 6], dtype="<i4"),
        "u1.npy": np.array([1, 2, 3], dtype="u1"),
        "b1.npy": np.array([True, False]),
        "scalar.npy": np.array(3.5, dtype="<f4"),
        "empty.npy": np.zeros((0, 3), dtype="<i8"),
    }
    for name, a in arrays.items():
        np.save(os.path.join(d, name), a)
    # Version 2.0 (4-byte header length), written by hand: numpy picks it only
    # for headers over 64 KiB.
    a = np.array([[7, 8]], dtype="<i8")
    h = b"{'descr': '<i8', 'fortran_order': False, 'shape': (1, 2), }"
    h += b" " * (-(12 + len(h) + 1) % 64) + b"\n"
    with open(os.path.join(d, "v2.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x02\x00" + struct.pack("<I", len(h)) + h + a.tobytes())


def tiny_yaml(text):
    out, in_params = [], False
    for line in text.splitlines(keepends=True):
        if re.match(r"^\S", line):
            in_params = line.startswith("params:")
        m = re.match(r"^  (\w+):", line)
        if in_params and m and m.group(1) in TINY:
            line = f"  {m.group(1)}: {TINY[m.group(1)]}\n"
        out.append(line)
    text = "".join(out)
    text = re.sub(r"^weights:.*\n", "", text, flags=re.M)
    # Comments are the bulk of the bundled files and only slow the fuzzer.
    text = re.sub(r"^\s*#.*\n", "", text, flags=re.M)
    return re.sub(r" +# .*", "", text)


def yamls():
    d = reset("fuzz_yaml")
    models = os.path.join(ROOT, "models")
    for f in sorted(os.listdir(models)):
        if f.endswith(".yaml"):
            with open(os.path.join(models, f)) as src, open(os.path.join(d, f), "w") as dst:
                dst.write(tiny_yaml(src.read()))
    for sub in ("diagnostics", "Inputs"):
        src = os.path.join(ROOT, "tests", "lit", sub)
        for f in sorted(os.listdir(src)):
            p = os.path.join(src, f)
            if f.endswith(".yaml") and os.path.getsize(p) < 4096:
                with open(p) as s, open(os.path.join(d, sub.lower() + "-" + f), "w") as t:
                    t.write(tiny_yaml(s.read()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tfc", default=os.path.join(ROOT, os.environ.get("BUILD_DIR", "build"),
                                                   "bin", "tfc"))
    args = ap.parse_args()
    if not os.access(args.tfc, os.X_OK):
        sys.exit(f"make_corpus.py: no tfc at {args.tfc}: run scripts/build.sh or pass --tfc")
    model_bins(args.tfc)
    run_model_bins(args.tfc)
    safetensors()
    npys()
    yamls()
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(CORPUS) for f in fs)
    print(f"make_corpus.py: {total} bytes under {os.path.relpath(CORPUS, ROOT)}")


if __name__ == "__main__":
    main()
