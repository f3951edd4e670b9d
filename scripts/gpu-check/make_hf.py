#!/usr/bin/env python3
"""Small random-weight Hugging Face models for the GPU check (pack.sh).

  make_hf.py DIR      writes DIR/llama-gqa, DIR/llama-mqa, DIR/qwen3, DIR/gemma2, DIR/t5 (save_pretrained)

The decoder-only ones cover what the LLaMA family brings to the CUDA backend: rotary
embeddings (plain and llama3-scaled), grouped- and multi-query attention, RMS norm,
SwiGLU, and Qwen3's per-head q/k norms. T5 brings the relative position bias, whose
table and output stay f32 under --dtype f16/bf16. tests/hf/llama_test.py checks the same families against
transformers on the CPU; on the GPU machine compare.py checks CUDA against the CPU.
"""
import os
import sys

import torch
from transformers import (Gemma2Config, Gemma2ForCausalLM, LlamaConfig, LlamaForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM,
                          T5Config, T5ForConditionalGeneration)

out = sys.argv[1]
COMMON = dict(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
              bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.2)


def save(name, model):
    with torch.no_grad():  # non-trivial norm weights (random init leaves 1s)
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    model.eval().save_pretrained(os.path.join(out, name))


torch.manual_seed(0)
save("llama-gqa", LlamaForCausalLM(LlamaConfig(**COMMON, tie_word_embeddings=False)))
save("llama-mqa", LlamaForCausalLM(LlamaConfig(
    **{**COMMON, "num_key_value_heads": 1}, head_dim=48, attention_bias=True,
    tie_word_embeddings=True,
    rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 32})))
save("qwen3", Qwen3ForCausalLM(Qwen3Config(**COMMON, head_dim=32, tie_word_embeddings=True)))
# Gemma 2: soft-capped attention scores and logits (the fused attention's softcap), local
# layers with a window of 3, GeGLU (the gate GEMM's multiplier epilogue).
save("gemma2", Gemma2ForCausalLM(Gemma2Config(
    vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=256,
    query_pre_attn_scalar=24, sliding_window=3, attn_logit_softcapping=1.0,
    final_logit_softcapping=2.0, initializer_range=0.1, bos_token_id=1, eos_token_id=2,
    pad_token_id=0)))
save("t5", T5ForConditionalGeneration(T5Config(
    vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
    relative_attention_num_buckets=8, relative_attention_max_distance=20,
    decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)))
