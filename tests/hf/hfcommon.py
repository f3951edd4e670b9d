"""What the Hugging Face tests share (tests/hf/*_test.py, run by tests/hf/run.sh).

The test scripts import this by name: Python puts a script's own folder first
on sys.path.
"""
import os
import subprocess
import sys


def run(*cmd):
    """Runs a tfc or tfrun command; a failure ends the test with its output."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r


_cap_checked = []


def check_cpu_cap(tfrun, binp):
    """Once per test: tfrun's device names TFC_CPU_ISA exactly when it is set (ctest
    avx2/hf-*: the cap reaches the tfrun these tests run), and prints it."""
    if _cap_checked:
        return
    _cap_checked.append(binp)
    lines = run(tfrun, "--info", binp).stdout.splitlines()
    dev = next((line for line in lines if line.startswith("device:")), "(no device line)")
    cap = os.environ.get("TFC_CPU_ISA")
    print(dev)
    if (f"TFC_CPU_ISA={cap}" not in dev) if cap else ("TFC_CPU_ISA" in dev):
        sys.exit(f"FAILED: TFC_CPU_ISA={cap!r} in the environment, but tfrun --info says {dev}")


def check_padded_logits(tag, tfrun, binp, idsf, ids, lengths, model, tol_rel, failures,
                        threads=1, ref="f64"):
    """tfrun's logits of the right-padded batch |ids| (saved at |idsf|) at each row's
    real positions, against |model| run on each prompt alone: within |tol_rel| of
    the largest logit. Prints the result; a failure goes to |failures|. Returns the
    tolerance in logits."""
    import numpy as np
    import torch
    out = os.path.splitext(idsf)[0] + "-out"
    os.makedirs(out, exist_ok=True)
    run(tfrun, binp, "--threads", str(threads), "--output-dir", out, "--input",
        "input_ids=" + idsf)
    got = np.load(os.path.join(out, "logits.npy"))
    err, top = 0.0, 0.0
    for b, n in enumerate(lengths):
        with torch.no_grad():
            want = model(torch.from_numpy(ids[b:b + 1, :n])).logits.numpy()[0]
        err = max(err, float(np.abs(got[b, :n] - want).max()))
        top = max(top, float(np.abs(want).max()))
    tol = tol_rel * top
    # An image-text model's vocabulary is its text model's.
    vocab = model.config.get_text_config().vocab_size
    ok = got.shape == (len(lengths), ids.shape[1], vocab) and err <= tol
    print(f"{tag}-logits: max |tfc - transformers {ref}| = {err:.3g} "
          f"({'ok' if ok else 'FAIL'}, tolerance {tol:.2g})")
    if not ok:
        failures.append(f"{tag}-logits")
    return tol
