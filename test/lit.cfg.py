# -*- Python -*-
# Configuration of Tessera's lit regression suites (test/Dialect, test/Import, test/Transforms, ...).
# The build fills in the paths through lit.site.cfg.py, which then loads this file.

import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "TESSERA"

config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)

# .mlir tests drive tessera-opt; .test tests drive tesserac on ONNX files.
config.suffixes = [".mlir", ".test"]

config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tessera_obj_root, "test")

# Inputs/ folders hold the files that tests read, models/ and fixtures/ shared test data, unit/
# the GoogleTest sources: none of them are tests.
config.excludes = ["Inputs", "models", "fixtures", "unit", "integration", "CMakeLists.txt", "README.md"]

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])

# FileCheck, and `count` and `not` after a pipe, resolved in LLVM's tools directory.
llvm_config.use_default_substitutions()

# %models: the ONNX models in test/models. %inputs: the Inputs/ folder beside the test, written
# in terms of %S so that lit's own substitution of %S (applied after these) resolves it per test.
config.substitutions.append(("%models", os.path.join(config.test_source_root, "models")))
config.substitutions.append(("%inputs", "%S/Inputs"))

# %shared: the large real models in shared/models, which every developer and CI has beside the
# repository (<repo>/../shared) but which are not part of it; TESSERA_SHARED names another shared/
# folder. Tests that read them say `REQUIRES: shared-models` and are skipped where it is absent.
shared_root = os.environ.get("TESSERA_SHARED") or os.path.join(config.tessera_src_root, "..", "shared")
shared_models = os.path.normpath(os.path.join(shared_root, "models"))
if os.path.isdir(shared_models):
    config.available_features.add("shared-models")
config.substitutions.append(("%shared", shared_models))

# Put our tools, then LLVM's, in front of PATH, so that `not` and `count` at the start of a RUN
# line (where the substitutions above do not apply) come from LLVM 22 too.
llvm_config.with_environment("PATH", [config.tessera_tools_dir, config.llvm_tools_dir], append_path=True)

llvm_config.add_tool_substitutions(["tessera-opt", "tesserac"], [config.tessera_tools_dir])


def has_cuda_device():
    """True when nvidia-smi lists at least one GPU; tests that need one say `REQUIRES: cuda`."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listing.returncode == 0 and b"GPU" in listing.stdout


if has_cuda_device():
    config.available_features.add("cuda")

# tesserac was built with the CUDA runtime (-DTESSERA_RUNTIME_CUDA=ON), so `--target cuda -o FILE`
# links; tests that only build a CUDA executable say `REQUIRES: cuda-runtime`, tests that run one
# `REQUIRES: cuda, cuda-runtime`.
if getattr(config, "tessera_runtime_cuda", "").upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("cuda-runtime")
