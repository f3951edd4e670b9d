"""Hugging Face directories at Qwen2.5-0.5B's and Llama-3.2-1B's shapes with weights
that compress, for the end-to-end CUDA LLM benchmark (scripts/gpu-check/bench_llm.sh).

The device tool carries at most 64 MiB, and random weights of these sizes do not
compress. Each weight here is random normal (std 0.02) but periodic: the first 1024
values of its own random stream, repeated, which xz's dictionary folds away. A dense
kernel's time does not depend on the values it multiplies (cuBLAS, our GEMVs and the
attention skip nothing), and every weight is distinct (model.bin stores identical
weights once, which would let every layer read one copy from the GPU's L2 cache),
so the timing is that of a real checkpoint of this shape. The norms' weights are 1.

  make_llm.py OUT_DIR        writes OUT_DIR/qwen2.5-0.5b and OUT_DIR/llama-3.2-1b
                             (config.json, model.safetensors in bf16), and the prompts
                             OUT_DIR/prompt128.npy and OUT_DIR/prompt512.npy
"""
import json
import os
import struct
import sys

import numpy as np

# The shapes of bench/bench_llama.py (tied embeddings, as the real checkpoints).
SHAPES = {
    "qwen2.5-0.5b": dict(
        architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=896,
        intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
        num_key_value_heads=2, vocab_size=151936, max_position_embeddings=4096,
        rms_norm_eps=1e-6, rope_theta=1e6, use_sliding_window=False, bias=True),
    "llama-3.2-1b": dict(
        architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=2048,
        intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=4096,
        rms_norm_eps=1e-5, rope_theta=5e5,
        rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                          high_freq_factor=4.0, original_max_position_embeddings=8192),
        bias=False),
}


def tensors(c):
    """(name, shape) of every weight of the checkpoint."""
    h, f, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = h // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * hd
    yield "model.embed_tokens.weight", (v, h)
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for name, shape in [("self_attn.q_proj", (h, h)), ("self_attn.k_proj", (kv, h)),
                            ("self_attn.v_proj", (kv, h)), ("self_attn.o_proj", (h, h)),
                            ("mlp.gate_proj", (f, h)), ("mlp.up_proj", (f, h)),
                            ("mlp.down_proj", (h, f))]:
            yield p + name + ".weight", shape
            if c["bias"] and name in ("self_attn.q_proj", "self_attn.k_proj",
                                      "self_attn.v_proj"):
                yield p + name + ".bias", shape[:1]
        yield p + "input_layernorm.weight", (h,)
        yield p + "post_attention_layernorm.weight", (h,)
    yield "model.norm.weight", (h,)


PERIOD = 1024


def bf16(x):
    """float32 array -> bf16 bytes (round to nearest even)."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()


def write_safetensors(path, specs):
    """A bf16 safetensors file: norms 1, every other weight periodic random normal."""
    header, offset = {}, 0
    for name, shape in specs:
        n = 2 * int(np.prod(shape))
        header[name] = dict(dtype="BF16", shape=list(shape), data_offsets=[offset, offset + n])
        offset += n
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for i, (name, shape) in enumerate(specs):
            n = int(np.prod(shape))
            if name.endswith("norm.weight"):
                f.write(bf16(np.ones(n)))
                continue
            piece = bf16(np.random.default_rng(i).normal(0, 0.02, PERIOD))
            for _ in range(n // PERIOD):
                f.write(piece)
            f.write(piece[:2 * (n % PERIOD)])


def main():
    out = sys.argv[1]
    for name, shape in SHAPES.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        cfg = {k: v for k, v in shape.items() if k != "bias"}
        cfg.update(tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
                   pad_token_id=0, torch_dtype="bfloat16", hidden_act="silu")
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        write_safetensors(os.path.join(d, "model.safetensors"), list(tensors(shape)))
    rng = np.random.default_rng(0)
    for n in (128, 512):
        np.save(os.path.join(out, f"prompt{n}.npy"),
                rng.integers(3, 1000, size=(1, n), dtype=np.int64))


if __name__ == "__main__":
    main()
