"""What the Hugging Face tests share (tests/hf/*_test.py, run by tests/hf/run.sh).

The test scripts import this by name: Python puts a script's own folder first
on sys.path.
"""
import subprocess
import sys


def run(*cmd):
    """Runs a tfc or tfrun command; a failure ends the test with its output."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r
