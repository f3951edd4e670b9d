"""The `tfc` command that `pip install tfc` puts on PATH: `tfc serve ...` runs the
OpenAI-compatible server (tfc.serve, pip install tfc[serve]); every other command
(`tfc compile`, `tfc import`, `--help`) is the bundled compiler's, run as is."""
from __future__ import annotations

import os
import sys

from ._compiler import compiler_path


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        from .serve.__main__ import main as serve
        return serve(sys.argv[2:])
    compiler = str(compiler_path())
    try:
        os.execv(compiler, [compiler, *sys.argv[1:]])
    except OSError as e:
        print(f"tfc: cannot run the compiler {compiler}: {e}", file=sys.stderr)
        return 1
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
