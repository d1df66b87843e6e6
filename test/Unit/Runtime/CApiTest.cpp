//===- CApiTest.cpp - the runtime's C API ---------------------------------===//
//
// The C ABI over the runtime: handles, the thread-local error message, the
// status codes, argument checks before any driver call, and the header used
// from C (CApiFromC.c).
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/liger_runtime.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <string>

extern "C" int liger_capi_from_c(const char *dir, char *out, int size);

namespace {

const char *kManifest = R"({
  "format": "liger-bundle", "version": 2, "source": "t.mlir",
  "modules": [{"name": "liger_kernels", "arch": "sm_90a", "cubin": "k.cubin", "ptx": "k.ptx",
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
    std::ofstream(dir + "/manifest.json") << kManifest;
    std::ofstream(dir + "/k.cubin", std::ios::binary)
        << std::string("\x7f"
                       "ELF") +
               std::string(100, '\0');
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
  EXPECT_NE(std::string(liger_last_error()).find("manifest.json"),
            std::string::npos);
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
