"""tfc compile DIR on Hugging Face decoder-only checkpoints (the LLaMA family and
GPT-2), against transformers.

Builds small random-weight decoder-only models with save_pretrained:
  - llama-gqa: a LlamaForCausalLM with grouped-query attention (4 heads over 2),
    default RoPE, an untied lm_head;
  - llama-mqa: multi-query attention (4 heads over 1), an explicit head_dim that
    is not hidden_size / heads, q/k/v/o biases (attention_bias), a tied lm_head
    and Llama 3.1's llama3 rope scaling;
  - llama-linear: linear rope scaling, its config.json rewritten in the older
    layout (rope_theta beside rope_scaling {"type": "linear"}) that
    transformers 4 checkpoints have, and mlp_bias (biases on the gate, up and
    down projections);
  - mistral: a MistralForCausalLM without a sliding window, whose
    generation_config.json lists three eos ids (as Llama 3's does);
  - mistral-window: one with a sliding window of 3 tokens, shorter than the
    prompts and the generated tokens (every layer masks keys 3 or more back);
  - qwen2: a Qwen2ForCausalLM (q/k/v biases, no o_proj bias, a tied head, a
    sliding_window that use_sliding_window turns off);
  - qwen2-window: Qwen2's use_sliding_window, a window of 3 on the layers from
    max_window_layers (1) on;
  - qwen3: a Qwen3ForCausalLM (per-head q/k RMSNorm before RoPE, head_dim 32
    with hidden_size 64 and 4 heads);
  - qwen3-yarn, qwen3-yarn-untruncated: YaRN rope scaling (factor 4 over 8
    original positions), the second with truncate false, beta_fast 16 and an
    explicit attention_factor;
  - phi3: a Phi3ForCausalLM (Q, K and V packed in qkv_proj with grouped-query
    attention, gate and up packed in gate_up_proj);
  - phi3-window: one with multi-query attention, a sliding window of 3 and
    partial rotary embeddings (partial_rotary_factor 0.5);
  - phi3-longrope, phi3-longrope-full: Phi-3's LongRoPE (per-frequency short and
    long factors, an attention factor), with 3/4 and all of each head rotated; also
    compiled for 128 positions, the long factors, on a 60-token prompt;
  - gemma3: a Gemma3ForCausalLM (RMSNorm as 1 + w, four norms a layer, scaled
    embeddings, query_pre_attn_scalar, q/k norms, local layers with a window of
    3 and their own rope base beside global layers with linear rope scaling,
    GeGLU, a tied head);
  - gemma3-image-text: a Gemma3ForConditionalGeneration (Gemma 3 4B's layout, a
    vision tower beside the text model) compiled as its text model, and its
    weights moved under model.language_model.* (transformers 4.52-4.57's layout);
  - gemma2: a Gemma2ForCausalLM (Gemma 3's layout without q/k norms, local and
    global layers alternating, one rope base) with tanh soft-capping of the
    attention scores and of the final logits, both small enough to change the
    logits far beyond the tolerance (checked); gemma2-old: the same weights
    with the older config layout (rope_theta, no layer_types);
  - gemma: a GemmaForCausalLM (Gemma 1: two norms a layer, every layer global,
    multi-query attention, head_dim 24 with the scale head_dim^-0.5), its config.json
    saying hidden_act "gelu" as Gemma 1's releases do (the tanh approximation);
  - smollm3: a SmolLM3ForCausalLM (Llama without rotary positions on every second
    layer here, no_rope_layer_interval 2; checked to matter), and smollm3-interval:
    its config.json without no_rope_layers (derived from the interval, 4);
  - olmo2: an Olmo2ForCausalLM (RMSNorm after the attention and the feed-forward
    rather than before, q/k RMSNorm over the whole projection, grouped-query);
  - granite: a GraniteForCausalLM (Granite 3: embedding, residual and attention
    multipliers and a logits divisor, a tied head);
  - phi: a PhiForCausalLM (Phi-2's layout: attention and feed-forward in parallel
    on one LayerNorm, rotary embeddings on 2/5 of each head, biases on every
    projection and the lm_head, GELU-tanh; grouped-query here, 4 heads over 2), and
    phi-qk-norm: per-head q/k LayerNorms (qk_layernorm), half of each head rotated,
    a tied head with its own bias, and no pad_token_id (tfc pads with eos);
  - starcoder2: a Starcoder2ForCausalLM (pre-LayerNorm, grouped-query attention
    with a sliding window of 3 on every layer, biases on every projection,
    GELU-tanh, a tied head; three eos ids), and starcoder2-plain: use_bias false, no window, an
    untied head, no pad_token_id (tfc pads with eos);
  - stablelm: a StableLmForCausalLM (pre-LayerNorm, a quarter of each head rotated,
    q/k/v biases, SwiGLU, grouped-query), and stablelm-parallel: use_parallel_residual
    (one LayerNorm read by the attention and the feed-forward), multi-query, a tied
    head, no q/k/v biases, no pad_token_id (tfc pads with eos);
  - gpt-neox: a GPTNeoXForCausalLM (Pythia's layout: Q, K and V in one projection
    whose rows go head by head, a parallel block with a LayerNorm for each
    sublayer, a quarter of each head rotated, exact GELU, biases, embed_out), and
    gpt-neox-sequential: use_parallel_residual false, no attention biases, half of
    each head rotated, no pad_token_id, its config.json in transformers 4's layout
    (rotary_pct and rotary_emb_base, no rope_parameters);
  - cohere: a CohereForCausalLM (Aya Expanse's layout: a parallel block on a
    LayerNorm without a bias, rotary pairs interleaved, grouped-query, a tied head,
    the logits times logit_scale 0.0625), and cohere-bias-untied: attention
    biases, an untied head, logit_scale 0.3;
  - gpt-bigcode: a GPTBigCodeForCausalLM (StarCoder's layout: GPT-2's with nn.Linear
    layers and multi-query attention, Q then one head's K and V in c_attn; padded
    with eos), and gpt-bigcode-mha: multi_query false (each head's q, k and v side by
    side), scale_attn_weights false, an untied head, n_inner 80;
  - gpt2: a GPT2LMHeadModel (learned positions, packed Conv1D c_attn, GELU-tanh,
    a tied head; padded with eos);
with non-trivial norms and biases, compiles each directory with tfc and checks:
  - the logits of a right-padded batch of prompts (the real positions; causal
    attention never reads the padding after them) against the model's logits
    computed in float64, within 5e-5 of the largest logit;
  - for llama-gqa, greedy generation with --repetition-penalty 1.3 against
    generate(repetition_penalty=1.3);
  - greedy generation (tfrun --generate, the batch at once) against generate()
    of each prompt alone, token for token, and each sequence's score against
    transformers' transition scores (it depends on every logit of every step:
    the KV cache, the rotary positions of the decode steps);
  - beam search with 4 beams against generate(num_beams=4): tokens and
    length-normalized scores;
  - greedy generation on the same prompts left-padded (transformers'
    padding_side="left"): the right-padded batch's tokens and scores;
  - for llama-gqa, the logits of `--precision bf16` and `int8` (also with
    `--activation-bits 8`) within relative L2
    0.01 and 0.03 of the float64 model's;
that generation_config.json's do_sample, temperature, top_k and top_p are the
model's sampling defaults, for a Llama and a StableLM (tfrun --generate samples with
them; --greedy does not);
and that config values tfc does not implement are errors that name them: a
dynamic rope scaling, a negative soft-cap, a sliding window that is not on every
layer from one on, and longrope factor lists of the wrong length.
Usage: llama_test.py TFC TFRUN WORKDIR   (run by ctest through tests/hf/run.sh)
"""
import copy
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
from hfcommon import check_cpu_cap, check_padded_logits, run
from transformers import (CohereConfig, CohereForCausalLM, GemmaConfig, GemmaForCausalLM, Gemma2Config, Gemma2ForCausalLM,
                          Gemma3Config, GraniteConfig, GraniteForCausalLM, Olmo2Config,
                          Olmo2ForCausalLM,
                          Gemma3ForCausalLM, Gemma3ForConditionalGeneration, Gemma3TextConfig,
                          GPT2Config, GPT2LMHeadModel, GPTBigCodeConfig, GPTBigCodeForCausalLM,
                          GPTNeoXConfig, GPTNeoXForCausalLM,
                          LlamaConfig, LlamaForCausalLM,
                          MistralConfig, MistralForCausalLM, PhiConfig, PhiForCausalLM,
                          Phi3Config, Phi3ForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM,
                          SmolLM3Config, SmolLM3ForCausalLM, StableLmConfig,
                          StableLmForCausalLM, Starcoder2Config, Starcoder2ForCausalLM)

TOL_REL = 5e-5
tfc, tfrun, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
failures = []
PAD, BOS, EOS, V = 0, 1, 2, 97


def perturb(m):
    """Non-trivial norms and biases (random init leaves 1s and 0s)."""
    with torch.no_grad():
        for _, p in m.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    return m


def q4_0_model(m):
    """|m| with every linear weight but the lm_head rounded as llama.cpp's Q4_0
    does (quantize_row_q4_0_ref): per 32 inputs, d = the element of largest
    magnitude / -8, q = clamp(round(w / d), -8, 7), w = q * d."""
    q = copy.deepcopy(m)
    with torch.no_grad():
        for name, mod in q.named_modules():
            if not isinstance(mod, torch.nn.Linear) or "lm_head" in name:
                continue
            w = mod.weight
            n, k = w.shape
            g = torch.nn.functional.pad(w, (0, -k % 32)).reshape(n, -1, 32)
            big = g.gather(2, g.abs().argmax(2, keepdim=True))
            d = big / -8
            inv = torch.where(d != 0, 1 / d, torch.zeros_like(d))
            r = (g * inv).round().clamp(-8, 7) * d
            w.copy_(r.reshape(n, -1)[:, :k])
    return q


def family(tag, m, rewrite=None, precisions=False, eos=(EOS,), pad=PAD, penalty=None):
    d = os.path.join(work, tag)
    m.generation_config.eos_token_id = list(eos) if len(eos) > 1 else eos[0]
    m.save_pretrained(d)
    if rewrite:
        path = os.path.join(d, "config.json")
        cfg = json.load(open(path))
        rewrite(cfg)
        json.dump(cfg, open(path, "w"), indent=2)
    m64 = copy.deepcopy(m).double()
    binp = os.path.join(work, tag + ".bin")
    run(tfc, "compile", d, "-o", binp)
    check_cpu_cap(tfrun, binp)

    g = np.random.default_rng(2)
    lengths = (9, 4, 6)
    S = max(lengths)
    ids = np.full((len(lengths), S), pad, dtype=np.int64)
    for b, n in enumerate(lengths):
        ids[b, 0] = BOS
        ids[b, 1:n] = g.integers(3, V, size=n - 1)
    idsf = os.path.join(work, tag + "-ids.npy")
    np.save(idsf, ids)

    # Logits of the real positions.
    check_padded_logits(tag, tfrun, binp, idsf, ids, lengths, m64, TOL_REL, failures)

    # bf16 and int8 (a weight scale per 32 inputs): relative L2 of the real positions'
    # logits within docs/precision.md's bounds. int4 (a scale per 32 weights):
    # within 1.25 times the error of llama.cpp's Q4_0 rounding of the same
    # weights, simulated here on the transformers model (q4_0_model).
    if precisions:
        def rel_l2(logits_of):
            num = den = 0.0
            for b, n in enumerate(lengths):
                with torch.no_grad():
                    want = m64(torch.from_numpy(ids[b:b + 1, :n])).logits.numpy()[0]
                num += float(((logits_of(b, n) - want) ** 2).sum())
                den += float((want ** 2).sum())
            return (num / den) ** 0.5
        q4 = q4_0_model(m64)
        with torch.no_grad():
            q4_rel = rel_l2(lambda b, n: q4(torch.from_numpy(ids[b:b + 1, :n])).logits.numpy()[0])
        # int8-a8: int8 with 8-bit activation blocks (--activation-bits 8, Q8_0's
        # arithmetic), held to int8's bound.
        for prec, bound in (("bf16", 0.01), ("int8", 0.03), ("int8-a8", 0.03),
                            ("int4", 1.25 * q4_rel)):
            pb = os.path.join(work, f"{tag}-{prec}.bin")
            flags = (["--precision", "int8", "--activation-bits", "8"] if prec == "int8-a8"
                     else ["--precision", prec])
            run(tfc, "compile", d, "-o", pb, *flags)
            po = os.path.join(work, f"{tag}-{prec}-out")
            os.makedirs(po, exist_ok=True)
            run(tfrun, pb, "--threads", "1", "--output-dir", po, "--input", "input_ids=" + idsf)
            lp = np.load(os.path.join(po, "logits.npy"))
            rel = rel_l2(lambda b, n: lp[b, :n])
            ok = rel <= bound
            print(f"{tag}-{prec}: relative L2 {rel:.3g} ({'ok' if ok else 'FAIL'}, bound "
                  f"{bound:.3g}{'; Q4_0 rounding gives %.3g' % q4_rel if prec == 'int4' else ''})")
            if not ok:
                failures.append(f"{tag}-{prec}")

    N = 10

    def generated(*flags, inp=idsf):
        o = os.path.join(work, f"{tag}-gen{'-'.join(flags)}{'-left' if inp != idsf else ''}")
        os.makedirs(o, exist_ok=True)
        run(tfrun, binp, "--threads", "1", "--generate", "--max-len", str(N), *flags,
            "--output-dir", o, "--input", "input_ids=" + inp)
        toks, lens = np.load(os.path.join(o, "ids.npy")), np.load(os.path.join(o, "lengths.npy"))
        return ([[int(t) for t in toks[b, :lens[b]]] for b in range(len(lengths))],
                np.load(os.path.join(o, "scores.npy")))

    def reference(beams, **kw):
        rows, scores = [], []
        for b, n in enumerate(lengths):
            prompt = torch.from_numpy(ids[b:b + 1, :n])
            with torch.no_grad():
                res = m.generate(prompt, num_beams=beams, do_sample=False, max_new_tokens=N,
                                 output_scores=True, return_dict_in_generate=True,
                                 pad_token_id=PAD, eos_token_id=list(eos), **kw)
            toks = [int(t) for t in res.sequences[0, n:]]
            ends = [i for i, t in enumerate(toks) if t in eos]
            toks = toks[:ends[0] + 1] if ends else toks
            if beams == 1:
                steps = m.compute_transition_scores(res.sequences, res.scores,
                                                    normalize_logits=True).numpy()
                scores.append(float(steps[0, :len(toks)].sum()))
            else:
                scores.append(float(res.sequences_scores[0]))
            rows.append(toks[:-1] if toks and toks[-1] in eos else toks)
        return rows, np.array(scores)

    def check(label, flags, beams, **kw):
        """tfrun --generate with |flags| against generate(num_beams=beams, **kw):
        tokens equal, scores within 1e-3."""
        got, gs = generated(*flags)
        want, ws = reference(beams, **kw)
        serr = float(np.abs(gs - ws).max())
        ok = got == want and serr <= 1e-3
        print(f"{tag}-{label}: tfc {got}\n    transformers {want}, score difference "
              f"{serr:.2g} ({'ok' if ok else 'FAIL'})")
        if not ok:
            failures.append(f"{tag}-{label}")

    for beams in (1, 4):
        check(f"beam{beams}", ("--beam", str(beams)), beams)
    # The same prompts left-padded (transformers' padding_side="left"): the same
    # tokens and scores, where pad_id is not bos.
    if pad != BOS:
        left = np.full_like(ids, pad)
        for b, n in enumerate(lengths):
            left[b, S - n:] = ids[b, :n]
        leftf = os.path.join(work, tag + "-left.npy")
        np.save(leftf, left)
        (got, gs), (want, ws) = generated(inp=leftf), generated()
        ok = got == want and float(np.abs(gs - ws).max()) <= 1e-5
        print(f"{tag}-left-padded: {'ok' if ok else 'FAIL'} (tokens {'equal' if got == want else 'differ'} "
              f"to the right-padded batch's)")
        if not ok:
            failures.append(f"{tag}-left-padded")
    if penalty:
        # transformers' repetition_penalty, greedy: tokens and the processed scores.
        check(f"repetition-penalty-{penalty}", ("--repetition-penalty", str(penalty)), 1,
              repetition_penalty=penalty)


def expect_error(tag, m, rewrite, want):
    d = os.path.join(work, tag)
    m.save_pretrained(d)
    path = os.path.join(d, "config.json")
    cfg = json.load(open(path))
    rewrite(cfg)
    json.dump(cfg, open(path, "w"), indent=2)
    r = subprocess.run([tfc, "compile", d, "-o", os.path.join(work, tag + ".bin")],
                       capture_output=True, text=True)
    ok = r.returncode == 1 and want in r.stderr and not os.path.exists(
        os.path.join(work, tag + ".bin"))
    print(f"{tag}: exit {r.returncode}, {r.stderr.strip()!r} ({'ok' if ok else 'FAIL'})")
    if not ok:
        failures.append(tag)


def small(model, config, **kw):
    """A small |model| (|config| with the shared test sizes; |kw| overrides them; a
    value of None leaves the config's default), with non-trivial norms and biases."""
    base = dict(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=128, initializer_range=0.1,
                bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)
    base.update(kw)
    return perturb(model(config(**{k: v for k, v in base.items() if v is not None})).eval())


def llama(**kw):
    base = dict(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                rms_norm_eps=1e-5, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD,
                tie_word_embeddings=False)
    base.update(kw)
    torch.manual_seed(len(kw))
    return perturb(LlamaForCausalLM(LlamaConfig(**base)).eval())


family("llama-gqa", llama(), precisions=True, penalty=1.3)
# initializer_range 0.2: with the default 0.02 a tied head over 97 tokens is
# nearly flat (log-probabilities within 0.3 of each other), and beam search
# then hinges on near-ties between many hypotheses.
family("llama-mqa", llama(num_key_value_heads=1, head_dim=24, attention_bias=True,
                          tie_word_embeddings=True, initializer_range=0.2,
                          rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                           "factor": 8.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0,
                                           "original_max_position_embeddings": 16}))


def old_layout(cfg):
    rp = cfg.pop("rope_parameters")
    cfg["rope_theta"] = rp["rope_theta"]
    cfg["rope_scaling"] = {"type": rp["rope_type"], "factor": rp["factor"]}


family("llama-linear", llama(rope_parameters={"rope_type": "linear", "rope_theta": 10000.0,
                                              "factor": 4.0}, mlp_bias=True,
                             initializer_range=0.2),
       rewrite=old_layout)
torch.manual_seed(5)
family("mistral", perturb(MistralForCausalLM(MistralConfig(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    sliding_window=None, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)).eval()),
    eos=(EOS, 60, 13))
torch.manual_seed(9)
family("mistral-window", perturb(MistralForCausalLM(MistralConfig(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    sliding_window=3, initializer_range=0.2, bos_token_id=BOS, eos_token_id=EOS,
    pad_token_id=PAD)).eval()))

torch.manual_seed(6)
family("qwen2", perturb(Qwen2ForCausalLM(Qwen2Config(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False,
    sliding_window=64, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)).eval()))
torch.manual_seed(13)
# Qwen2's own window: on the layers from max_window_layers on (here layer 1 of 2).
family("qwen2-window", perturb(Qwen2ForCausalLM(Qwen2Config(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    use_sliding_window=True, sliding_window=3, max_window_layers=1, initializer_range=0.1,
    bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)).eval()))
torch.manual_seed(7)
family("qwen3", perturb(Qwen3ForCausalLM(Qwen3Config(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=128,
    tie_word_embeddings=False, use_sliding_window=False, bos_token_id=BOS, eos_token_id=EOS,
    pad_token_id=PAD)).eval()))

# YaRN (Qwen2.5's and Qwen3's long-context setting): frequencies blended between
# themselves and themselves / factor over a correction range, cos and sin times
# 0.1 ln(factor) + 1; qwen3-yarn-untruncated: its bounds not rounded (truncate:
# false), beta_fast 16 and an explicit attention_factor.
for tag, extra in (("qwen3-yarn", {}),
                   ("qwen3-yarn-untruncated", {"truncate": False, "beta_fast": 16.0,
                                               "attention_factor": 1.3})):
    torch.manual_seed(17)
    family(tag, perturb(Qwen3ForCausalLM(Qwen3Config(
        vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=128,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 8, **extra},
        initializer_range=0.2, use_sliding_window=False, bos_token_id=BOS, eos_token_id=EOS,
        pad_token_id=PAD)).eval()))

torch.manual_seed(10)
family("phi3", perturb(Phi3ForCausalLM(Phi3Config(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    original_max_position_embeddings=128, sliding_window=None, bos_token_id=BOS,
    eos_token_id=EOS, pad_token_id=PAD)).eval()))
torch.manual_seed(11)
family("phi3-window", perturb(Phi3ForCausalLM(Phi3Config(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=128,
    original_max_position_embeddings=128, sliding_window=3, partial_rotary_factor=0.5,
    initializer_range=0.2, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)).eval()))

# LongRoPE (Phi-3 128k, Phi-3.5, Phi-4-mini): per-frequency factors, short up to
# original_max_position_embeddings (32 here) and long beyond, and cos and sin times
# attention_factor (sqrt(1 + ln 4 / ln 32) = 1.18 here). The default context is 32
# positions, with the short factors; --set max_len=128 compiles the long ones, which
# transformers takes for a forward pass past 32 positions. phi3-longrope rotates 3/4
# of each head (Phi-4-mini's partial_rotary_factor): the factor multiplies q and k's
# rotated dims; phi3-longrope-full all of it: the scores' scale takes its square.
def phi3_longrope(partial, seed):
    g = np.random.default_rng(seed)
    half = int(16 * partial) // 2
    torch.manual_seed(seed)
    return perturb(Phi3ForCausalLM(Phi3Config(
        vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        original_max_position_embeddings=32, partial_rotary_factor=partial,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                         "short_factor": [float(x) for x in g.uniform(1, 3, half)],
                         "long_factor": [float(x) for x in g.uniform(2, 8, half)],
                         "original_max_position_embeddings": 32},
        initializer_range=0.2, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)).eval())


for tag, partial in (("phi3-longrope", 0.75), ("phi3-longrope-full", 1.0)):
    lr = phi3_longrope(partial, 16)
    family(tag, lr)
    # The long factors: a 60-token prompt in one forward pass, compiled for 128.
    binp = os.path.join(work, tag + "-long.bin")
    run(tfc, "compile", os.path.join(work, tag), "-o", binp, "--set", "max_len=128")
    ids = np.concatenate([[[BOS]], np.random.default_rng(3).integers(3, V, (1, 59))], axis=1)
    idsf = os.path.join(work, tag + "-long-ids.npy")
    np.save(idsf, ids)
    check_padded_logits(tag + "-long", tfrun, binp, idsf, ids, (60,),
                        copy.deepcopy(lr).double(), TOL_REL, failures)

torch.manual_seed(12)
# Gemma 3: layers 1 and 3 global (rope_theta 1e6 with linear scaling 2), 0 and
# 2 local (a window of 3, rope base 1e4); query_pre_attn_scalar 24, not head_dim 32.
family("gemma3", perturb(Gemma3ForCausalLM(Gemma3TextConfig(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=128,
    query_pre_attn_scalar=24, sliding_window=3,
    layer_types=["sliding_attention", "full_attention"] * 2,
    rope_parameters={"full_attention": {"rope_type": "linear", "rope_theta": 1000000.0,
                                        "factor": 2.0},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
    bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)).eval()))

torch.manual_seed(15)
# Gemma 3's image-text checkpoints (Gemma3ForConditionalGeneration, model_type
# gemma3: Gemma 3 4B, 12B, 27B) compile as their text model, the vision tower
# left out. transformers saves the text model under language_model.model.*;
# checkpoints saved by transformers 4.52-4.57 have it under
# model.language_model.* (gemma3-image-text-moved: the same weights renamed).
gemma3mm = perturb(Gemma3ForConditionalGeneration(Gemma3Config(
    text_config=dict(vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                     max_position_embeddings=128, query_pre_attn_scalar=16, sliding_window=3,
                     layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                     initializer_range=0.1, bos_token_id=BOS, eos_token_id=EOS,
                     pad_token_id=PAD),
    vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                       num_attention_heads=2, image_size=28, patch_size=14),
    mm_tokens_per_image=4, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)).eval())
family("gemma3-image-text", gemma3mm)


def moved_layout(tag, src):
    """|src|'s checkpoint with the text model under model.language_model.*, the
    vision tower and projector under model.*: compiles to the same logits."""
    from safetensors.torch import load_file, save_file
    d = os.path.join(work, tag)
    shutil.copytree(src, d)
    moved = {}
    for k, v in load_file(os.path.join(src, "model.safetensors")).items():
        if k.startswith("language_model.model."):
            k = "model.language_model." + k[len("language_model.model."):]
        elif not k.startswith("language_model."):
            k = "model." + k
        moved[k] = v.contiguous()
    save_file(moved, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    binp = os.path.join(work, tag + ".bin")
    r = run(tfc, "compile", d, "-o", binp)
    # The unused vision tower is one warning, counted by module.
    warned = "are not used by the model: model.multi_modal_projector.* (2), model.vision_tower.*"
    if warned not in r.stderr:
        print(f"{tag}: FAIL, no summarized warning about the vision tower:\n{r.stderr}")
        failures.append(tag + "-warning")
    ids = np.array([[BOS, 5, 9, 23, 44, 17, 60, 3], [BOS, 7, 8, 11, PAD, PAD, PAD, PAD]])
    idsf = os.path.join(work, tag + "-ids.npy")
    np.save(idsf, ids)
    check_padded_logits(tag, tfrun, binp, idsf, ids, (8, 4), copy.deepcopy(gemma3mm).double(),
                        TOL_REL, failures)


moved_layout("gemma3-image-text-moved", os.path.join(work, "gemma3-image-text"))

torch.manual_seed(13)
# Gemma 2: soft-caps of 1 on the attention scores and 2 on the logits, both
# inside the random model's ranges; layers 0 and 2 local (a window of 3).
gemma2 = perturb(Gemma2ForCausalLM(Gemma2Config(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=128,
    query_pre_attn_scalar=24, sliding_window=3, attn_logit_softcapping=1.0,
    final_logit_softcapping=2.0, initializer_range=0.1, bos_token_id=BOS, eos_token_id=EOS,
    pad_token_id=PAD)).eval())
family("gemma2", gemma2, penalty=1.3)


def gemma2_old_layout(cfg):
    cfg["rope_theta"] = cfg.pop("rope_parameters")["rope_theta"]
    del cfg["layer_types"]


family("gemma2-old", gemma2, rewrite=gemma2_old_layout)
# Each soft-cap matters here: without either, the logits move far past the
# tolerance.
with torch.no_grad():
    ids = torch.tensor([[BOS, 5, 9, 23, 44, 17, 60, 3]])
    capped = gemma2(ids).logits
    for which in ("attention", "final"):
        plain = copy.deepcopy(gemma2)
        if which == "final":
            plain.config.final_logit_softcapping = None
        else:
            for layer in plain.model.layers:
                layer.self_attn.attn_logit_softcapping = None
        moved = float((capped - plain(ids).logits).abs().max() / capped.abs().max())
        ok = moved > 100 * TOL_REL
        print(f"gemma2-{which}-softcap-matters: without it the logits move {moved:.3g} of the "
              f"largest ({'ok' if ok else 'FAIL'}, needs > {100 * TOL_REL:.2g})")
        if not ok:
            failures.append(f"gemma2-{which}-softcap-matters")

torch.manual_seed(14)
# Gemma 1 (and CodeGemma): transformers reads the releases' hidden_act "gelu" as
# gelu_pytorch_tanh; the config.json here says "gelu" as theirs do.
family("gemma", perturb(GemmaForCausalLM(GemmaConfig(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=1, head_dim=24, max_position_embeddings=128,
    initializer_range=0.1, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)).eval()),
    rewrite=lambda c: c.update(hidden_act="gelu"))

# SmolLM3: layers 1 and 3 of 4 without rotary positions (NoPE).
torch.manual_seed(18)
smol = perturb(SmolLM3ForCausalLM(SmolLM3Config(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    no_rope_layer_interval=2, initializer_range=0.1, bos_token_id=BOS, eos_token_id=EOS,
    pad_token_id=PAD)).eval())
family("smollm3", smol)
# The NoPE layers matter: with rotary positions on every layer the logits move far
# past the tolerance.
with torch.no_grad():
    ids = torch.tensor([[BOS, 5, 9, 23, 44, 17, 60, 3]])
    roped = copy.deepcopy(smol)
    for layer in roped.model.layers:
        layer.self_attn.use_rope = 1
    moved = float((smol(ids).logits - roped(ids).logits).abs().max() / smol(ids).logits.abs().max())
ok = moved > 100 * TOL_REL
print(f"smollm3-nope-matters: with rotary everywhere the logits move {moved:.3g} of the "
      f"largest ({'ok' if ok else 'FAIL'}, needs > {100 * TOL_REL:.2g})")
if not ok:
    failures.append("smollm3-nope-matters")
torch.manual_seed(19)
family("smollm3-interval", perturb(SmolLM3ForCausalLM(SmolLM3Config(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=5,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    initializer_range=0.1, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)).eval()),
    rewrite=lambda c: (c.pop("no_rope_layers"), c.pop("layer_types", None)))

torch.manual_seed(20)
# OLMo 2: x + norm(f(x)) in both sublayers; q_norm and k_norm over all heads at once.
family("olmo2", perturb(Olmo2ForCausalLM(Olmo2Config(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    initializer_range=0.1, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)).eval()))
torch.manual_seed(21)
# Granite 3's multipliers, at values of the released models' order.
family("granite", perturb(GraniteForCausalLM(GraniteConfig(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.0625,
    logits_scaling=8.0, tie_word_embeddings=True, initializer_range=0.1, bos_token_id=BOS,
    eos_token_id=EOS, pad_token_id=PAD)).eval()))

torch.manual_seed(22)
# Phi-2's layout: x + attention(ln(x)) + mlp(ln(x)), partial rotary embeddings.
family("phi", small(PhiForCausalLM, PhiConfig, hidden_size=80, num_key_value_heads=2,
                    partial_rotary_factor=0.4))
torch.manual_seed(23)
# qk_layernorm, a tied head (its bias is lm_head.bias still), no pad_token_id:
# tfc pads with eos, as generate() does.
family("phi-qk-norm", small(PhiForCausalLM, PhiConfig, partial_rotary_factor=0.5,
                            qk_layernorm=True, tie_word_embeddings=True, pad_token_id=None),
       pad=EOS)

torch.manual_seed(24)
# StarCoder2: LayerNorm, a window of 3 on every layer (shorter than the prompts).
family("starcoder2", small(Starcoder2ForCausalLM, Starcoder2Config, num_key_value_heads=2,
                           sliding_window=3), eos=(EOS, 60, 13))
torch.manual_seed(25)
family("starcoder2-plain", small(Starcoder2ForCausalLM, Starcoder2Config, num_key_value_heads=1,
                                 use_bias=False, tie_word_embeddings=False, pad_token_id=None),
       pad=EOS)

torch.manual_seed(26)
family("stablelm", small(StableLmForCausalLM, StableLmConfig, num_key_value_heads=2,
                         use_qkv_bias=True))
torch.manual_seed(27)
family("stablelm-parallel", small(StableLmForCausalLM, StableLmConfig, num_key_value_heads=1,
                                  use_parallel_residual=True, tie_word_embeddings=True,
                                  pad_token_id=None), pad=EOS)

torch.manual_seed(28)
family("gpt-neox", small(GPTNeoXForCausalLM, GPTNeoXConfig))


def neox_old_layout(cfg):
    # transformers 4's GPT-NeoX config: rotary_pct and rotary_emb_base only.
    rope = cfg.pop("rope_parameters")
    for k in ("partial_rotary_factor", "rope_theta"):
        cfg.pop(k, None)
    cfg.update(rotary_pct=rope["partial_rotary_factor"], rotary_emb_base=rope["rope_theta"])


torch.manual_seed(29)
family("gpt-neox-sequential", small(
    GPTNeoXForCausalLM, GPTNeoXConfig, use_parallel_residual=False, attention_bias=False,
    rope_parameters={"rope_type": "default", "rope_theta": 1000.0, "partial_rotary_factor": 0.5},
    pad_token_id=None), rewrite=neox_old_layout, pad=EOS)

torch.manual_seed(30)
family("cohere", small(CohereForCausalLM, CohereConfig, num_key_value_heads=2))
torch.manual_seed(31)
family("cohere-bias-untied", small(CohereForCausalLM, CohereConfig, num_key_value_heads=4,
                                   attention_bias=True, tie_word_embeddings=False,
                                   logit_scale=0.3))

torch.manual_seed(33)
family("gpt-bigcode", perturb(GPTBigCodeForCausalLM(GPTBigCodeConfig(
    vocab_size=V, n_embd=64, n_head=4, n_layer=2, n_positions=128, initializer_range=0.1,
    bos_token_id=BOS, eos_token_id=EOS)).eval()), pad=EOS)
torch.manual_seed(34)
family("gpt-bigcode-mha", perturb(GPTBigCodeForCausalLM(GPTBigCodeConfig(
    vocab_size=V, n_embd=64, n_head=4, n_layer=2, n_positions=128, n_inner=80,
    multi_query=False, scale_attn_weights=False, tie_word_embeddings=False,
    initializer_range=0.1, bos_token_id=BOS, eos_token_id=EOS)).eval()), pad=EOS)

torch.manual_seed(8)
# GPT-2 has no pad token: tfc pads with eos, as transformers does.
family("gpt2", perturb(GPT2LMHeadModel(GPT2Config(
    vocab_size=V, n_embd=64, n_head=4, n_layer=2, n_positions=128, bos_token_id=BOS,
    eos_token_id=EOS)).eval()), pad=EOS)

def sampling_defaults(tag, m):
    """generation_config.json's do_sample, temperature, top_k and top_p are the model's
    defaults: tfrun --generate samples with them unless told --greedy."""
    d = os.path.join(work, tag)
    m.generation_config.do_sample = True
    m.generation_config.temperature = 0.7
    m.generation_config.top_k = 5
    m.generation_config.top_p = 0.9
    m.save_pretrained(d)
    binp = os.path.join(work, tag + ".bin")
    run(tfc, "compile", d, "-o", binp)
    ids = np.array([[BOS, 5, 9, 23, 44]], dtype=np.int64)
    idsf = os.path.join(work, tag + "-ids.npy")
    np.save(idsf, ids)

    def gen(*flags):
        o = os.path.join(work, f"{tag}-{'-'.join(f.strip('-') for f in flags)}")
        os.makedirs(o, exist_ok=True)
        run(tfrun, binp, "--threads", "1", "--generate", "--max-len", "12", "--seed", "3",
            *flags, "--output-dir", o, "--input", "input_ids=" + idsf)
        return np.load(os.path.join(o, "ids.npy"))[0, :int(np.load(os.path.join(o, "lengths.npy"))[0])].tolist()

    default = gen()
    explicit = gen("--sample", "--temperature", "0.7", "--top-k", "5", "--top-p", "0.9")
    greedy = gen("--greedy")
    with torch.no_grad():
        want = m.generate(torch.from_numpy(ids), do_sample=False, max_new_tokens=12,
                          pad_token_id=PAD)[0, ids.shape[1]:].tolist()
    want = want[:want.index(EOS)] if EOS in want else want
    ok = default == explicit and greedy == want and default != greedy
    print(f"{tag}: default {default}, --sample with the config's values {explicit}, "
          f"--greedy {greedy}, transformers greedy {want} ({'ok' if ok else 'FAIL'})")
    if not ok:
        failures.append(tag)


sampling_defaults("llama-sampling", llama(initializer_range=0.2))
# The LayerNorm decoders read the sampling defaults too.
torch.manual_seed(32)
sampling_defaults("stablelm-sampling", small(StableLmForCausalLM, StableLmConfig,
                                             num_key_value_heads=4, initializer_range=0.2))

expect_error("llama-dynamic", llama(), lambda c: c.update(
    rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}),
    'rope_parameters: rope type "dynamic" is not supported (tfc implements default, linear, '
    'llama3, longrope and yarn; it changes the outputs, so it is not ignored)')
# A repetition_penalty in generation_config.json: per request only.
expect_error("llama-repetition-default", llama(), lambda c: c.update(repetition_penalty=1.1),
             "repetition_penalty: 1.1 is not supported as the model's default")
# A soft-cap that is not a positive number.
expect_error("gemma2-softcap", Gemma2ForCausalLM(Gemma2Config(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, head_dim=32)).eval(),
    lambda c: c.update(final_logit_softcapping=-30.0),
    'final_logit_softcapping: -30.0 is not a positive number or null')
# LongRoPE's factor lists must have one value per rotated frequency pair.
expect_error("phi3-longrope-short-list", llama(), lambda c: c.update(
    model_type="phi3", rope_scaling={"type": "longrope", "short_factor": [1.0] * 8,
                                     "long_factor": [2.0] * 7}, rope_parameters=None,
    original_max_position_embeddings=32),
    'rope_scaling: longrope needs long_factor: a list of rope_dim / 2 = 8 numbers')
# Granite's logits divisor.
expect_error("granite-logits-scaling", GraniteForCausalLM(GraniteConfig(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, pad_token_id=PAD)).eval(),
    lambda c: c.update(logits_scaling=0),
    'logits_scaling: 0 is not a finite number other than zero')
# Phi: the rotary embeddings its description implements.
expect_error("phi-rope-type", PhiForCausalLM(PhiConfig(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, pad_token_id=PAD)).eval(),
    lambda c: c.update(rope_parameters={
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 64,
        "partial_rotary_factor": 0.5}),
    'rope_parameters: rope type "llama3" is not supported by tfc\'s phi description '
    '(default and linear)')
# StableLM 2 12B's q/k LayerNorms have weights of their own per head.
expect_error("stablelm-qk-layernorm", StableLmForCausalLM(StableLmConfig(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=4, pad_token_id=PAD)).eval(),
    lambda c: c.update(qk_layernorm=True),
    "qk_layernorm: true is not supported by tfc's stablelm description (it computes "
    "qk_layernorm: false); it changes the outputs, so it is not ignored")
# Cohere: per-head q/k norm weights (Command R+), and a logit_scale of 0.
for tag, change, want in (
        ("cohere-qk-norm", dict(use_qk_norm=True),
         "use_qk_norm: true is not supported by tfc's cohere description (it computes "
         "use_qk_norm: false); it changes the outputs, so it is not ignored"),
        ("cohere-logit-scale", dict(logit_scale=0),
         "logit_scale: 0 is not a finite number other than zero")):
    expect_error(tag, CohereForCausalLM(CohereConfig(
        vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, pad_token_id=PAD)).eval(),
        lambda c, change=change: c.update(change), want)
# NoPE layers that are not "one layer in every N".
expect_error("smollm3-nope-pattern", SmolLM3ForCausalLM(SmolLM3Config(
    vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2, pad_token_id=PAD)).eval(),
    lambda c: c.update(no_rope_layers=[1, 0, 0, 1]),
    'no_rope_layers: layer 2 breaks the pattern tfc maps (no rotary positions on one layer '
    'in every 2)')
# A window on some layers that are not "every layer from one on" (layer_types).
expect_error("window-pattern", llama(), lambda c: c.update(
    layer_types=["sliding_attention", "full_attention"], sliding_window=3),
    'layer_types: layer 1 has no sliding window after layer 0 has one: tfc maps a window on '
    'every layer from one on')

if failures:
    sys.exit("FAILED: " + ", ".join(failures))
print("all LLaMA-family checks passed")
