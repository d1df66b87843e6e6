// A fixture for the lint's own test (not a lit test: Inputs/ is excluded).
// RUN: liger-opt %s | FileCheck %s --check-prefixes=IR,OTHER
// CHECK: fine
// CHECK-NEXT fine-but-missing-colon
// IR-LABEL func.func @f
// OTHER: fine
// CHECKS are discussed in prose here, which is not a directive.
