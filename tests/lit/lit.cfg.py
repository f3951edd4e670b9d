# lit configuration for tfc: IR round trips, passes and frontend diagnostics.
import os
import lit.formats

config.name = "tfc"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".yaml", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tfc_obj_root, "tests", "lit")

# tfc, tfc-opt, then LLVM 16's FileCheck / not / count.
config.environment["PATH"] = os.pathsep.join(
    [config.tfc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%models", os.path.join(config.tfc_src_root, "models")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%golden", os.path.join(config.tfc_src_root, "tests", "golden")))
config.substitutions.append(("%compare_gen", os.path.join(config.tfc_src_root, "scripts", "compare_gen.py")))
config.substitutions.append(("%compare", os.path.join(config.tfc_src_root, "scripts", "compare_npy.py")))
config.substitutions.append(("%interp", os.path.join(config.tfc_src_root, "scripts", "tfc_interp.py")))
