"""tfc compile DIR on Hugging Face BERT checkpoints, against transformers.

Builds small random-weight checkpoints with transformers (save_pretrained, which
writes model.safetensors), compiles each directory with tfc, runs it with tfrun on a
padded batch (input_ids, token_type_ids, attention_mask as transformers takes them)
and compares the last hidden state with transformers' (eager attention, f32):
  - BertModel;
  - a BertForSequenceClassification checkpoint (weights under `bert.`), compiled for
    its encoder output;
  - a sharded checkpoint (model.safetensors.index.json), with hidden_act gelu_new;
  - a MiniLM-L6-shaped BertModel (d_model 384, 12 heads, 6 layers);
and the output heads (models/hf/bert.heads.yaml, `--head`):
  - the classifier, the default for a *ForSequenceClassification checkpoint,
    against its logits; the pooler against pooler_output;
  - a sentence-transformers directory (modules.json with Pooling and Normalize):
    its default head against mean pooling + F.normalize, as sentence-transformers
    computes them; mean_pooling and cls_pooling with --head.
and DistilBERT (models/hf/distilbert.yaml): DistilBertModel on a padded batch with
and without the attention_mask, a DistilBertForSequenceClassification checkpoint
(`distilbert.` prefix, pre_classifier + ReLU + classifier) and a
sentence-transformers layout of it.
Usage: bert_test.py TFC TFRUN WORKDIR   (run by ctest through tests/hf/run.sh)
"""
import os
import subprocess
import sys

import numpy as np
import torch
from hfcommon import check_cpu_cap, run
from transformers import (BertConfig, BertForSequenceClassification, BertModel,
                          DistilBertConfig, DistilBertForSequenceClassification, DistilBertModel,
                          RobertaConfig, RobertaForSequenceClassification, RobertaModel,
                          XLMRobertaConfig, XLMRobertaModel)

TOL = 1e-4
tfc, tfrun, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
failures = []



def padded_batch(vocab, type_vocab, lengths, seq, pad=0):
    """Ids in [0, vocab) but pad, with trailing padding (pad, mask 0), mixed token types."""
    g = np.random.default_rng(len(lengths) * 100 + seq)
    ids = g.integers(0, vocab - 1, size=(len(lengths), seq), dtype=np.int64)
    ids[ids >= pad] += 1  # never the pad id
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
        ids[b, n:] = pad
        types[b, n // 2:n] = min(1, type_vocab - 1)
    return ids, types, mask


def last_hidden(model):
    return lambda **kw: model(**kw).last_hidden_state


def check(name, ckpt_dir, reference, config, lengths=(7, 4, 1), seq=7, extra=(),
          output="last_hidden_state", given=("input_ids", "token_type_ids", "attention_mask"),
          all_ones_mask=False):
    """tfrun gets the inputs in |given| only; the optional ones it lacks it makes
    (zeros, input_ids != pad_id), and transformers gets those values."""
    ids, types, mask = padded_batch(config.vocab_size, config.type_vocab_size, lengths, seq,
                                    pad=config.pad_token_id or 0)
    if "token_type_ids" not in given:
        types = np.zeros_like(ids)
    if all_ones_mask:
        mask = np.ones_like(ids)
    files = {}
    for k, v in (("input_ids", ids), ("token_type_ids", types), ("attention_mask", mask)):
        if k not in given:
            continue
        files[k] = os.path.join(work, f"{name}-{k}.npy")
        np.save(files[k], v)
    binp = os.path.join(work, f"{name}.bin")
    run(tfc, "compile", ckpt_dir, "-o", binp, *extra)
    check_cpu_cap(tfrun, binp)
    out = os.path.join(work, f"{name}-out")
    os.makedirs(out, exist_ok=True)
    run(tfrun, binp, "--threads", "1", "--output-dir", out,
        *[a for k, f in files.items() for a in ("--input", f"{k}={f}")])
    got = np.load(os.path.join(out, f"{output}.npy"))
    with torch.no_grad():
        want = reference(input_ids=torch.from_numpy(ids),
                         token_type_ids=torch.from_numpy(types),
                         attention_mask=torch.from_numpy(mask)).numpy()
    err = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
    ok = err <= TOL
    print(f"{name}: shape {list(got.shape)}, max |tfc - transformers| = {err:.3g} "
          f"({'ok' if ok else 'FAIL'}, tolerance {TOL:g})")
    if not ok:
        failures.append(name)


def make(config, cls=BertModel, seed=0):
    torch.manual_seed(seed)
    m = cls(config).eval()
    # Non-trivial norms and biases (random init leaves them at 1 and 0).
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    return m


small = dict(hidden_size=32, num_attention_heads=4, intermediate_size=64, num_hidden_layers=2,
             vocab_size=100, max_position_embeddings=64, attn_implementation="eager")

# 1. BertModel.
cfg = BertConfig(**small)
m = make(cfg)
d = os.path.join(work, "bert")
m.save_pretrained(d)
check("bert", d, last_hidden(m), cfg)
# Optional inputs: input_ids alone (padded: the mask is input_ids != pad_id).
check("bert-ids-only", d, last_hidden(m), cfg, given=("input_ids",))
check("bert-no-types", d, last_hidden(m), cfg, given=("input_ids", "attention_mask"))
# A mask the caller gives wins over the default: all ones attends to the padding.
check("bert-ones-mask", d, last_hidden(m), cfg, given=("input_ids", "attention_mask"),
      all_ones_mask=True)
check("bert-pooler", d, lambda **kw: m(**kw).pooler_output, cfg, extra=("--head", "pooler"),
      output="pooler_output")

# 2. A task checkpoint: the encoder under `bert.`, a classifier beside it.
cfg = BertConfig(**small, num_labels=3)
m = make(cfg, BertForSequenceClassification, seed=1)
d = os.path.join(work, "bert-seqcls")
m.save_pretrained(d)
assert any(k.startswith("bert.") for k in m.state_dict()), "expected a bert. prefix"
check("bert-seqcls", d, last_hidden(m.bert), cfg, extra=("--head", "last_hidden_state"))
# Without --head a sequence-classification checkpoint gets its classifier.
check("bert-seqcls-logits", d, lambda **kw: m(**kw).logits, cfg, output="logits")

# 3. Sharded, gelu_new (tanh GELU), three token types, odd sizes.
cfg = BertConfig(**{**small, "hidden_size": 48, "num_attention_heads": 3,
                    "intermediate_size": 80, "num_hidden_layers": 3},
                 hidden_act="gelu_new", type_vocab_size=3, layer_norm_eps=1e-6)
m = make(cfg, seed=2)
d = os.path.join(work, "bert-sharded")
m.save_pretrained(d, max_shard_size="40KB")
assert os.path.exists(os.path.join(d, "model.safetensors.index.json")), "expected shards"
check("bert-sharded", d, last_hidden(m), cfg, lengths=(5, 9, 3, 9), seq=9)

# 4. MiniLM-L6 shape (all-MiniLM-L6-v2's config, smaller vocabulary).
cfg = BertConfig(hidden_size=384, num_attention_heads=12, intermediate_size=1536,
                 num_hidden_layers=6, vocab_size=1000, max_position_embeddings=512,
                 attn_implementation="eager")
m = make(cfg, seed=3)
d = os.path.join(work, "minilm")
m.save_pretrained(d)
check("minilm-l6", d, last_hidden(m), cfg, lengths=(16, 11, 3, 16), seq=16)


def mean_pooled(model, normalize):
    """sentence-transformers' Pooling(mean) [+ Normalize()], written out."""
    def f(attention_mask, **kw):
        h = model(attention_mask=attention_mask, **kw).last_hidden_state
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(e, p=2, dim=1) if normalize else e
    return f


# 5. The same model as a sentence-transformers directory: modules.json names a
# Pooling (mean) and a Normalize module, so the default head embeds.
import json
import shutil
st = os.path.join(work, "minilm-st")
shutil.copytree(d, st)
with open(os.path.join(st, "modules.json"), "w") as f:
    json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}], f)
os.makedirs(os.path.join(st, "1_Pooling"))
with open(os.path.join(st, "1_Pooling", "config.json"), "w") as f:
    json.dump({"word_embedding_dimension": 384, "pooling_mode_cls_token": False,
               "pooling_mode_mean_tokens": True}, f)
check("minilm-st-embedding", st, mean_pooled(m, True), cfg, lengths=(16, 11, 3, 16), seq=16,
      output="sentence_embedding")
check("minilm-mean-pooling", d, mean_pooled(m, False), cfg, lengths=(16, 11, 3, 16), seq=16,
      extra=("--head", "mean_pooling"), output="sentence_embedding")
check("minilm-cls-pooling", d, lambda **kw: m(**kw).last_hidden_state[:, 0], cfg,
      lengths=(16, 11, 3, 16), seq=16, extra=("--head", "cls_pooling"),
      output="sentence_embedding")
r = subprocess.run([tfc, "compile", d, "--head", "pool", "-o", os.path.join(work, "x.bin")],
                   capture_output=True, text=True)
want = (f"error: {d}: --head pool: the bert description has the heads: classifier, "
        "cls_pooling, last_hidden_state, mean_pooling, pooler, sentence_embedding")
print(f"--head pool: exit {r.returncode}, {r.stderr.strip()!r}")
if r.returncode == 0 or r.stderr.strip() != want:
    failures.append("--head pool")

# 6. DistilBERT: no token types, so tfrun gets input_ids (and the mask) only.
def no_types(f):
    return lambda token_type_ids, **kw: f(**kw)


dcfg = DistilBertConfig(dim=32, n_heads=4, hidden_dim=64, n_layers=2, vocab_size=100,
                        max_position_embeddings=64, attn_implementation="eager")
dcfg.type_vocab_size = 1  # for padded_batch: no token types
m = make(dcfg, DistilBertModel, seed=4)
d = os.path.join(work, "distilbert")
m.save_pretrained(d)
check("distilbert", d, no_types(last_hidden(m)), dcfg, given=("input_ids", "attention_mask"))
check("distilbert-ids-only", d, no_types(last_hidden(m)), dcfg, given=("input_ids",))
dcfg = DistilBertConfig(**{k: getattr(dcfg, k) for k in ("dim", "n_heads", "hidden_dim", "n_layers",
                                                          "vocab_size", "max_position_embeddings")},
                        num_labels=4, attn_implementation="eager")
dcfg.type_vocab_size = 1
m = make(dcfg, DistilBertForSequenceClassification, seed=5)
d = os.path.join(work, "distilbert-seqcls")
m.save_pretrained(d)
check("distilbert-seqcls-logits", d, no_types(lambda **kw: m(**kw).logits), dcfg,
      given=("input_ids", "attention_mask"), output="logits")
st = os.path.join(work, "distilbert-st")
shutil.copytree(os.path.join(work, "distilbert"), st)
shutil.copy(os.path.join(work, "minilm-st", "modules.json"), st)
shutil.copytree(os.path.join(work, "minilm-st", "1_Pooling"), os.path.join(st, "1_Pooling"))
m = DistilBertModel.from_pretrained(os.path.join(work, "distilbert"), attn_implementation="eager").eval()
check("distilbert-st-embedding", st, no_types(mean_pooled(m, True)), dcfg,
      given=("input_ids", "attention_mask"), output="sentence_embedding")

# 7. RoBERTa and XLM-RoBERTa: positions numbered from pad_token_id + 1 over the
# real tokens, padding (id 1) at row 1; roberta-base's 514 positions and one type.
rsmall = dict(hidden_size=32, num_attention_heads=4, intermediate_size=64, num_hidden_layers=2,
              vocab_size=100, max_position_embeddings=18, type_vocab_size=1,
              layer_norm_eps=1e-5, attn_implementation="eager")
rcfg = RobertaConfig(**rsmall)
m = make(rcfg, RobertaModel, seed=6)
d = os.path.join(work, "roberta")
m.save_pretrained(d)
check("roberta", d, last_hidden(m), rcfg, lengths=(16, 9, 2), seq=16)
check("roberta-ids-only", d, last_hidden(m), rcfg, lengths=(16, 9, 2), seq=16, given=("input_ids",))
check("roberta-pooler", d, lambda **kw: m(**kw).pooler_output, rcfg, lengths=(16, 9, 2), seq=16,
      extra=("--head", "pooler"), output="pooler_output")
rcfg = RobertaConfig(**rsmall, num_labels=3)
m = make(rcfg, RobertaForSequenceClassification, seed=7)
d = os.path.join(work, "roberta-seqcls")
m.save_pretrained(d)
check("roberta-seqcls-logits", d, lambda **kw: m(**kw).logits, rcfg, output="logits")
xcfg = XLMRobertaConfig(**{**rsmall, "vocab_size": 250})
m = make(xcfg, XLMRobertaModel, seed=8)
d = os.path.join(work, "xlm-roberta")
m.save_pretrained(d)
check("xlm-roberta", d, last_hidden(m), xcfg, lengths=(5, 16, 12), seq=16)
# A sequence longer than max_position_embeddings - pad_token_id - 1 = 16 is the
# declared maximum's error, not a read past the position table.
np.save(os.path.join(work, "long.npy"), np.full((1, 17), 5, np.int64))
r = subprocess.run([tfrun, os.path.join(work, "xlm-roberta.bin"), "--input",
                    "input_ids=" + os.path.join(work, "long.npy")], capture_output=True, text=True)
print(f"17 tokens: exit {r.returncode}, {r.stderr.strip()!r}")
if r.returncode == 0 or "beyond the declared maximum seq_len = 16" not in r.stderr:
    failures.append("roberta max_len")

# 8. --set still overrides config.json: a wrong heads compiles, and differs.
r = subprocess.run([tfc, "compile", os.path.join(work, "bert"), "--set", "heads=2",
                    "-o", os.path.join(work, "bert-heads2.bin")], capture_output=True, text=True)
print(f"--set heads=2 over config.json's 4: exit {r.returncode}")
if r.returncode != 0:
    failures.append("--set")

print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
