# lit configuration for tfc: IR round trips, passes and frontend diagnostics.
import os
import lit.formats

config.name = "tfc"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".yaml", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
# A capped run (lit-avx2 below) writes its outputs apart, so that it can run
# beside the plain one. ctest names the folder (TFC_LIT_OUT): under a capped
# `TFC_CPU_ISA=AVX2 ctest -j2` both runs see the cap, and deriving the folder
# from it had them write one folder at once.
config.test_exec_root = os.path.join(
    config.tfc_obj_root, "tests",
    os.environ.get("TFC_LIT_OUT") or
    "lit" + ("-" + os.environ["TFC_CPU_ISA"].lower() if os.environ.get("TFC_CPU_ISA") else ""))

# tfc, tfc-opt, tfc-ref (the numerics tests' oracle, tests/oracle), then LLVM 16's
# FileCheck / not / count.
# The CPU path cap (backends/cpu/cpu_isa.h): `TFC_CPU_ISA=AVX2 ctest` runs the
# whole suite on the paths of an AVX2-only CPU.
for var in ("TFC_CPU_ISA", "TFC_INT8_AVX2", "ONEDNN_MAX_CPU_ISA"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["PATH"] = os.pathsep.join(
    [config.tfc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%models", os.path.join(config.tfc_src_root, "models")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%golden", os.path.join(config.tfc_src_root, "tests", "golden")))
config.substitutions.append(("%compare_gen", os.path.join(config.tfc_src_root, "scripts", "compare_gen.py")))
config.substitutions.append(("%compare", os.path.join(config.tfc_src_root, "scripts", "compare_npy.py")))
