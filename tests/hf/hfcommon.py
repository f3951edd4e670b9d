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
