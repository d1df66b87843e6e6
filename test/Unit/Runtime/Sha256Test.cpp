//===- Sha256Test.cpp - the runtime's SHA-256 -----------------------------===//
//
// The vectors of FIPS 180-4's examples (NIST), and messages of every length
// around the block and padding boundaries (digests from Python's hashlib).
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/Sha256.h"

#include <gtest/gtest.h>
#include <string>
#include <vector>

using liger::runtime::sha256Hex;

namespace {

std::string digest(const std::string &s) {
  return sha256Hex(s.data(), s.size());
}

TEST(Sha256Test, TheStandardsVectors) {
  EXPECT_EQ(digest(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      digest("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijkl"
             "mnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(digest(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Bytes 0, 1, ..., n - 1: the padding fits the last block (55), does not
// (56, 63), the message fills whole blocks (64) or one byte more (65), and
// the same a block later.
TEST(Sha256Test, EveryPaddingCase) {
  const std::pair<int, const char *> kCases[] = {
      {55, "463eb28e72f82e0a96c0a4cc53690c571281131f672aa229e0d45ae59b598b59"},
      {56, "da2ae4d6b36748f2a318f23e7ab1dfdf45acdc9d049bd80e59de82a60895f562"},
      {63, "29af2686fd53374a36b0846694cc342177e428d1647515f078784d69cdb9e488"},
      {64, "fdeab9acf3710362bd2658cdc9a29e8f9c757fcf9811603a8c447cd1d9151108"},
      {65, "4bfd2c8b6f1eec7a2afeb48b934ee4b2694182027e6d0fc075074f2fabb31781"},
      {119, "da18797ed7c3a777f0847f429724a2d8cd5138e6ed2895c3fa1a6d39d18f7ec6"},
      {120,
       "f52b23db1fbb6ded89ef42a23ce0c8922c45f25c50b568a93bf1c075420bbb7c"}};
  for (auto [n, expected] : kCases) {
    std::vector<unsigned char> bytes(n);
    for (int i = 0; i < n; ++i)
      bytes[i] = static_cast<unsigned char>(i);
    EXPECT_EQ(sha256Hex(bytes.data(), bytes.size()), expected) << n;
  }
}

} // namespace
