#!/usr/bin/python3
"""Generates the generation goldens under tests/golden-gen/ (needs python3-torch).

For tutorial-floydhub, tutorial-wandb and gpt2 at make_goldens.py's small sizes
(d_model 32, heads 4, d_ff 64, layers 2, max_len 64, vocab 40), with the weights of
tests/golden/<model>/ (copied), scripts/generate_ref.py decodes a padded batch of 3:

  tests/golden-gen/<model>/weights.safetensors  the weights (= tests/golden/<model>/'s)
  tests/golden-gen/<model>/src.npy              enc-dec: 3 sources of different lengths,
                                                padded with pad_id 0
  tests/golden-gen/<model>/tokens.npy           gpt2: 3 right-padded prompts
  tests/golden-gen/<model>/greedy/{ids,lengths,scores}.npy   greedy, max_len 12
  tests/golden-gen/<model>/beam/{ids,lengths,scores}.npy     beam K=3, alpha 0.6, max_len 12
  tests/golden-gen/<model>/params.txt   line 1: the --set flags for `tfc compile`
                                        (sizes, bos_id, eos_id, pad_id); then '#' notes
  tests/golden-gen/<model>/generate.txt the tfrun options of each output directory

bos 1, pad 0. With random weights eos is rarely produced, so the eos id is chosen per
model: 2 if that already works, otherwise the lowest id that does. "Works" means: in
greedy, one sequence ends with eos after at least one token and another runs to
max_len; in beam, at least one result ends with eos. The outputs are then regenerated
with that eos. The choice is written to params.txt.

Run: /usr/bin/python3 scripts/make_gen_goldens.py [MODEL ...]
"""
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate_ref as g  # noqa: E402
import make_goldens as mg  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests")
MAX_LEN, K, ALPHA, BOS, PAD = 12, 3, 0.6, 1, 0
SRC_LENGTHS = [7, 4, 6]        # enc-dec sources
PROMPT_LENGTHS = [6, 4, 2]     # gpt2 prompts


def eos_works(greedy, beam):
    g_eos = [len(ids) < MAX_LEN for ids, _ in greedy]
    g_nonempty_eos = [len(ids) < MAX_LEN and len(ids) > 0 for ids, _ in greedy]
    b_eos = [len(ids) < MAX_LEN for ids, _ in beam]
    return any(g_nonempty_eos) and not all(g_eos) and any(b_eos)


def main(models):
    torch.set_num_threads(1)
    rng = np.random.default_rng(2024)
    sets = [f"{k}={v}" for k, v in mg.DIMS.items()] + [f"vocab={mg.VOCAB}"]
    for name in models:
        src_w = os.path.join(ROOT, "golden", name, "weights.safetensors")
        model, params = g.load_model(name, src_w, sets, pad=PAD)
        if g.is_decoder_only(name):
            inp, x = "tokens", mg.padded(rng, PROMPT_LENGTHS, mg.VOCAB, pad=PAD, lo=3)
        else:
            inp, x = "src", mg.padded(rng, SRC_LENGTHS, mg.VOCAB, pad=PAD, lo=3)

        # Pick the eos: decode with an eos that never occurs, then try 2 and the ids
        # seen, lowest first.
        free = g.greedy_tutorial(name, model, x, MAX_LEN, BOS, -1, PAD)
        seen = sorted({v for ids, _ in free for v in ids} - {2, BOS, PAD})
        eos = None
        for cand in [2] + seen:
            gr = g.greedy_tutorial(name, model, x, MAX_LEN, BOS, cand, PAD)
            bm = g.beam(name, model, x, K, MAX_LEN, ALPHA, BOS, cand, PAD)
            if eos_works(gr, bm):
                eos = cand
                break
        if eos is None:
            raise SystemExit(f"{name}: no eos id makes a sequence end early; change the inputs")

        # K=1 beam must give greedy's tokens.
        b1 = g.beam(name, model, x, 1, MAX_LEN, ALPHA, BOS, eos, PAD)
        assert [i for i, _ in b1] == [i for i, _ in gr], (name, b1, gr)

        out_dir = os.path.join(ROOT, "golden-gen", name)
        os.makedirs(out_dir, exist_ok=True)
        shutil.copyfile(src_w, os.path.join(out_dir, "weights.safetensors"))
        np.save(os.path.join(out_dir, f"{inp}.npy"), x)
        g.write_outputs(os.path.join(out_dir, "greedy"), gr, PAD)
        g.write_outputs(os.path.join(out_dir, "beam"), bm, PAD)

        vocab = ["--set src_vocab=%d" % mg.VOCAB, "--set tgt_vocab=%d" % mg.VOCAB] \
            if "src_vocab" in params else ["--set vocab=%d" % mg.VOCAB]
        flags = [f"--set {k}={v}" for k, v in mg.DIMS.items()] + vocab + \
            [f"--set bos_id={BOS}", f"--set eos_id={eos}", f"--set pad_id={PAD}"]
        ended = lambda res: [i for i, (ids, _) in enumerate(res) if len(ids) < MAX_LEN]  # noqa: E731
        with open(os.path.join(out_dir, "params.txt"), "w") as f:
            f.write(" ".join(flags) + "\n")
            f.write(f"# eos_id={eos}: chosen by make_gen_goldens.py (random weights rarely produce an "
                    f"eos); greedy items ending with it: {ended(gr)}, beam items: {ended(bm)}\n")
            f.write(f"# greedy/: --max-len {MAX_LEN}; beam/: --beam {K} --length-penalty {ALPHA} "
                    f"--max-len {MAX_LEN}\n")
        with open(os.path.join(out_dir, "generate.txt"), "w") as f:
            f.write(f"greedy --max-len {MAX_LEN}\n")
            f.write(f"beam --beam {K} --length-penalty {ALPHA} --max-len {MAX_LEN}\n")
        print(f"{name}: eos {eos}")
        for tag, res in (("greedy", gr), ("beam", bm)):
            for ids, s in res:
                print(f"  {tag:<6} {s:10.4f} {ids}")


if __name__ == "__main__":
    main(sys.argv[1:] or list(g.GEN_MODELS))
