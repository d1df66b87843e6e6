/*===- CApiFromC.c - the C API used from C --------------------------------===*
 *
 * Compiled as C (so the header stays valid C): opens `dir`, lists the
 * kernels and reports the first failure, for CApiTest.cpp.
 *
 *===----------------------------------------------------------------------===*/

#include "liger/Runtime/liger_runtime.h"

#include <stdio.h>
#include <string.h>

int liger_capi_from_c(const char *dir, char *out, int size) {
  liger_bundle *bundle = NULL;
  liger_status status = liger_bundle_open(dir, &bundle);
  if (status != LIGER_OK) {
    snprintf(out, (size_t)size, "error %d: %s", (int)status, liger_last_error());
    return (int)status;
  }
  out[0] = '\0';
  for (int32_t i = 0; i < liger_bundle_kernel_count(bundle); ++i) {
    strncat(out, liger_bundle_kernel_name(bundle, i), (size_t)size - strlen(out) - 1);
    strncat(out, ";", (size_t)size - strlen(out) - 1);
  }
  liger_bundle_close(bundle);
  return 0;
}
