/*===- FakeCuda.c - a CUDA driver stand-in for tests without a GPU ------===*
 *
 * Loaded by the runtime through LIGER_LIBCUDA in liger-fake-driver-tests: two
 * devices of compute capability 9.0, one primary context each, a context
 * stack per process (the tests are single-threaded), and a log of the calls
 * that matter for where a kernel runs (push, pop, module loads, launches),
 * read back by the test through fakeCudaLog(). Nothing runs.
 *
 *===--------------------------------------------------------------------===*/

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;

enum { kDevices = 2, kInvalidContext = 201, kInvalidValue = 1 };

static char contexts[kDevices]; /* a context is the address of its byte */
static CUcontext stack[16];
static int depth; /* stack[depth - 1] is current */
static char log_[4096];

static void note(const char *what, int dev) {
  char line[64];
  snprintf(line, sizeof line, "%s %d;", what, dev);
  strncat(log_, line, sizeof log_ - strlen(log_) - 1);
}

static int deviceOf(CUcontext c) { return (int)((char *)c - contexts); }

const char *fakeCudaLog(void) { return log_; }
void fakeCudaReset(void) {
  log_[0] = 0;
  depth = 0;
}

CUresult cuInit(unsigned flags) {
  (void)flags;
  return 0;
}
CUresult cuGetErrorName(CUresult e, const char **name) {
  *name =
      e == kInvalidContext ? "CUDA_ERROR_INVALID_CONTEXT" : "CUDA_ERROR_FAKE";
  return 0;
}
CUresult cuGetErrorString(CUresult e, const char **text) {
  (void)e;
  *text = "fake driver";
  return 0;
}
CUresult cuDeviceGetCount(int *count) {
  *count = kDevices;
  return 0;
}
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  if (ordinal < 0 || ordinal >= kDevices)
    return kInvalidValue;
  *d = ordinal;
  return 0;
}
CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice d) {
  (void)d;
  *value = attribute == 75 ? 9 : 0; /* compute capability 9.0 */
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
  *c = &contexts[d];
  return 0;
}
CUresult cuCtxGetCurrent(CUcontext *c) {
  *c = depth ? stack[depth - 1] : NULL;
  return 0;
}
CUresult cuCtxSetCurrent(CUcontext c) {
  if (!c) {
    depth = 0;
    return 0;
  }
  if (!depth)
    depth = 1;
  stack[depth - 1] = c;
  return 0;
}
CUresult cuCtxGetDevice(CUdevice *d) {
  if (!depth)
    return kInvalidContext;
  *d = deviceOf(stack[depth - 1]);
  return 0;
}
CUresult cuCtxPushCurrent_v2(CUcontext c) {
  stack[depth++] = c;
  note("push", deviceOf(c));
  return 0;
}
CUresult cuCtxPopCurrent_v2(CUcontext *c) {
  if (!depth)
    return kInvalidContext;
  *c = stack[--depth];
  note("pop", deviceOf(*c));
  return 0;
}
CUresult cuModuleLoadData(void **module, const void *image) {
  (void)image;
  if (!depth)
    return kInvalidContext;
  *module = stack[depth - 1];
  note("load", deviceOf(stack[depth - 1]));
  return 0;
}
CUresult cuModuleUnload(void *module) {
  (void)module;
  return 0;
}
CUresult cuModuleGetFunction(void **f, void *module, const char *name) {
  (void)name;
  *f = module; /* a function knows its context */
  return 0;
}
CUresult cuFuncSetAttribute(void *f, int attribute, int value) {
  (void)f;
  (void)attribute;
  (void)value;
  return 0;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                        void *stream, void **params, void **extra) {
  (void)gx;
  (void)gy;
  (void)gz;
  (void)bx;
  (void)by;
  (void)bz;
  (void)shared;
  (void)stream;
  (void)params;
  (void)extra;
  if (!depth || stack[depth - 1] != f)
    return kInvalidContext; /* wrong context */
  note("launch", deviceOf(f));
  return 0;
}
CUresult cuStreamSynchronize(void *stream) {
  (void)stream;
  return 0;
}
CUresult cuMemAlloc_v2(unsigned long long *p, size_t bytes) {
  *p = (unsigned long long)(size_t)malloc(bytes);
  return 0;
}
CUresult cuMemFree_v2(unsigned long long p) {
  free((void *)(size_t)p);
  return 0;
}
CUresult cuTensorMapEncodeTiled(void *map, int dataType, unsigned rank,
                                void *global, const unsigned long long *dims,
                                const unsigned long long *strides,
                                const unsigned *box,
                                const unsigned *elementStrides, int interleave,
                                int swizzle, int l2, int oob) {
  (void)map;
  (void)dataType;
  (void)rank;
  (void)global;
  (void)dims;
  (void)strides;
  (void)box;
  (void)elementStrides;
  (void)interleave;
  (void)swizzle;
  (void)l2;
  (void)oob;
  return 0;
}
