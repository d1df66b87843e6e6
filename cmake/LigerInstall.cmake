# What `cmake --install` installs, and the package config that
# find_package(liger) reads (cmake/LigerInstallDirs.cmake says where each
# part goes; pyproject.toml builds the wheel from the same rules).
#
# Install components:
#   runtime   libliger_runtime.a, include/liger/Runtime/*, liger/Version.h,
#             the package config (liger::runtime)
#   compiler  libliger_compiler.so, include/liger/Pipelines/Compile.h and
#             their targets (liger::compiler), where the compiler is built
#             against libMLIR.so
#   python    the _liger_runtime extension, libliger_torch_ops.so (where
#             LibTorch was found), _build_info.py; in a prefix, the Python
#             sources too (a wheel gets them from pyproject.toml)
#   liger-opt, liger-compile, liger-cpu-runner, liger-bundle   one tool each
include(CMakePackageConfigHelpers)

# --- the runtime (both modes) ----------------------------------------------
set_target_properties(liger_runtime PROPERTIES EXPORT_NAME runtime)
add_library(liger::runtime ALIAS liger_runtime)
target_include_directories(liger_runtime PUBLIC
  $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(TARGETS liger_runtime EXPORT ligerTargets COMPONENT runtime
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/liger/Runtime
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/liger COMPONENT runtime)
install(FILES ${PROJECT_BINARY_DIR}/include/liger/Version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/liger COMPONENT runtime)
install(TARGETS liger-bundle COMPONENT liger-bundle
  RUNTIME DESTINATION ${LIGER_INSTALL_TOOLSDIR})

# --- the compiler as a library (liger/Pipelines/Compile.h) -----------------
# Its own export set, installed with it: a prefix that has the runtime
# alone has no target naming a missing library.
if(TARGET liger_compiler)
  set_target_properties(liger_compiler PROPERTIES EXPORT_NAME compiler)
  add_library(liger::compiler ALIAS liger_compiler)
  target_include_directories(liger_compiler INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(liger_compiler INTERFACE cxx_std_17)
  install(TARGETS liger_compiler EXPORT ligerCompilerTargets COMPONENT compiler
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/include/liger/Pipelines/Compile.h
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/liger/Pipelines COMPONENT compiler)
  install(EXPORT ligerCompilerTargets NAMESPACE liger::
    FILE ligerCompilerTargets.cmake
    DESTINATION ${LIGER_INSTALL_CMAKEDIR} COMPONENT compiler)
elseif(LIGER_ENABLE_COMPILER)
  message(STATUS "liger: no liger::compiler library (it links libMLIR.so: "
                 "-DMLIR_LINK_MLIR_DYLIB=ON); the package has the tools")
endif()

# --- the compiler's tools ----------------------------------------------------
# add_mlir_tool installs them (MLIR_TOOLS_INSTALL_DIR) with an RPATH of
# $ORIGIN/../lib; they load libMLIR.so and libLLVM.so from the LLVM install
# they were built against.
set(LIGER_COMPILER_TOOLS)
if(LIGER_ENABLE_COMPILER)
  set(LIGER_COMPILER_TOOLS liger-opt liger-compile liger-cpu-runner)
  set_target_properties(${LIGER_COMPILER_TOOLS} PROPERTIES
    INSTALL_RPATH "${LLVM_LIBRARY_DIR}")
endif()

# --- the Python package's compiled parts -------------------------------------
# _build_info.py tells the installed package its version, what was built
# and where its tools are (liger/installation.py reads it).
set(LIGER_BUILT_COMPILER False)
if(LIGER_ENABLE_COMPILER)
  set(LIGER_BUILT_COMPILER True)
endif()
set(LIGER_BUILT_TORCH_OPS False)
set(LIGER_TORCH_VERSION "")
if(LIGER_BUILD_TORCH)
  set(LIGER_BUILT_TORCH_OPS True)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import torch; print(torch.__version__)"
    OUTPUT_VARIABLE LIGER_TORCH_VERSION OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
file(RELATIVE_PATH LIGER_TOOLS_FROM_PYTHON
  ${CMAKE_INSTALL_PREFIX}/${LIGER_INSTALL_PYTHONDIR}
  ${CMAKE_INSTALL_PREFIX}/${LIGER_INSTALL_TOOLSDIR})
configure_file(${PROJECT_SOURCE_DIR}/cmake/build_info.py.in
  ${PROJECT_BINARY_DIR}/install/_build_info.py @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/install/_build_info.py
  DESTINATION ${LIGER_INSTALL_PYTHONDIR} COMPONENT python)
if(NOT SKBUILD)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/liger/
    DESTINATION ${LIGER_INSTALL_PYTHONDIR} COMPONENT python
    PATTERN __pycache__ EXCLUDE)
endif()
if(LIGER_BUILD_PYTHON)
  install(TARGETS _liger_runtime COMPONENT python
    LIBRARY DESTINATION ${LIGER_INSTALL_PYTHONDIR})
endif()
if(LIGER_BUILD_TORCH)
  # Its LibTorch libraries are the ones `import torch` has loaded.
  install(TARGETS liger_torch_ops COMPONENT python
    LIBRARY DESTINATION ${LIGER_INSTALL_PYTHONDIR})
endif()

# --- the package config ------------------------------------------------------
install(EXPORT ligerTargets NAMESPACE liger:: FILE ligerTargets.cmake
  DESTINATION ${LIGER_INSTALL_CMAKEDIR} COMPONENT runtime)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ligerConfig.cmake.in
  ${PROJECT_BINARY_DIR}/install/ligerConfig.cmake
  INSTALL_DESTINATION ${LIGER_INSTALL_CMAKEDIR}
  PATH_VARS LIGER_INSTALL_TOOLSDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/ligerConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/install/ligerConfig.cmake
  ${PROJECT_BINARY_DIR}/install/ligerConfigVersion.cmake
  DESTINATION ${LIGER_INSTALL_CMAKEDIR} COMPONENT runtime)
