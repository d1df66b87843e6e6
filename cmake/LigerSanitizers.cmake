# LIGER_SANITIZE: build liger's own code (runtime, dialect, passes, tools,
# tests) with the listed sanitizers, e.g. -DLIGER_SANITIZE=address,undefined.
#
# The LLVM/MLIR libraries come prebuilt and stay uninstrumented; that links
# and runs, with these choices:
#  - undefined behaviour is fatal (-fno-sanitize-recover), so that a report
#    fails the test that triggered it;
#  - no vptr check: LLVM is built without RTTI, which that check needs;
#  - frame pointers kept, for readable reports.
# Run the binaries with the options of test/sanitizers.env (lit does, from
# LIGER_SANITIZE in lit.site.cfg.py; scripts/test.sh --sanitize does for
# ctest).
set(LIGER_SANITIZE "" CACHE STRING
    "Sanitizers to build liger's code with: a -fsanitize= list (address, undefined, ...), empty for none")

if(LIGER_SANITIZE)
  string(REPLACE "," ";" _liger_sanitizers "${LIGER_SANITIZE}")
  foreach(_sanitizer IN LISTS _liger_sanitizers)
    if(NOT _sanitizer MATCHES "^(address|undefined|leak)$")
      message(FATAL_ERROR "LIGER_SANITIZE: unsupported sanitizer '${_sanitizer}' "
                          "(expected a comma-separated list of address, undefined, leak)")
    endif()
  endforeach()
  set(_liger_flags -fsanitize=${LIGER_SANITIZE} -fno-omit-frame-pointer)
  if("undefined" IN_LIST _liger_sanitizers)
    list(APPEND _liger_flags -fno-sanitize-recover=undefined -fno-sanitize=vptr)
  endif()
  add_compile_options(${_liger_flags})
  add_link_options(-fsanitize=${LIGER_SANITIZE})
  message(STATUS "liger: building with -fsanitize=${LIGER_SANITIZE}")
endif()
