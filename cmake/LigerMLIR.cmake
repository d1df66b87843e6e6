# Finds LLVM/MLIR 22 (MLIR_DIR, by default Debian's: the top-level
# CMakeLists.txt) and sets up the include paths, definitions and CMake
# modules the compiler half of the build needs.
#
# Pitfalls handled here (see docs/Design/Build.md):
#  - MLIRConfig does not export MLIR_LINK_MLIR_DYLIB: we own the option.
#  - LLVM_DEFINITIONS is one space-separated string: split it before use.
find_package(MLIR CONFIG QUIET)
if(NOT MLIR_FOUND)
  message(FATAL_ERROR "${LIGER_NO_MLIR_MESSAGE}")
endif()
message(STATUS "liger: using MLIRConfig.cmake in ${MLIR_DIR}")
message(STATUS "liger: using LLVMConfig.cmake in ${LLVM_DIR} (LLVM ${LLVM_PACKAGE_VERSION})")
if(NOT LLVM_PACKAGE_VERSION VERSION_GREATER_EQUAL 22 OR LLVM_PACKAGE_VERSION VERSION_GREATER_EQUAL 23)
  message(FATAL_ERROR "liger needs LLVM/MLIR 22, found ${LLVM_PACKAGE_VERSION} in ${LLVM_DIR}. "
                      "Run scripts/setup.sh or pass -DMLIR_DIR=<llvm-22>/lib/cmake/mlir.")
endif()

set(LLVM_RUNTIME_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/bin)
set(LLVM_LIBRARY_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/lib)
set(MLIR_BINARY_DIR ${CMAKE_BINARY_DIR})

list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
include(TableGen)
include(AddLLVM)
include(AddMLIR)
include(HandleLLVMOptions)

# add_llvm_tool() leaves tools out of `all` unless LLVM_BUILD_TOOLS is set.
set(LLVM_BUILD_TOOLS ON)

option(MLIR_LINK_MLIR_DYLIB "Link liger against libMLIR.so instead of the static MLIR libraries" ON)

include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
# Dialect sources live in dialects/ and are included as liger/Dialect/...
include_directories(${PROJECT_SOURCE_DIR}/dialects ${PROJECT_BINARY_DIR}/dialects)
link_directories(${LLVM_BUILD_LIBRARY_DIR})
separate_arguments(LIGER_LLVM_DEFINITIONS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
add_definitions(${LIGER_LLVM_DEFINITIONS})

# Debian ships lit as bin/lit, not the bin/llvm-lit that LLVMConfig names.
if(NOT LLVM_EXTERNAL_LIT OR NOT EXISTS "${LLVM_EXTERNAL_LIT}")
  find_program(LIGER_LIT NAMES lit llvm-lit HINTS ${LLVM_TOOLS_BINARY_DIR} REQUIRED)
  set(LLVM_EXTERNAL_LIT "${LIGER_LIT}" CACHE STRING "lit executable" FORCE)
endif()
