"""Splits a safetensors file into two shards plus model.safetensors.index.json, as
transformers' save_pretrained(max_shard_size=...) does (stdlib only).
Usage: split.py IN.safetensors OUTDIR"""
import json
import os
import struct
import sys

src, out = sys.argv[1:3]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
names = sorted(k for k in header if k != "__metadata__")
shards = [names[: len(names) // 2], names[len(names) // 2:]]
weight_map = {}
for i, part in enumerate(shards):
    fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
    h, blob = {}, b""
    for k in part:
        b, e = header[k]["data_offsets"]
        h[k] = {"dtype": header[k]["dtype"], "shape": header[k]["shape"],
                "data_offsets": [len(blob), len(blob) + e - b]}
        blob += data[b:e]
        weight_map[k] = fname
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    with open(os.path.join(out, fname), "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + blob)
with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": len(data)}, "weight_map": weight_map}, f, indent=2)
