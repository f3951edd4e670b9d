#!/usr/bin/python3
"""Reference generation in PyTorch (the ground truth for `tfrun --generate`).

No KV cache: every step recomputes the decoder over the whole prefix, as the
tutorials' own decoding loops do. The semantics are docs/generation.md's:

  greedy_tutorial()  greedy search (arg-max of the logits, the lowest id on a tie)
  beam()             beam search (log_softmax in f32, candidates ranked by score with
                     ties to the lower flat index h * vocab + v, length penalty alpha)

Per model, one step is:
  tutorial-floydhub  the FloydHub tutorial's translate() loop (seed 003): encoder once,
                     then model.out(model.decoder(outputs[:i], e_outputs, src_mask,
                     nopeak_mask)), the no-peek mask only (no target padding mask);
  tutorial-wandb     the same loop through the model's encode()/decode() with the
                     Annotated Transformer's subsequent_mask (the W&B post shows no
                     decoding loop), final_layer on the last position;
  gpt2               decoder-only: the prompt (right-padded rows: the trailing pad ids
                     are stripped), then each arg-max token appended.
A padded batch is decoded item by item; a source keeps its padding, which the source
mask hides as the model's forward does.

`max_len` counts NEW tokens, the eos included. Returned ids leave out the bos/prompt
and the eos. Greedy's score is the sum of the chosen tokens' log-probabilities (eos
included); beam's is the winner's normalized score, score / length^alpha.

Command line (Debian's /usr/bin/python3):
  generate_ref.py MODEL --weights W.safetensors [--set NAME=VALUE ...]
      --input src=FILE.npy | --input tokens=FILE.npy
      [--beam K] [--max-len N] [--length-penalty A] --bos B --eos E --pad P -o OUTDIR
writes OUTDIR/ids.npy (int64 [batch, longest], padded with pad), OUTDIR/lengths.npy
(int64 [batch], the number of returned ids) and OUTDIR/scores.npy (float32 [batch]):
the files `tfrun model.bin --generate ... --output-dir OUTDIR` writes. An eos id that
never occurs (e.g. --eos -1; tfrun itself wants ids in [0, vocab)) forces exactly
max_len tokens. --max-len defaults to what fits the model's max_len positions:
max_len - longest prompt + 1 (the bos is the prompt of an encoder-decoder model).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models as tm  # noqa: E402

GEN_MODELS = ('tutorial-floydhub', 'tutorial-wandb', 'gpt2')


# -------------------------------------------------------------------------------------
# Model loading.
# -------------------------------------------------------------------------------------
def load_model(name, weights, sets=(), pad=None):
    """Build MODEL from the params (defaults, the file's metadata, then --set) and load
    the weights. Returns (model, params)."""
    tensors, meta = tm.load_safetensors(weights)
    if meta.get('model') not in (None, name):
        raise SystemExit(f'{weights} holds model {meta.get("model")!r}, not {name!r}')
    sets = list(sets)
    if pad is not None and not any(s.split('=', 1)[0].strip() == 'pad_id' for s in sets):
        sets.append(f'pad_id={pad}')
    params = tm.resolve_params(name, sets, json.loads(meta.get('params', '{}')))
    torch.manual_seed(0)
    m = tm.build(name, params)
    missing, unexpected = m.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()},
                                            strict=False)
    bad = [k for k in missing if k not in getattr(m, 'tied', {})]
    if bad or unexpected:
        raise SystemExit(f'weights do not match: missing={bad} unexpected={unexpected}')
    m.eval()
    return m, params


# -------------------------------------------------------------------------------------
# One decoding step per model: prepare(item) once, then logits(state, prefix) for the
# last position of the prefix (a 1-D int64 tensor: bos + tokens, or prompt + tokens).
# -------------------------------------------------------------------------------------
def _nopeak(i):
    # The tutorial's translate(): np.triu(np.ones((1, i, i)), k=1) == 0, no padding mask.
    trg_mask = np.triu(np.ones((1, i, i)), k=1).astype('uint8')
    return torch.from_numpy(trg_mask) == 0


class _Floydhub:
    def __init__(self, model, pad):
        self.m, self.pad = model, pad

    def prepare(self, src_row):
        src = src_row.unsqueeze(0)                              # [1, S], padding kept
        src_mask = (src != self.pad).unsqueeze(-2)
        e_outputs = self.m.encoder(src, src_mask)
        return e_outputs, src_mask

    def logits(self, state, prefix):
        e_outputs, src_mask = state
        i = prefix.numel()
        out = self.m.out(self.m.decoder(prefix.unsqueeze(0), e_outputs, src_mask, _nopeak(i)))
        return out[0, -1]


class _Wandb:
    def __init__(self, model, pad):
        self.m, self.pad = model, pad

    def prepare(self, src_row):
        src = src_row.unsqueeze(0)
        src_mask = (src != self.pad).unsqueeze(-2)
        return self.m.encode(src, src_mask), src_mask

    def logits(self, state, prefix):
        memory, src_mask = state
        ys = prefix.unsqueeze(0)
        out = self.m.decode(memory, src_mask, ys, tm.subsequent_mask(ys.size(1)))
        return self.m.final_layer(out[:, -1])[0]               # LogSoftmax(l1(x))


class _Gpt2:
    def __init__(self, model, pad):
        self.m, self.pad = model, pad

    def prepare(self, row):
        return None

    def logits(self, state, prefix):
        return self.m(prefix.unsqueeze(0))[0, -1]


_STEPPERS = {'tutorial-floydhub': _Floydhub, 'tutorial-wandb': _Wandb, 'gpt2': _Gpt2}


def is_decoder_only(name):
    return name == 'gpt2'


def _items(name, x, bos, pad):
    """Per batch item: (the row prepare() reads, the start prefix)."""
    x = torch.as_tensor(np.asarray(x), dtype=torch.int64)
    if x.dim() == 1:
        x = x.unsqueeze(0)
    for row in x:
        if is_decoder_only(name):
            nz = (row != pad).nonzero()
            n = int(nz[-1]) + 1 if len(nz) else 0              # strip the right padding
            if n == 0:
                raise SystemExit('empty prompt (a row of pad ids only)')
            yield row, row[:n].clone()
        else:
            yield row, torch.tensor([bos], dtype=torch.int64)


def _logp(logits):
    return F.log_softmax(logits.to(torch.float32), dim=-1)


def _stepper(name, model, pad):
    if name not in _STEPPERS:
        raise SystemExit(f'{name}: no reference generation (models: {", ".join(GEN_MODELS)})')
    return _STEPPERS[name](model, pad)


# -------------------------------------------------------------------------------------
# Greedy search.
# -------------------------------------------------------------------------------------
@torch.inference_mode()
def greedy_tutorial(name, model, src_or_prompt, max_len, bos, eos, pad):
    """Returns [(ids: list of int, score: float32)] per batch item."""
    st = _stepper(name, model, pad)
    results = []
    for row, prefix in _items(name, src_or_prompt, bos, pad):
        state = st.prepare(row)
        outputs = prefix
        ids, score = [], torch.zeros((), dtype=torch.float32)
        for _ in range(max_len):
            logits = st.logits(state, outputs)
            ix = int(torch.argmax(logits))                       # first maximum = lowest id
            score = score + _logp(logits)[ix]
            if ix == eos:
                break
            ids.append(ix)
            outputs = torch.cat([outputs, torch.tensor([ix], dtype=torch.int64)])
        results.append((ids, np.float32(score)))
    return results


# -------------------------------------------------------------------------------------
# Beam search (docs/generation.md).
# -------------------------------------------------------------------------------------
@torch.inference_mode()
def beam(name, model, src_or_prompt, K, max_len, alpha, bos, eos, pad):
    """Returns [(ids, normalized score: float32)] per batch item."""
    st = _stepper(name, model, pad)
    alpha = float(alpha)
    results = []
    for row, prefix in _items(name, src_or_prompt, bos, pad):
        state = st.prepare(row)
        live = [([], torch.zeros((), dtype=torch.float32))]     # (tokens, score)
        finished = []                                           # (tokens, normalized score)
        for t in range(max_len):
            cand = torch.stack([
                h_score + _logp(st.logits(state, torch.cat([prefix, torch.tensor(toks, dtype=torch.int64)])))
                for toks, h_score in live])                     # [n_live, vocab] f32
            vocab = cand.size(1)
            flat = cand.reshape(-1)
            # The best 2K candidates (ties: lower flat index): those among the first K
            # that are eos finish, and the first K that are not stay live (as
            # transformers' beam search).
            order = np.argsort(-flat.numpy(), kind='stable')[:2 * K]
            new_live = []
            for rank, idx in enumerate(order):
                h, v = divmod(int(idx), vocab)
                s = flat[int(idx)]
                if v == eos:
                    if rank < K:
                        finished.append((live[h][0], np.float32(s.item() / float(t + 1) ** alpha)))
                elif len(new_live) < K:
                    new_live.append((live[h][0] + [v], s))
            live = new_live
            if t + 1 == max_len:      # (also when `finished` is full at this step)
                for toks, s in live:
                    finished.append((toks, np.float32(s.item() / float(max_len) ** alpha)))
                break
            if len(finished) >= K or not live:
                break
        best = None
        for toks, ns in finished:                                # first finished wins a tie
            if best is None or ns > best[1]:
                best = (toks, ns)
        if best is None:                                         # max_len == 0
            best = ([], np.float32(0.0))
        results.append(best)
    return results


# -------------------------------------------------------------------------------------
# Files.
# -------------------------------------------------------------------------------------
def to_arrays(results, pad):
    longest = max((len(ids) for ids, _ in results), default=0)
    out = np.full((len(results), longest), pad, dtype=np.int64)
    for b, (ids, _) in enumerate(results):
        out[b, :len(ids)] = ids
    lengths = np.array([len(ids) for ids, _ in results], dtype=np.int64)
    scores = np.array([s for _, s in results], dtype=np.float32)
    return out, lengths, scores


def write_outputs(outdir, results, pad):
    os.makedirs(outdir, exist_ok=True)
    ids, lengths, scores = to_arrays(results, pad)
    np.save(os.path.join(outdir, 'ids.npy'), ids)
    np.save(os.path.join(outdir, 'lengths.npy'), lengths)
    np.save(os.path.join(outdir, 'scores.npy'), scores)
    return ids, lengths, scores


def default_max_len(name, params, x, pad):
    """As many new tokens as fit (docs/generation.md): every token fed needs a position
    and the last new one is never fed, so longest prompt + max_len - 1 <= max_len."""
    if is_decoder_only(name):
        x = np.asarray(x)
        longest = max(int(np.nonzero(r != pad)[0][-1]) + 1 for r in x.reshape(-1, x.shape[-1]))
        return params['max_len'] - longest + 1
    return params['max_len']


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('model', choices=GEN_MODELS)
    ap.add_argument('--weights', required=True)
    ap.add_argument('--set', action='append', default=[], metavar='NAME=VALUE')
    ap.add_argument('--input', action='append', default=[], metavar='NAME=FILE.npy')
    ap.add_argument('--beam', type=int, default=1, metavar='K')
    ap.add_argument('--max-len', type=int, default=None)
    ap.add_argument('--length-penalty', type=float, default=1.0, metavar='ALPHA')
    ap.add_argument('--bos', type=int, required=True)
    ap.add_argument('--eos', type=int, required=True)
    ap.add_argument('--pad', type=int, required=True)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('-o', '--output', required=True, metavar='OUTDIR')
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    want = 'tokens' if is_decoder_only(a.model) else 'src'
    x = None
    for s in a.input:
        k, path = s.split('=', 1)
        if k != want:
            raise SystemExit(f'{a.model}: generation reads --input {want}=FILE.npy, not {k!r}')
        x = np.load(path)
        if not np.issubdtype(x.dtype, np.integer):
            raise SystemExit(f'input {k}: expected integer token ids, got {x.dtype}')
        x = x.astype(np.int64)
    if x is None:
        raise SystemExit(f'--input {want}=FILE.npy is required')
    model, params = load_model(a.model, a.weights, a.set, pad=a.pad)
    room = default_max_len(a.model, params, x, a.pad)
    max_len = a.max_len if a.max_len is not None else room
    if max_len > room:
        raise SystemExit(f'--max-len {max_len}: the bos/prompt + max_len - 1 exceed the model\'s '
                         f'{params["max_len"]} positions')
    if a.beam > 1:
        res = beam(a.model, model, x, a.beam, max_len, a.length_penalty, a.bos, a.eos, a.pad)
    else:
        res = greedy_tutorial(a.model, model, x, max_len, a.bos, a.eos, a.pad)
    ids, lengths, scores = write_outputs(a.output, res, a.pad)
    print(f'wrote {a.output}/{{ids,lengths,scores}}.npy: ids {list(ids.shape)}, '
          f'lengths {lengths.tolist()}, scores {[round(float(s), 4) for s in scores]}')


if __name__ == '__main__':
    main()
