"""tfc.compile: runs the tfc compiler bundled in the package (tfc/bin/tfc).

Why a subprocess and not the compiler linked into the extension module: the compiler
is MLIR/LLVM 16 (libMLIR.so.16, libLLVM-16.so, ~150 MB), built without exceptions,
with LLVM's process-global command-line option registry. Loaded into a Python
process next to other LLVM users (numba, triton, torch's own copies) that registry
aborts on duplicate options, and a crash in a pass would take the interpreter down.
A subprocess keeps MLIR out of the Python process (as it is kept out of libtfrun),
costs a few milliseconds per compile, and its diagnostics are the compiler's
documented `file:line:col: error: message` lines, which this module parses into
CompileError.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from ._errors import CompileError, InvalidArgument

PathLike = Union[str, "os.PathLike[str]"]

_PRECISIONS = ("f32", "bf16", "int8", "int4")
_LOCATED = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<kind>error|warning|note): "
                      r"(?P<msg>.*)$")
_UNLOCATED = re.compile(r"^(?:tfc: )?(?P<kind>error|warning): (?P<msg>.*)$")


def compiler_path() -> Path:
    """The tfc executable this package runs: tfc/bin/tfc beside the package, or
    $TFC_COMPILER when set."""
    env = os.environ.get("TFC_COMPILER")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / "bin" / "tfc"


def _set_args(values: Optional[Mapping[str, object]]) -> list:
    if values is None:
        return []
    if not isinstance(values, Mapping):
        raise InvalidArgument(f"set must be a mapping of parameter names to values, "
                              f"got {type(values).__name__}")
    args = []
    for name, value in values.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        args.append(f"--set={name}={value}")
    return args


def parse_diagnostics(stderr: str) -> list:
    """The compiler's diagnostics as dicts {file, line, column, kind, message}."""
    out = []
    for raw in stderr.splitlines():
        m = _LOCATED.match(raw)
        if m:
            out.append({"file": m["file"], "line": int(m["line"]), "column": int(m["col"]),
                        "kind": m["kind"], "message": m["msg"]})
            continue
        m = _UNLOCATED.match(raw)
        if m:
            out.append({"file": None, "line": None, "column": None, "kind": m["kind"],
                        "message": m["msg"]})
    return out


def run_compiler(source: PathLike, output: Path, *, weights: Optional[PathLike],
                 set: Optional[Mapping[str, object]], precision: str, fusion: bool,
                 extra: Sequence[str] = ()) -> tuple:
    """Compiles |source| to |output| (model.bin); returns (report text, warnings).
    Raises CompileError with the first error."""
    if precision not in _PRECISIONS:
        raise InvalidArgument(f"precision must be one of {', '.join(_PRECISIONS)}, "
                              f"got {precision!r}")
    src = os.fspath(source)
    if not os.path.exists(src):
        raise CompileError(f"no such model description or directory: '{src}'", file=src)
    exe = compiler_path()
    if not exe.exists():
        raise CompileError(f"the tfc compiler is not installed at {exe} (reinstall the package)")
    cmd = [str(exe), "compile", src, "-o", str(output), f"--precision={precision}", "--report"]
    if weights is not None:
        cmd.append(f"--weights={os.fspath(weights)}")
    if not fusion:
        cmd.append("--no-fusion")
    cmd += _set_args(set)
    cmd += list(extra)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    diags = parse_diagnostics(proc.stderr)
    if proc.returncode != 0:
        errors = [d for d in diags if d["kind"] == "error"]
        if errors:
            e = errors[0]
            raise CompileError(e["message"], e["file"], e["line"], e["column"],
                               diagnostics=diags)
        msg = proc.stderr.strip() or f"tfc exited with status {proc.returncode}"
        raise CompileError(msg.splitlines()[-1], diagnostics=diags)
    return proc.stdout, [d for d in diags if d["kind"] == "warning"]
