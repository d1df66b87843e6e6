# Where `cmake --install` puts each part of liger, decided before any target
# exists (the MLIR tools read MLIR_TOOLS_INSTALL_DIR when they are added).
#
#   a prefix (cmake --install build --prefix P):
#     P/bin/                     liger-opt, liger-compile, liger-cpu-runner, liger-bundle
#     P/include/liger/           liger/Runtime/*, liger/Version.h,
#                                liger/Pipelines/Compile.h (with the compiler)
#     P/lib/                     libliger_runtime.a, libliger_compiler.so
#     P/lib/cmake/liger/         ligerConfig.cmake, ligerConfigVersion.cmake, targets
#     P/lib/liger/python/liger/  the Python package, _liger_runtime, libliger_torch_ops.so
#   a wheel (scikit-build-core sets SKBUILD; pyproject.toml):
#     liger/                     the Python package, _liger_runtime, libliger_torch_ops.so
#     liger/bin/                 the tools
include(GNUInstallDirs)

if(SKBUILD)
  set(LIGER_INSTALL_PYTHONDIR liger)
  set(LIGER_INSTALL_TOOLSDIR liger/bin)
else()
  set(LIGER_INSTALL_PYTHONDIR ${CMAKE_INSTALL_LIBDIR}/liger/python/liger)
  set(LIGER_INSTALL_TOOLSDIR ${CMAKE_INSTALL_BINDIR})
endif()
set(LIGER_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/liger)
# add_mlir_tool installs into MLIR_TOOLS_INSTALL_DIR.
set(MLIR_TOOLS_INSTALL_DIR ${LIGER_INSTALL_TOOLSDIR})
