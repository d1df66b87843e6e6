# lit configuration of the liger regression suite (test/).
import os
import shutil

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "LIGER"
# The internal shell provides `not` and `diff`, which Debian does not ship
# as separate tools.
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.liger_obj_root, "test")
# Inputs/ folders hold fixtures read by tests, not tests; Unit/ and python/
# have their own runners.
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "Unit", "python", "Integration"]

llvm_config.with_system_environment(["HOME", "TMP", "TEMP", "PATH"])

# A build with LIGER_SANITIZE: the sanitizers' options of test/sanitizers.env
# (every report aborts the tool), and the fuzzer runs its tools without an
# address-space cap (%fuzz_memory_limit), which their shadow memory cannot
# live under.
if getattr(config, "liger_sanitize", ""):
    config.available_features.add("sanitize")
    with open(os.path.join(config.test_source_root, "sanitizers.env")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, value = line.strip().split("=", 1)
                config.environment[name] = value
    config.substitutions.append(("%fuzz_memory_limit", "0"))
else:
    config.substitutions.append(("%fuzz_memory_limit", "8"))
llvm_config.use_default_substitutions()  # FileCheck, not, count

# First, ahead of lit's own %python (the interpreter lit runs under, which
# may lack NumPy): the interpreter the build was configured with.
config.substitutions.insert(0, ("%python", config.python_executable))
config.substitutions.append(("%liger_src_root", config.liger_src_root))
config.substitutions.append(("%liger_obj_root", config.liger_obj_root))
# project(liger VERSION ...) of the top-level CMakeLists.txt.
config.substitutions.append(("%liger_version", config.liger_version))

tool_dirs = [config.liger_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    [ToolSubst("liger-opt", unresolved="fatal"),
     ToolSubst("liger-cpu-runner", unresolved="fatal"),
     ToolSubst("liger-compile", unresolved="fatal"),
     ToolSubst("liger-bundle", unresolved="fatal"),
     ToolSubst("split-file", unresolved="fatal")], tool_dirs)

cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
ptxas = os.path.join(cuda_home, "bin", "ptxas")
if not os.path.exists(ptxas):
    ptxas = shutil.which("ptxas")
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("ptxas", ptxas))
