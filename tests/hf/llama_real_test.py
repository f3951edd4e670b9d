"""tfc compile DIR on decoder-only checkpoints at real models' shapes, against
transformers (ctest hf-llama-real-size; the small checkpoints of every family
are llama_test.py's).

One random-weight checkpoint per shape, with each real model's widths, heads,
head_dim, vocabulary, rope, biases, norms and tying, and 2 layers (the depth
changes no kernel's shape; Gemma 2's pair is one local and one global layer):
  - smollm2-135m (Llama: 9 heads over 3, tied), qwen2.5-0.5b (Qwen2: q/k/v
    biases, 14 heads over 2, vocabulary 151936), llama-3.2-1b (llama3 rope
    scaling, 32 heads over 8, vocabulary 128256), qwen3-0.6b (q/k norms,
    head_dim 128 beside hidden 1024), gemma-2-2b (head_dim 256, query scale
    256, soft-caps 50 and 30, GeGLU, vocabulary 256000) and mistral at a
    quarter of Mistral 7B's width (hidden 1024, head_dim 128, untied), phi-2
    (a parallel block, 32 of 80 dims per head rotated, biases everywhere) and
    starcoder2-3b (LayerNorm, 24 heads over 2, a window of 4096, biases, tied);
  - saved in bf16, as these models are published: tfc widens the weights to
    f32 and transformers runs the same values in f32.
Checks, per shape (the issue's "Must match"):
  - the logits of a right-padded batch of 3 prompts (41, 17 and 5 tokens)
    against transformers f32 on each prompt alone, within 1e-4 of the largest;
  - greedy generation of 32 new tokens for the batch (tfrun --generate) against
    generate() of each prompt alone: equal tokens, up to a near-tie (two
    tokens whose transformers logits are within that tolerance, where either
    is right; the comparison stops there and says so);
  - the same prompts left-padded: the right-padded batch's tokens;
  - sampling with a seed (--sample --seed, temperature 2, 8 tokens): the same
    tokens twice, others with another seed (at temperature 1 the random
    Gemma 2 repeats its last token, whatever the seed).
Each shape's checkpoint is removed once compiled, and its model.bin once its
checks pass.
Usage: llama_real_test.py TFC TFRUN WORKDIR [SHAPE ...]   (run by ctest through
tests/hf/run.sh; SHAPEs: only those)
"""
import copy
import os
import shutil
import sys

import numpy as np
import torch
from hfcommon import check_cpu_cap, check_padded_logits, run
from transformers import (Gemma2Config, Gemma2ForCausalLM, LlamaConfig, LlamaForCausalLM,
                          MistralConfig, MistralForCausalLM, PhiConfig, PhiForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM, Starcoder2Config,
                          Starcoder2ForCausalLM)

TOL_REL = 1e-4
N = 32
tfc, tfrun, work = sys.argv[1:4]
only = set(sys.argv[4:])
os.makedirs(work, exist_ok=True)
failures = []
PAD, BOS, EOS = 0, 1, 2
LENGTHS = (41, 17, 5)


def perturb(m):
    """Non-trivial norms and biases, and every parameter rounded to bf16 (as
    published) but kept in f32. Only the parameters: m.to(bfloat16) would round
    the rotary inv_freq buffers too, and transformers' rope with them."""
    with torch.no_grad():
        for _, p in m.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
            p.copy_(p.to(torch.bfloat16).float())
    return m.eval()


def shape(tag, make):
    if only and tag not in only:
        return
    m = make()
    V = m.config.vocab_size
    d = os.path.join(work, tag)
    m.generation_config.eos_token_id = EOS
    copy.deepcopy(m).to(torch.bfloat16).save_pretrained(d)  # the same values, in bf16
    binp = os.path.join(work, tag + ".bin")
    run(tfc, "compile", d, "-o", binp)
    shutil.rmtree(d)  # up to 1.2 GB, not needed past here: the suite's peak disk stays low
    check_cpu_cap(tfrun, binp)

    g = np.random.default_rng(3)
    S = max(LENGTHS)
    ids = np.full((len(LENGTHS), S), PAD, dtype=np.int64)
    left = ids.copy()
    for b, n in enumerate(LENGTHS):
        ids[b, 0] = BOS
        ids[b, 1:n] = g.integers(3, V, size=n - 1)
        left[b, S - n:] = ids[b, :n]
    idsf, leftf = os.path.join(work, tag + "-ids.npy"), os.path.join(work, tag + "-left.npy")
    np.save(idsf, ids)
    np.save(leftf, left)

    tol = check_padded_logits(tag, tfrun, binp, idsf, ids, LENGTHS, m, TOL_REL, failures,
                              threads=2, ref="f32")

    def generated(name, inp, *flags, new=N):
        o = os.path.join(work, f"{tag}-{name}")
        os.makedirs(o, exist_ok=True)
        run(tfrun, binp, "--threads", "2", "--generate", "--max-len", str(new), *flags,
            "--output-dir", o, "--input", "input_ids=" + inp)
        toks, lens = np.load(os.path.join(o, "ids.npy")), np.load(os.path.join(o, "lengths.npy"))
        return [[int(t) for t in toks[b, :lens[b]]] for b in range(len(LENGTHS))]

    greedy = generated("greedy", idsf, "--greedy")
    for b, n in enumerate(LENGTHS):
        with torch.no_grad():
            res = m.generate(torch.from_numpy(ids[b:b + 1, :n]), do_sample=False,
                             max_new_tokens=N, output_scores=True,
                             return_dict_in_generate=True, pad_token_id=PAD)
        want = [int(t) for t in res.sequences[0, n:]]
        mine = greedy[b]  # without the eos tfrun stopped at, if any
        verdict, ok = "equal", True
        for i, (t, w) in enumerate(zip(mine + [EOS], want)):
            if t == w:
                if t == EOS:
                    break
                continue
            logits = res.scores[i][0].numpy()
            gap = abs(float(logits[w] - logits[t]))
            if gap <= tol:
                verdict = f"equal up to a near-tie at step {i} (logits {gap:.2g} apart)"
            else:
                verdict, ok = f"differ at step {i} (tfc {t}, transformers {w})", False
            break
        print(f"{tag}-greedy-{b}: {len(mine)} tokens, {verdict} ({'ok' if ok else 'FAIL'})")
        if not ok:
            failures.append(f"{tag}-greedy-{b}")

    ok = generated("left", leftf, "--greedy") == greedy
    print(f"{tag}-left-padded: {'ok' if ok else 'FAIL'} (the right-padded batch's tokens)")
    if not ok:
        failures.append(f"{tag}-left-padded")

    one, two, other = (generated(f"sample-{i}", idsf, "--sample", "--temperature", "2",
                                 "--seed", str(s), new=8)
                       for i, s in ((1, 7), (2, 7), (3, 8)))
    ok = one == two and one != other
    print(f"{tag}-seeded-sampling: {'ok' if ok else 'FAIL'} (seed 7 twice: "
          f"{'the same' if one == two else 'different'} tokens; seed 8: "
          f"{'different' if one != other else 'the same'})")
    if not ok:
        failures.append(f"{tag}-seeded-sampling")

    if not failures:  # 0.2-3 GB: gone once checked, kept after a failure
        os.remove(binp)


common = dict(num_hidden_layers=2, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)
torch.manual_seed(20)
shape("smollm2-135m", lambda: perturb(LlamaForCausalLM(LlamaConfig(
    vocab_size=49152, hidden_size=576, intermediate_size=1536, num_attention_heads=9,
    num_key_value_heads=3, max_position_embeddings=8192, rms_norm_eps=1e-5,
    rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
    tie_word_embeddings=True, **common))))
torch.manual_seed(21)
shape("qwen2.5-0.5b", lambda: perturb(Qwen2ForCausalLM(Qwen2Config(
    vocab_size=151936, hidden_size=896, intermediate_size=4864, num_attention_heads=14,
    num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-6,
    rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False,
    sliding_window=32768, max_window_layers=21, **common))))
torch.manual_seed(22)
shape("llama-3.2-1b", lambda: perturb(LlamaForCausalLM(LlamaConfig(
    vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_attention_heads=32,
    num_key_value_heads=8, head_dim=64, max_position_embeddings=131072, rms_norm_eps=1e-5,
    rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
    tie_word_embeddings=True, **common))))
torch.manual_seed(23)
shape("qwen3-0.6b", lambda: perturb(Qwen3ForCausalLM(Qwen3Config(
    vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_attention_heads=16,
    num_key_value_heads=8, head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6,
    rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False, **common))))
torch.manual_seed(24)
shape("gemma-2-2b", lambda: perturb(Gemma2ForCausalLM(Gemma2Config(
    vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_attention_heads=8,
    num_key_value_heads=4, head_dim=256, query_pre_attn_scalar=256, sliding_window=4096,
    attn_logit_softcapping=50.0, final_logit_softcapping=30.0, max_position_embeddings=8192,
    rms_norm_eps=1e-6, **common))))
torch.manual_seed(25)
shape("mistral-quarter", lambda: perturb(MistralForCausalLM(MistralConfig(
    vocab_size=32768, hidden_size=1024, intermediate_size=3584, num_attention_heads=8,
    num_key_value_heads=2, max_position_embeddings=32768, rms_norm_eps=1e-5,
    rope_theta=1000000.0, sliding_window=None, tie_word_embeddings=False, **common))))

torch.manual_seed(26)
shape("phi-2", lambda: perturb(PhiForCausalLM(PhiConfig(
    vocab_size=51200, hidden_size=2560, intermediate_size=10240, num_attention_heads=32,
    max_position_embeddings=2048, layer_norm_eps=1e-5, partial_rotary_factor=0.4,
    rope_theta=10000.0, tie_word_embeddings=False, **common))))

torch.manual_seed(27)
shape("starcoder2-3b", lambda: perturb(Starcoder2ForCausalLM(Starcoder2Config(
    vocab_size=49152, hidden_size=3072, intermediate_size=12288, num_attention_heads=24,
    num_key_value_heads=2, max_position_embeddings=16384, norm_epsilon=1e-5,
    rope_theta=999999.4420358813, sliding_window=4096, use_bias=True,
    tie_word_embeddings=True, **common))))

if failures:
    sys.exit("FAILED: " + ", ".join(failures))
print("all real-shape checks passed")
