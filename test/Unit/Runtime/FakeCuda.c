/*===- FakeCuda.c - a CUDA driver stand-in for tests without a GPU ------===*
 *
 * Loaded by the runtime through LIGER_LIBCUDA in liger-fake-driver-tests (and
 * liger-launch-bench): four devices (9.0, 9.0, 8.0 and 8.6, with their
 * opt-in shared memory per block), one primary context each, a context
 * stack per process (the tests are single-threaded), a log of the calls
 * that matter for where a kernel runs (push, pop, module loads, memsets,
 * launches), read back by the test through fakeCudaLog(), what the last
 * launch and the last tensor-map encoding were given (fakeCudaLastLaunch,
 * fakeCudaLastTensorMap), and the memsets since the last reset
 * (fakeCudaMemsets). Nothing runs and no memory is written.
 *
 *===--------------------------------------------------------------------===*/

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;

enum { kDevices = 4, kInvalidContext = 201, kInvalidValue = 1 };

/* Each device's compute capability and opt-in shared memory per block
 * (H200, H200, A100, an 8.6 part). */
static const int kMajor[kDevices] = {9, 9, 8, 8};
static const int kMinor[kDevices] = {0, 0, 0, 6};
static const int kSharedOptin[kDevices] = {232448, 232448, 166912, 101376};
static const int kSms[kDevices] = {132, 114, 108, 84};

static char contexts[kDevices]; /* a context is the address of its byte */
static CUcontext stack[16];
static int depth; /* stack[depth - 1] is current */
static char log_[4096];
static size_t logLength;

/* The last launch: grid, block, shared memory, and its first `capture`
 * parameter words (the test says how many the kernel has). */
static unsigned lastLaunch[7];
static int capture;
static long long captured[64];
/* The last tensor map: rank, three sizes and three box sizes (innermost
 * first, 0 past the rank), swizzle. */
static long long lastMap[8];
/* The first kMemsets memsets since the last reset: pointer, value, count,
 * stream. */
enum { kMemsets = 8 };
static long long memsets[kMemsets][4];
static int numMemsets;

static void note(const char *what, int dev) {
  if (logLength + 64 >= sizeof log_)
    return; /* full: a benchmark's millions of launches are not logged */
  logLength += (size_t)snprintf(log_ + logLength, 64, "%s %d;", what, dev);
}

static int deviceOf(CUcontext c) { return (int)((char *)c - contexts); }

const char *fakeCudaLog(void) { return log_; }
void fakeCudaReset(void) {
  log_[0] = 0;
  logLength = 0;
  depth = 0;
  capture = 0;
  numMemsets = 0;
}
/* Copies the first `words` (at most 64) parameter words of later launches. */
void fakeCudaCapture(int words) { capture = words < 64 ? words : 64; }
const unsigned *fakeCudaLastLaunch(void) { return lastLaunch; }
const long long *fakeCudaLastWords(void) { return captured; }
const long long *fakeCudaLastTensorMap(void) { return lastMap; }
/* The memsets since the last reset (at most kMemsets are kept, all are
 * counted): *count of them, each {pointer, value, count, stream}. */
const long long (*fakeCudaMemsets(int *count))[4] {
  *count = numMemsets;
  return memsets;
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
  if (d < 0 || d >= kDevices)
    return kInvalidValue;
  *value = attribute == 75   ? kMajor[d]
           : attribute == 76 ? kMinor[d]
           : attribute == 97 ? kSharedOptin[d]
           : attribute == 16 ? kSms[d]
                             : 0;
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
  (void)stream;
  (void)extra;
  if (!depth || stack[depth - 1] != f)
    return kInvalidContext; /* wrong context */
  unsigned launch[7] = {gx, gy, gz, bx, by, bz, shared};
  memcpy(lastLaunch, launch, sizeof launch);
  for (int i = 0; i < capture; ++i)
    captured[i] = *(const long long *)params[i];
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
CUresult cuMemsetD32Async(unsigned long long p, unsigned value, size_t count,
                          void *stream) {
  if (!depth)
    return kInvalidContext;
  if (numMemsets < kMemsets) {
    memsets[numMemsets][0] = (long long)p;
    memsets[numMemsets][1] = value;
    memsets[numMemsets][2] = (long long)count;
    memsets[numMemsets][3] = (long long)(size_t)stream;
  }
  ++numMemsets;
  note("memset", deviceOf(stack[depth - 1]));
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
  (void)global;
  (void)strides;
  (void)elementStrides;
  (void)interleave;
  (void)l2;
  (void)oob;
  memset(lastMap, 0, sizeof lastMap);
  lastMap[0] = rank;
  for (unsigned d = 0; d < rank && d < 3; ++d) {
    lastMap[1 + d] = (long long)dims[d];
    lastMap[4 + d] = box[d];
  }
  lastMap[7] = swizzle;
  return 0;
}
