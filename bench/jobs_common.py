"""What bench/bench_translate.py and bench/bench_embed.py share (issue 14, section 5).

Both benchmarks time tfc (one `tfrun --bench R` process per round, as bench_peers.py
does) and Python peers in the same run. A peer is not timed in the benchmark's own
process: each (engine, precision, threads) gets a worker process (the same script
with --worker) that imports only what that engine needs (CTranslate2 or ONNX Runtime
alone, never torch; transformers/PyTorch for the PyTorch peer), loads the model once,
makes one warm-up call whose result it saves for the checks, then answers "run N"
with the median of N timed calls. So
  - every engine's peak RSS is its own: each worker and each tfrun process runs under
    `/usr/bin/time -f %M` (for tfrun: the largest over the rounds), the resident set
    of interpreter + library + model + working memory. Not os.wait4 in this process:
    Linux carries the peak RSS of the forked copy of the (large) parent over exec,
    so a child of a process that holds torch would report the parent's RSS at least;
    /usr/bin/time is a small process that forks the command itself;
  - the rounds are interleaved: in each round, for each thread count, every engine
    is timed once, in an order that rotates from round to round; the tables give the
    median over the rounds. Idle workers block on their stdin and use no CPU.
A 0.3 s pause after each engine's turn lets OpenMP / ORT pools stop spinning before
the next engine is timed (as bench_peers.py SETTLE_S).

Worker protocol (lines; the worker's other output goes to stderr or is ignored):
  parent -> worker: "run N" | "quit"
  worker -> parent: "@@ready" after load + warm-up, "@@ms X" per "run", "@@error MSG".
"""
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SETTLE_S = 0.3
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def first_line(text):
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def measure(prec, engines, a, log, results, rss, errors):
    """Runs the interleaved rounds of |engines| ({threads: [engine]}) for one
    precision; records each (prec, name, threads)'s median in |results|, its
    peak RSS in |rss| (closing the engine) and its failures in |errors|."""
    log(f"[{prec}] engines ready: " + ", ".join(
        f"{e.name}@{th}" for th, es in engines.items() for e in es))
    med, _, errs = run_rounds(engines, a.rounds, a.runs, log)
    errors += [(nm, prec, f"{th} threads: {m}") for nm, th, m in errs]
    for (nm, th), ms in med.items():
        results[(prec, nm, th)] = ms
    for th, es in engines.items():
        for e in es:
            rss[(prec, e.name, th)] = e.close()


def table(headers, rows, markdown, left=(0,)):
    """Plain text (right-aligned numbers) or Markdown, as bench_peers.py prints."""
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
        return "\n".join(lines)
    w = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    fmt = lambda r: "  ".join(str(c).ljust(w[i]) if i in left else str(c).rjust(w[i])  # noqa: E731
                              for i, c in enumerate(r))
    return "\n".join(fmt(r).rstrip() for r in [headers] + rows)



def print_sections(sections, markdown, left):
    """Prints each (title, headers, rows) section as a plain table (``left(headers)``:
    the left-aligned columns), then, with ``markdown``, all of them again in Markdown."""
    for t, h, r in sections:
        print(f"\n{t}\n{table(h, r, False, left(h))}")
    if markdown:
        print()
        for t, h, r in sections:
            print(f"**{t}**\n\n{table(h, r, True)}\n")

def work_dir(prefix, keep):
    """A temporary folder for the checkpoint, the converted models and the outputs;
    removed at exit (also when the run fails) unless |keep|."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    if keep:
        atexit.register(lambda: print(f"kept {tmp}"))
    else:
        atexit.register(lambda: shutil.rmtree(tmp, ignore_errors=True))
    return tmp


def cpu_summary():
    """'AMD EPYC, 2 cores, avx512f avx512_vnni avx512_bf16 ...' from /proc/cpuinfo."""
    name, flags = "?", set()
    for ln in open("/proc/cpuinfo"):
        if ln.startswith("model name"):
            name = ln.split(":", 1)[1].strip()
        elif ln.startswith("flags"):
            flags = set(ln.split(":", 1)[1].split())
    keep = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                        "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")
            if f in flags]
    return f"{name}, {os.cpu_count()} cores, {' '.join(keep)}"


# Every engine's own switch for the x86 ISA it may use, so that a run on an AVX-512
# machine shows what an AVX2-only CPU (the project's Zen 3) runs: tfc's kernels and its
# oneDNN (TFC_CPU_ISA), OpenBLAS (OPENBLAS_CORETYPE; Zen 3 gets the Zen kernels, which
# are AVX2), CTranslate2's own kernels (CT2_FORCE_CPU_ISA), the MKL and oneDNN GEMMs
# that CTranslate2 and PyTorch call (MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA) and
# PyTorch's ATen kernels (ATEN_CPU_CAPABILITY). Without MKL's switch CTranslate2's int8
# GEMM runs VNNI: on the Zen 4 class EPYC a capped tfc against it read 0.54x where the
# real Zen 3 read 0.82x; with every switch, 0.83x. ONNX Runtime has no such switch
# (MLAS picks its kernels from cpuid), so it stays at the machine's best ISA.
ISA_CAPS = {
    "AVX2": dict(TFC_CPU_ISA="AVX2", OPENBLAS_CORETYPE="Zen", CT2_FORCE_CPU_ISA="AVX2",
                 MKL_ENABLE_INSTRUCTIONS="AVX2", ONEDNN_MAX_CPU_ISA="AVX2",
                 DNNL_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2"),
}
UNCAPPED = {"ort": "ONNX Runtime has no ISA switch: it runs the machine's best"}


def cap_isa(isa):
    """Caps every engine this process starts at |isa| (a key of ISA_CAPS; None: no cap)
    through the environment, which each worker and tfrun process inherits. Returns the
    words for the run's header line."""
    if not isa:
        return "no ISA cap"
    os.environ.update(ISA_CAPS[isa])
    return (f"capped at {isa} (" + " ".join(f"{k}={v}" for k, v in ISA_CAPS[isa].items())
            + "; " + "; ".join(UNCAPPED.values()) + ")")


# -------------------------------------------------------------------------------------
# tfc: one tfrun process per round.
# -------------------------------------------------------------------------------------
_MEDIAN = re.compile(r"median\s*[=:]?\s*([0-9.]+(?:[eE][-+]?\d+)?)\s*(ms|s|us)\b")
_UNIT = {"s": 1e3, "ms": 1.0, "us": 1e-3}


def parse_median_ms(text):
    """The median of `tfrun --bench`: its 'generate: median X ms' line with --generate,
    else the first line with a median (bench_generate.parse_tfrun reads it the same way)."""
    lines = text.splitlines()
    for ln in [x for x in lines if x.strip().startswith("generate")] + \
              [x for x in lines if "median" in x]:
        m = _MEDIAN.search(ln)
        if m:
            return float(m.group(1)) * _UNIT[m.group(2)]
    raise RuntimeError("no 'median X ms' in tfrun's output:\n" + text)


TIME = "/usr/bin/time"


def with_time(cmd, rss_file):
    """cmd under /usr/bin/time, which writes the command's peak RSS in KB to rss_file."""
    if not os.path.exists(TIME):
        raise SystemExit(f"{TIME} is needed to measure each engine's peak RSS "
                         "(Debian: apt-get install time)")
    return [TIME, "-f", "%M", "-o", rss_file] + cmd


def read_rss(rss_file):
    """The KB that /usr/bin/time wrote (its last line; a killed command adds a line)."""
    try:
        return int(open(rss_file).read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def run_measured(cmd, env=None, rss_file=None):
    """Runs cmd; returns (returncode, stdout + stderr, peak RSS in KB or None)."""
    if rss_file:
        cmd = with_time(cmd, rss_file)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=env)
    return r.returncode, r.stdout, read_rss(rss_file) if rss_file else None


class Tfrun:
    """tfc as an engine: `tfrun MODEL ARGS --threads T --bench R`, a process per round."""

    def __init__(self, name, tfrun, model, args, threads, env_extra=None):
        self.name, self.tfrun, self.model, self.args, self.th = name, tfrun, model, args, threads
        self.env = dict(os.environ, **env_extra) if env_extra else None
        self.rss_kb = 0
        self.rss_file = model + f".{threads}.rss"

    def _run(self, extra):
        rc, out, rss = run_measured([self.tfrun, self.model] + self.args + extra,
                                    env=self.env, rss_file=self.rss_file)
        if rc != 0:
            raise RuntimeError(f"tfrun failed (rc {rc}): {first_line(out)}\n{out[-2000:]}")
        self.rss_kb = max(self.rss_kb, rss or 0)
        return out

    def output(self, out_dir):
        """Runs once with --output-dir: the files the checks read."""
        os.makedirs(out_dir, exist_ok=True)
        self._run(["--threads", str(self.th), "--output-dir", out_dir])

    def time_round(self, runs):
        return parse_median_ms(self._run(["--threads", str(self.th), "--bench", str(runs)]))

    def close(self):
        return self.rss_kb


# -------------------------------------------------------------------------------------
# Python peers: a worker process each.
# -------------------------------------------------------------------------------------
class Worker:
    """A peer in its own process: `python SCRIPT --worker SPEC_JSON` (|python|: another
    interpreter than this one, e.g. a venv that has the tfc package)."""

    def __init__(self, name, script, spec, threads, env_extra=None, python=None):
        self.name, self.th = name, threads
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1",
                   TRANSFORMERS_VERBOSITY="error", TOKENIZERS_PARALLELISM="false")
        env.update(env_extra or {})
        self.err_path = os.path.join(spec["tmp"], f"worker-{name}-{threads}.log")
        self.err = open(self.err_path, "w")
        # Not from the source tree: a triton/ folder there would shadow the package.
        self.rss_file = os.path.join(spec["tmp"], f"worker-{name}-{threads}.rss")
        cmd = with_time([python or sys.executable, script, "--worker", json.dumps(spec)],
                        self.rss_file)
        self.p = subprocess.Popen(cmd,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True, bufsize=1, env=env,
                                  cwd=spec["tmp"])
        self.rss_kb = None

    def _reply(self):
        while True:
            ln = self.p.stdout.readline()
            if not ln:
                self.err.flush()
                raise RuntimeError(f"{self.name} worker died: "
                                   + first_line(open(self.err_path).read()))
            if ln.startswith("@@error"):
                raise RuntimeError(f"{self.name}: {ln[8:].strip()}")
            if ln.startswith("@@"):
                return ln[2:].strip()

    def wait_ready(self):
        """Waits for '@@ready [TEXT]'; returns TEXT (e.g. the engine's version)."""
        r = self._reply()
        if r.split()[:1] != ["ready"]:
            raise RuntimeError(f"{self.name} worker: unexpected {r!r}")
        return r[5:].strip()

    def ask(self, line):
        """Sends one command line; returns the worker's reply without its '@@'."""
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self._reply()

    def time_round(self, runs):
        return float(self.ask(f"run {runs}").split()[1])

    def close(self):
        if self.rss_kb is None:
            try:
                self.p.stdin.write("quit\n")
                self.p.stdin.close()
            except OSError:
                pass
            self.p.wait()
            self.rss_kb = read_rss(self.rss_file)
            self.err.close()
        return self.rss_kb


def worker_main(spec, setup):
    """The worker side: setup(spec) -> (call, save) where call() runs the job once and
    save(result) writes what the checks read. Warm-up (the saved call), then serve."""
    out = sys.stdout
    sys.stdout = sys.stderr            # library chatter must not reach the protocol
    try:
        call, save = setup(spec)
        save(call())
    except Exception as e:  # noqa: BLE001 - the parent reports it and goes on
        out.write(f"@@error {type(e).__name__}: {first_line(str(e))}\n")
        out.flush()
        sys.exit(1)
    out.write("@@ready\n")
    out.flush()
    for ln in sys.stdin:
        cmd = ln.split()
        if not cmd or cmd[0] == "quit":
            break
        ts = []
        for _ in range(int(cmd[1])):
            t0 = time.perf_counter()
            call()
            ts.append((time.perf_counter() - t0) * 1e3)
        out.write(f"@@ms {median(ts)}\n")
        out.flush()


def run_rounds(engines_by_th, rounds, runs, log=None):
    """Interleaved rounds. engines_by_th: {threads: [engine, ...]}. Returns
    ({(name, threads): median ms over the rounds}, {(name, threads): [ms per round]},
    [(name, threads, error)])."""
    samples, errors = {}, []
    live = {th: list(es) for th, es in engines_by_th.items()}
    for r in range(rounds):
        for th in sorted(live):
            es = live[th]
            k = r % max(1, len(es))
            for e in es[k:] + es[:k]:
                try:
                    ms = e.time_round(runs)
                except Exception as err:  # noqa: BLE001
                    errors.append((e.name, th, f"timing error: {first_line(str(err))}"))
                    es.remove(e)  # no sample: a failed engine has no figures
                else:
                    samples.setdefault((e.name, th), []).append(ms)
                time.sleep(SETTLE_S)
        if log:
            log(f"  round {r + 1}/{rounds}: " + "; ".join(
                f"{n}@{th} {v[-1]:.1f}" for (n, th), v in sorted(samples.items())))
    return {k: median(v) for k, v in samples.items()}, samples, errors
