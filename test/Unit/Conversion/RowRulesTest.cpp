//===- RowRulesTest.cpp - The row templates' configuration rules ----------===//
//
// The rules the default configuration and every pinned one share
// (RowKernel.h), each clause apart: the dialect's ops that reduce across
// rows all read a weight too, so no lit test separates checkRowPeel's two
// reasons for refusing an operand indexed by column alone.
//
//===----------------------------------------------------------------------===//

#include "liger/Conversion/LigerToGPU/RowKernel.h"

#include <gtest/gtest.h>

using namespace mlir::liger;

namespace {

TEST(RowPeelRule, AWidthDividingTheRowPeelsNothing) {
  EXPECT_EQ(checkRowPeel(50256, 8, /*cluster=*/4, /*readsByColumn=*/true), "");
}

TEST(RowPeelRule, APeeledRowTakesNoOperandIndexedByColumnAlone) {
  EXPECT_EQ(checkRowPeel(50257, 8, 1, /*readsByColumn=*/false), "");
  EXPECT_EQ(checkRowPeel(50257, 8, 1, /*readsByColumn=*/true),
            "vector_width 8 does not divide the row length 50257, so each "
            "row is peeled to its first chunk boundary, where an operand "
            "indexed by column alone would be read unaligned");
}

TEST(RowPeelRule, APeeledRowIsNotSplitOverACluster) {
  EXPECT_EQ(checkRowPeel(7, 4, /*cluster=*/2, /*readsByColumn=*/false),
            "vector_width 4 does not divide the row length 7, so each row is "
            "peeled to its first chunk boundary, and a peeled row is not "
            "split over a cluster");
}

TEST(RowPeelRule, TheBodyIsWhatFitsAfterAnyHead) {
  // 50257 in 8-wide chunks: a head of up to 7, then 6281 full chunks.
  EXPECT_EQ(rowPeelBody(50257, 8), 50248);
  // A row shorter than a head and a chunk: all single elements.
  EXPECT_EQ(rowPeelBody(7, 8), 0);
  EXPECT_EQ(rowPeelBody(15, 8), 8);
  EXPECT_EQ(rowPeelBody(14, 8), 0);
}

} // namespace
