//===- CApiTest.cpp - the runtime's C API ---------------------------------===//
//
// The C ABI over the runtime: handles, the thread-local error message, the
// status codes, argument checks before any driver call, kernel and
// parameter introspection, output and workspace shapes, plans, the device
// check, and the header used from C (CApiFromC.c).
//
//===----------------------------------------------------------------------===//

#include "TestBundle.h"
#include "liger/Runtime/liger_runtime.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <string>

extern "C" int liger_capi_from_c(const char *dir, char *out, int size);

namespace {

const char *kManifest = R"({
  "format": "liger-bundle", "version": 3, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a", "cubin": "k.cubin",
    "cubin_sha256": "0000000000000000000000000000000000000000000000000000000000000000", "ptx": "k.ptx",
    "kernels": [
     {"name": "norm", "function": "layer", "template": "rowwise", "ops": "liger.rms_norm",
      "abi": "memref-descriptor", "grid": ["rows", 1, 1], "block": [256, 1, 1],
      "dynamic_shared_memory_bytes": 36, "vector_width": 8, "alignment_bytes": 16,
      "params": [
        {"name": "input0", "role": "input", "kind": "rows", "dtype": "bf16", "shape": ["rows", 64]},
        {"name": "output0", "role": "output", "kind": "rows", "dtype": "bf16", "shape": ["rows", 64]}]},
     {"name": "grad", "function": "layer", "template": "rowwise", "ops": "liger.rms_norm_grad",
      "abi": "memref-descriptor", "grid": ["ctas", 1, 1], "block": [32, 1, 1],
      "dynamic_shared_memory_bytes": 0, "vector_width": 8, "alignment_bytes": 16,
      "ctas_per_sm": 4,
      "finish": {"name": "grad_finish", "grid": [2, 1, 1], "block": [256, 1, 1],
                 "dynamic_shared_memory_bytes": 1024},
      "params": [
        {"name": "input0", "role": "input", "kind": "rows", "dtype": "bf16", "shape": ["rows", 64]},
        {"name": "output0", "role": "output", "kind": "feature", "dtype": "bf16", "shape": [64]},
        {"name": "workspace0", "role": "workspace", "kind": "partials", "dtype": "f32", "shape": ["ctas", 64]}]}
    ]}],
  "plans": [{"function": "step", "kind": "fused_linear_cross_entropy",
    "chunk_tokens": 128, "memory_budget": 256000, "mean": true, "ignore_index": -100,
    "class_weight": false, "dw_f32": false, "kernels": {"logits": "grad", "ce": "norm"}}]})";

class CApiTest : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/liger-capi-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir = pattern;
    liger::runtime::testing::writeTestBundle(dir, kManifest);
  }
  void TearDown() override {
    std::remove((dir + "/manifest.json").c_str());
    std::remove((dir + "/k.cubin").c_str());
    std::remove(dir.c_str());
  }
  std::string dir;
};

TEST_F(CApiTest, OpensListsAndCloses) {
  EXPECT_EQ(liger_abi_version(), LIGER_RUNTIME_ABI_VERSION);
  liger_bundle *b = nullptr;
  ASSERT_EQ(liger_bundle_open(dir.c_str(), &b), LIGER_OK) << liger_last_error();
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(liger_bundle_kernel_count(b), 2);
  EXPECT_STREQ(liger_bundle_kernel_name(b, 0), "norm");
  EXPECT_STREQ(liger_bundle_kernel_name(b, 1), "grad");
  EXPECT_EQ(liger_bundle_kernel_name(b, 2), nullptr);
  EXPECT_EQ(liger_bundle_kernel_name(b, -1), nullptr);
  EXPECT_EQ(liger_bundle_kernel_param_count(b, "grad"), 3);
  EXPECT_EQ(liger_bundle_kernel_param_count(b, "nope"), -1);
  EXPECT_EQ(liger_bundle_workspace_ctas(b, "grad", 16384, 132), 528);
  EXPECT_EQ(liger_bundle_workspace_ctas(b, "grad", 0, 132), 1);
  EXPECT_EQ(liger_bundle_workspace_ctas(b, "norm", 16384, 132), 0);
  EXPECT_EQ(liger_bundle_workspace_ctas(b, "nope", 1, 1), -1);
  liger_bundle_close(b);
  liger_bundle_close(nullptr);
}

TEST_F(CApiTest, FailuresHaveACodeAndAMessage) {
  liger_bundle *b = reinterpret_cast<liger_bundle *>(1);
  EXPECT_EQ(liger_bundle_open((dir + "/missing").c_str(), &b), LIGER_NOT_FOUND);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(std::string(liger_last_error()),
            "cannot read bundle directory " + dir +
                "/missing: No such file or directory");
  EXPECT_EQ(liger_bundle_open(nullptr, &b), LIGER_INVALID_ARGUMENT);
  EXPECT_EQ(liger_bundle_open(dir.c_str(), nullptr), LIGER_INVALID_ARGUMENT);

  ASSERT_EQ(liger_bundle_open(dir.c_str(), &b), LIGER_OK);
  alignas(16) static char buf[256];
  int64_t shape[] = {3, 64};
  liger_tensor args[] = {{buf, LIGER_BF16, 2, shape},
                         {buf, LIGER_BF16, 2, shape}};
  // Checked before any driver call: unknown kernel, wrong dtype, bad rank.
  EXPECT_EQ(liger_bundle_launch(b, "nope", args, 2, nullptr, 0),
            LIGER_NOT_FOUND);
  EXPECT_NE(std::string(liger_last_error()).find("has no kernel 'nope'"),
            std::string::npos);
  liger_tensor wrong[] = {{buf, LIGER_F32, 2, shape},
                          {buf, LIGER_BF16, 2, shape}};
  EXPECT_EQ(liger_bundle_launch(b, "norm", wrong, 2, nullptr, 0),
            LIGER_INVALID_ARGUMENT);
  EXPECT_NE(std::string(liger_last_error()).find("must be bf16, got f32"),
            std::string::npos);
  liger_tensor badRank[] = {{buf, LIGER_BF16, -1, shape},
                            {buf, LIGER_BF16, 2, shape}};
  EXPECT_EQ(liger_bundle_launch(b, "norm", badRank, 2, nullptr, 0),
            LIGER_INVALID_ARGUMENT);
  liger_tensor badDtype[] = {{buf, static_cast<liger_dtype>(9), 2, shape},
                             {buf, LIGER_BF16, 2, shape}};
  EXPECT_EQ(liger_bundle_launch(b, "norm", badDtype, 2, nullptr, 0),
            LIGER_INVALID_ARGUMENT);
  EXPECT_NE(std::string(liger_last_error()).find("unknown dtype 9"),
            std::string::npos);
  EXPECT_EQ(liger_bundle_launch(b, "norm", nullptr, 2, nullptr, 0),
            LIGER_INVALID_ARGUMENT);
  // Valid arguments reach the driver: a launch where there is one, a clear
  // "no driver" where not (a fake cubin cannot load, so INTERNAL there).
  liger_status s = liger_bundle_launch(b, "norm", args, 2, nullptr, 0);
  EXPECT_TRUE(s == LIGER_UNAVAILABLE || s == LIGER_INTERNAL ||
              s == LIGER_FAILED_PRECONDITION)
      << s << ": " << liger_last_error();
  liger_bundle_close(b);
}

TEST_F(CApiTest, KernelsAndParameters) {
  liger_bundle *b = nullptr;
  ASSERT_EQ(liger_bundle_open(dir.c_str(), &b), LIGER_OK) << liger_last_error();
  int32_t grad = liger_bundle_kernel_index(b, "grad");
  EXPECT_EQ(grad, 1);
  EXPECT_EQ(liger_bundle_kernel_index(b, "grad_finish"), -1);
  EXPECT_EQ(liger_bundle_kernel_index(b, nullptr), -1);
  liger_kernel_info info;
  ASSERT_EQ(liger_bundle_kernel_info(b, grad, &info), LIGER_OK);
  EXPECT_STREQ(info.name, "grad");
  EXPECT_STREQ(info.function, "layer");
  EXPECT_STREQ(info.ops, "liger.rms_norm_grad");
  EXPECT_STREQ(info.template_name, "rowwise");
  EXPECT_STREQ(info.arch, "sm_90a");
  EXPECT_EQ(info.num_params, 3);
  EXPECT_EQ(info.num_inputs, 1);
  EXPECT_EQ(info.num_outputs, 1);
  EXPECT_EQ(info.num_workspaces, 1);
  EXPECT_EQ(liger_bundle_kernel_info(b, 2, &info), LIGER_NOT_FOUND);
  EXPECT_STREQ(liger_last_error(), (std::string("liger_bundle_kernel_info: no "
                                                "kernel #2 in ") +
                                    dir + " (it has 2)")
                                       .c_str());
  liger_param_info p;
  ASSERT_EQ(liger_bundle_param_info(b, grad, 2, &p), LIGER_OK);
  EXPECT_STREQ(p.name, "workspace0");
  EXPECT_EQ(p.role, LIGER_ROLE_WORKSPACE);
  EXPECT_EQ(p.kind, LIGER_KIND_PARTIALS);
  EXPECT_EQ(p.dtype, LIGER_F32);
  EXPECT_EQ(p.length, 64);
  EXPECT_EQ(p.outer, 0);
  EXPECT_EQ(liger_bundle_param_info(b, grad, 3, &p), LIGER_NOT_FOUND);
  EXPECT_STREQ(liger_last_error(), "liger_bundle_param_info: kernel 'grad' has "
                                   "no parameter #3 (it has 3)");
  EXPECT_EQ(liger_bundle_param_info(b, grad, 0, nullptr),
            LIGER_INVALID_ARGUMENT);
  liger_bundle_close(b);
}

TEST_F(CApiTest, OutputAndWorkspaceShapes) {
  liger_bundle *b = nullptr;
  ASSERT_EQ(liger_bundle_open(dir.c_str(), &b), LIGER_OK) << liger_last_error();
  int64_t x[] = {2, 3, 64};
  liger_tensor in[] = {{nullptr, LIGER_BF16, 3, x}};
  int32_t ranks[1] = {-1};
  int64_t sizes[LIGER_MAX_RANK] = {};
  ASSERT_EQ(liger_bundle_output_shapes(b, 0, in, 1, ranks, sizes), LIGER_OK)
      << liger_last_error();
  EXPECT_EQ(ranks[0], 3);
  EXPECT_EQ(std::vector<int64_t>(sizes, sizes + 3),
            (std::vector<int64_t>{2, 3, 64}));
  ASSERT_EQ(liger_bundle_output_shapes(b, 1, in, 1, ranks, sizes), LIGER_OK);
  EXPECT_EQ(ranks[0], 1);
  EXPECT_EQ(sizes[0], 64);
  ASSERT_EQ(liger_bundle_workspace_shapes(b, 1, in, 1, 132, ranks, sizes),
            LIGER_OK);
  EXPECT_EQ(ranks[0], 2);
  EXPECT_EQ(std::vector<int64_t>(sizes, sizes + 2),
            (std::vector<int64_t>{6, 64}));
  x[2] = 63;
  EXPECT_EQ(liger_bundle_output_shapes(b, 0, in, 1, ranks, sizes),
            LIGER_INVALID_ARGUMENT);
  EXPECT_STREQ(liger_last_error(), "kernel 'norm': 'input0' (#0) must have 64 "
                                   "elements in its last dimension, got shape "
                                   "[2, 3, 63]");
  in[0].rank = 9;
  EXPECT_EQ(liger_bundle_output_shapes(b, 0, in, 1, ranks, sizes),
            LIGER_INVALID_ARGUMENT);
  EXPECT_STREQ(liger_last_error(), "liger_bundle_output_shapes: argument #0 "
                                   "has rank 9; liger kernels take tensors of "
                                   "rank 0 to 8");
  EXPECT_EQ(liger_bundle_output_shapes(b, 0, in, 1, nullptr, sizes),
            LIGER_INVALID_ARGUMENT);
  EXPECT_EQ(liger_bundle_workspace_shapes(b, 5, in, 1, 132, ranks, sizes),
            LIGER_NOT_FOUND);
  liger_bundle_close(b);
}

TEST_F(CApiTest, PlansAndTheDevice) {
  liger_bundle *b = nullptr;
  ASSERT_EQ(liger_bundle_open(dir.c_str(), &b), LIGER_OK) << liger_last_error();
  ASSERT_EQ(liger_bundle_plan_count(b), 1);
  liger_loss_plan plan;
  ASSERT_EQ(liger_bundle_plan(b, 0, &plan), LIGER_OK);
  EXPECT_STREQ(plan.function, "step");
  EXPECT_STREQ(plan.kind, "fused_linear_cross_entropy");
  EXPECT_EQ(plan.chunk_tokens, 128);
  EXPECT_EQ(plan.memory_budget, 256000);
  EXPECT_EQ(plan.ignore_index, -100);
  EXPECT_EQ(plan.mean, 1);
  EXPECT_EQ(plan.class_weight, 0);
  EXPECT_EQ(plan.kernels[LIGER_STAGE_LOGITS], 1);
  EXPECT_EQ(plan.kernels[LIGER_STAGE_CE], 0);
  EXPECT_EQ(plan.kernels[LIGER_STAGE_DX], -1);
  EXPECT_EQ(liger_bundle_plan(b, 1, &plan), LIGER_NOT_FOUND);
  EXPECT_STREQ(liger_last_error(),
               "liger_bundle_plan: no plan #1 (the bundle has 1)");
  // Without a driver the device check says so; with one, it passes or
  // names a kernel.
  liger_status s = liger_bundle_check_device(b, 0);
  EXPECT_TRUE(s == LIGER_UNAVAILABLE || s == LIGER_OK ||
              s == LIGER_FAILED_PRECONDITION || s == LIGER_INTERNAL)
      << s;
  if (s == LIGER_UNAVAILABLE) {
    EXPECT_NE(
        std::string(liger_last_error()).find("cannot load the CUDA driver"),
        std::string::npos);
  }
  EXPECT_EQ(liger_bundle_check_device(nullptr, 0), LIGER_INVALID_ARGUMENT);
  EXPECT_EQ(liger_bundle_launch_kernel(b, -1, nullptr, 0, nullptr, 0),
            LIGER_NOT_FOUND);
  EXPECT_STREQ(liger_last_error(), (std::string("liger_bundle_launch: no "
                                                "kernel #-1 in ") +
                                    dir + " (it has 2)")
                                       .c_str());
  liger_bundle_close(b);
}

TEST_F(CApiTest, TheHeaderWorksFromC) {
  char out[256];
  ASSERT_EQ(liger_capi_from_c(dir.c_str(), out, sizeof out), 0) << out;
  EXPECT_STREQ(out, "norm;grad;");
  EXPECT_EQ(liger_capi_from_c("/nonexistent", out, sizeof out),
            LIGER_NOT_FOUND);
  EXPECT_NE(std::string(out).find("error 2: cannot read"), std::string::npos)
      << out;
}

TEST_F(CApiTest, TheHeaderOnlyCppApi) {
  liger::abi::Bundle bundle(dir);
  EXPECT_EQ(bundle.kernels(), (std::vector<std::string>{"norm", "grad"}));
  int64_t x[] = {5, 64};
  EXPECT_EQ(bundle.outputShapes("norm", {{nullptr, LIGER_BF16, 2, x}}),
            (std::vector<std::vector<int64_t>>{{5, 64}}));
  EXPECT_EQ(bundle.kernelIndex("grad"), 1);
  EXPECT_THROW(bundle.kernelIndex("nope"), liger::abi::Error);
  EXPECT_EQ(bundle.workspaceCtas("grad", 7, 132), 7);
  EXPECT_THROW(bundle.workspaceCtas("nope", 7, 132), liger::abi::Error);
  try {
    bundle.launch("nope", {});
    FAIL() << "launched an unknown kernel";
  } catch (const liger::abi::Error &e) {
    EXPECT_EQ(e.status(), LIGER_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find("has no kernel 'nope'"),
              std::string::npos);
  }
  try {
    liger::abi::Bundle missing(dir + "/missing");
    FAIL() << "opened a missing bundle";
  } catch (const liger::abi::Error &e) {
    EXPECT_EQ(e.status(), LIGER_NOT_FOUND);
  }
}

} // namespace
