/*===- liger_runtime.h - the liger runtime's C API (stable ABI) ---*- C -*-===*
 *
 * The ABI other languages and other compilers' C++ link against: opaque
 * handles, plain C types, no exceptions. Every function that can fail
 * returns a liger_status; the message of the last failure on the calling
 * thread is liger_last_error(). The C++ API (liger/Runtime/Bundle.h)
 * implements it; both read the same bundles (docs/Design/Bundle.md).
 *
 *   liger_bundle *b;
 *   if (liger_bundle_open("layer.bundle", &b) != LIGER_OK)
 *     fprintf(stderr, "%s\n", liger_last_error());
 *   liger_tensor args[] = {{x_ptr, LIGER_BF16, 2, x_shape}, ...};
 *   liger_bundle_launch(b, "layer_rowwise_0", args, n, stream, 0);
 *   liger_bundle_close(b);
 *
 *===----------------------------------------------------------------------===*/

#ifndef LIGER_RUNTIME_LIGER_RUNTIME_H
#define LIGER_RUNTIME_LIGER_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this ABI: changes only when a signature or a meaning does. */
#define LIGER_RUNTIME_ABI_VERSION 1

typedef enum liger_status {
  LIGER_OK = 0,
  LIGER_INVALID_ARGUMENT = 1,    /* a malformed bundle, kernel name or tensor */
  LIGER_NOT_FOUND = 2,           /* a file or kernel that does not exist */
  LIGER_FAILED_PRECONDITION = 3, /* e.g. a bundle for another GPU arch */
  LIGER_UNAVAILABLE = 4,         /* no CUDA driver on this machine */
  LIGER_INTERNAL = 5             /* a CUDA or system call failed */
} liger_status;

typedef enum liger_dtype {
  LIGER_BF16 = 0,
  LIGER_F16 = 1,
  LIGER_F32 = 2,
  LIGER_I32 = 3,
  LIGER_I64 = 4
} liger_dtype;

/* A device tensor: pointer, dtype and a row-major shape of `rank` sizes. */
typedef struct liger_tensor {
  void *data;
  liger_dtype dtype;
  int32_t rank;
  const int64_t *shape;
} liger_tensor;

typedef struct liger_bundle liger_bundle;

/* LIGER_RUNTIME_ABI_VERSION of the library actually loaded. */
int32_t liger_abi_version(void);

/* The message of the last failed call on this thread ("" if none). */
const char *liger_last_error(void);

/* Opens the bundle directory `dir`; *bundle is null on failure. */
liger_status liger_bundle_open(const char *dir, liger_bundle **bundle);

/* Releases a bundle (null is ignored). Loaded modules stay loaded. */
void liger_bundle_close(liger_bundle *bundle);

/* The number of kernels, and the name of kernel `index` (null if out of
 * range); names live as long as the bundle. */
int32_t liger_bundle_kernel_count(const liger_bundle *bundle);
const char *liger_bundle_kernel_name(const liger_bundle *bundle, int32_t index);

/* The number of parameters of `kernel` (inputs, outputs, then workspaces),
 * or -1 when there is no such kernel. */
int32_t liger_bundle_kernel_param_count(const liger_bundle *bundle,
                                        const char *kernel);

/* The leading size of the f32 [ctas, H] workspaces `kernel` needs for `rows`
 * rows on a device with `sm_count` SMs, 0 when it needs none, -1 when there
 * is no such kernel. */
int64_t liger_bundle_workspace_ctas(const liger_bundle *bundle,
                                    const char *kernel, int64_t rows,
                                    int32_t sm_count);

/* Checks `args` (inputs, outputs, then workspaces) against `kernel` and
 * launches it on `stream` (a CUstream; null: the default stream) in the
 * current CUDA context, or the primary context of `device`. */
liger_status liger_bundle_launch(liger_bundle *bundle, const char *kernel,
                                 const liger_tensor *args, int32_t num_args,
                                 void *stream, int32_t device);

#ifdef __cplusplus
}
#endif

#endif /* LIGER_RUNTIME_LIGER_RUNTIME_H */
