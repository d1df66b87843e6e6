/*===- liger_runtime.h - the liger runtime's C API (stable ABI) ---*- C -*-===*
 *
 * The ABI other languages and other compilers' C++ link against: opaque
 * handles, plain C types, no exceptions: no C++ exception leaves any of
 * its functions (one that ran out of memory, std::bad_alloc, returns
 * LIGER_INTERNAL with a message). Every function that can fail returns a
 * liger_status; the message of the last failure on the calling thread is
 * liger_last_error(). The C++ API (liger/Runtime/Bundle.h)
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

/* The version of this ABI: changes when a signature or a meaning changes,
 * and when functions are added (version 2 added kernel handles, parameter
 * and kernel introspection, output and workspace shapes, the device check
 * and the loss plans). liger_abi_version() >= N: the library has what
 * version N's header declares. */
#define LIGER_RUNTIME_ABI_VERSION 2

/* The largest rank of a tensor a kernel takes. */
#define LIGER_MAX_RANK 8

typedef enum liger_status {
  LIGER_OK = 0,
  LIGER_INVALID_ARGUMENT = 1,    /* a malformed bundle, kernel name or tensor */
  LIGER_NOT_FOUND = 2,           /* a file or kernel that does not exist */
  LIGER_FAILED_PRECONDITION = 3, /* e.g. a bundle for another GPU arch */
  LIGER_UNAVAILABLE = 4,         /* no CUDA driver on this machine */
  LIGER_INTERNAL = 5             /* a CUDA or system call failed; no memory */
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

/* How a kernel uses a parameter, and the shape it takes
 * (docs/Design/Kernel-ABI.md): */
typedef enum liger_param_role {
  LIGER_ROLE_INPUT = 0,
  LIGER_ROLE_OUTPUT = 1,
  LIGER_ROLE_WORKSPACE = 2 /* f32 scratch the caller allocates and a launch
                              zero-fills before its first kernel */
} liger_param_role;

typedef enum liger_param_kind {
  LIGER_KIND_ROWS = 0,        /* [rows..., H] */
  LIGER_KIND_ROW_SCALARS = 1, /* [rows...] */
  LIGER_KIND_FEATURE = 2,     /* [H] */
  LIGER_KIND_SCALAR = 3,      /* rank 0 */
  LIGER_KIND_HEADS = 4,       /* [batch, heads, seq, D]; also a workspace */
  LIGER_KIND_TABLES = 5,      /* [1 or batch, seq, D] */
  LIGER_KIND_PARTIALS = 6,    /* [ctas, H], f32 workspace */
  LIGER_KIND_MATRIX = 7,      /* [N, K] */
  LIGER_KIND_HEAD_SCALARS = 8 /* [batch, heads, seq] */
} liger_param_kind;

/* One parameter of a kernel; `name` lives as long as the bundle. */
typedef struct liger_param_info {
  const char *name;
  liger_param_role role;
  liger_param_kind kind;
  liger_dtype dtype;
  int64_t length; /* the static innermost size: H, K or D; 0 if none */
  int64_t outer;  /* N of a matrix, the head count of heads and head
                     scalars, 1 for a table of batch 1 (broadcast); else 0 */
} liger_param_info;

/* One kernel; the strings live as long as the bundle. */
typedef struct liger_kernel_info {
  const char *name;
  const char *function;      /* the function whose fusion group it is */
  const char *ops;           /* the liger ops it came from */
  const char *template_name; /* "rowwise", "rope", "cross_entropy", ... */
  const char *arch;          /* "sm_90a" */
  int32_t num_params;        /* inputs, outputs, then workspaces */
  int32_t num_inputs;
  int32_t num_outputs;
  int32_t num_workspaces;
} liger_kernel_info;

/* The kernels of one chunk of a planned loss group. */
typedef enum liger_loss_stage {
  LIGER_STAGE_LOGITS = 0,
  LIGER_STAGE_CE = 1,
  LIGER_STAGE_DX = 2,
  LIGER_STAGE_DW0 = 3,
  LIGER_STAGE_DW = 4,
  LIGER_NUM_LOSS_STAGES = 5
} liger_loss_stage;

/* A planned loss group (docs/Design/Bundle.md, "Plans"); the strings live
 * as long as the bundle. */
typedef struct liger_loss_plan {
  const char *function;
  const char *kind; /* "fused_linear_cross_entropy" */
  int64_t chunk_tokens;
  int64_t memory_budget;
  int64_t ignore_index;
  int32_t mean;
  int32_t class_weight;
  int32_t dw_f32;
  /* The kernel of each stage, by liger_loss_stage; -1 where none. */
  int32_t kernels[LIGER_NUM_LOSS_STAGES];
} liger_loss_plan;

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

/* The leading size of the f32 [ctas, H] (partials) workspaces `kernel`
 * needs for `rows` rows on a device with `sm_count` SMs, 0 when it needs
 * none, -1 when there is no such kernel. */
int64_t liger_bundle_workspace_ctas(const liger_bundle *bundle,
                                    const char *kernel, int64_t rows,
                                    int32_t sm_count);

/* Checks `args` (inputs, outputs, then workspaces) against `kernel` and
 * launches it on `stream` (a CUstream; null: the default stream) in the
 * current CUDA context, or the primary context of `device`, after
 * zero-filling the workspaces on that stream. */
liger_status liger_bundle_launch(liger_bundle *bundle, const char *kernel,
                                 const liger_tensor *args, int32_t num_args,
                                 void *stream, int32_t device);

/* Kernel handles: the index of a kernel in [0, liger_bundle_kernel_count),
 * valid as long as the bundle. -1 when there is no kernel `kernel`. */
int32_t liger_bundle_kernel_index(const liger_bundle *bundle,
                                  const char *kernel);

/* liger_bundle_launch with the kernel given by its handle: the lean path
 * (no name lookup). */
liger_status liger_bundle_launch_kernel(liger_bundle *bundle, int32_t kernel,
                                        const liger_tensor *args,
                                        int32_t num_args, void *stream,
                                        int32_t device);

/* What kernel `kernel` is, and its parameter `param`. */
liger_status liger_bundle_kernel_info(const liger_bundle *bundle,
                                      int32_t kernel, liger_kernel_info *info);
liger_status liger_bundle_param_info(const liger_bundle *bundle, int32_t kernel,
                                     int32_t param, liger_param_info *info);

/* The shapes of the outputs of `kernel` for `inputs` (their shapes and
 * dtypes are read, their pointers not), checked as a launch checks them:
 * output i has rank ranks[i] and sizes shapes[i * LIGER_MAX_RANK + j].
 * `ranks` holds num_outputs (liger_kernel_info) entries, `shapes`
 * num_outputs * LIGER_MAX_RANK. */
liger_status liger_bundle_output_shapes(const liger_bundle *bundle,
                                        int32_t kernel,
                                        const liger_tensor *inputs,
                                        int32_t num_inputs, int32_t *ranks,
                                        int64_t *shapes);

/* The same for the f32 workspaces a launch on a device with `sm_count`
 * SMs takes (num_workspaces of them; none for most kernels). */
liger_status liger_bundle_workspace_shapes(const liger_bundle *bundle,
                                           int32_t kernel,
                                           const liger_tensor *inputs,
                                           int32_t num_inputs, int32_t sm_count,
                                           int32_t *ranks, int64_t *shapes);

/* Whether device `device` runs every kernel of the bundle (its arch, its
 * shared memory); LIGER_FAILED_PRECONDITION names the first that does not.
 * Launches check it too, once per device, before their first launch. */
liger_status liger_bundle_check_device(liger_bundle *bundle, int32_t device);

/* The planned loss groups of the bundle. */
int32_t liger_bundle_plan_count(const liger_bundle *bundle);
liger_status liger_bundle_plan(const liger_bundle *bundle, int32_t index,
                               liger_loss_plan *plan);

#ifdef __cplusplus
}
#endif

#endif /* LIGER_RUNTIME_LIGER_RUNTIME_H */
