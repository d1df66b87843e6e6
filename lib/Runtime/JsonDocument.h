//===- JsonDocument.h - a JSON text as a flat, bounded document -*- C++ -*-===//
//
// What parseManifest reads a manifest into (ManifestJson.cpp): the values of
// a JSON text in flat arrays, built from nlohmann/json's SAX events. Its
// limits (nesting depth, number of values) are checked while it is built;
// a duplicate key is an error. No value owns another, so destroying a
// document allocates nothing and nothing about it recurses deeper than its
// depth limit (nlohmann/json's own document allocates while it is
// destroyed, which a failed allocation turns into std::terminate).
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_LIB_RUNTIME_JSONDOCUMENT_H
#define LIGER_LIB_RUNTIME_JSONDOCUMENT_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace liger::runtime {

class JsonDocument;

/// One value of a JsonDocument (valid as long as the document).
class JsonValue {
public:
  /// A value to assign to (find, the getters of ManifestJson.cpp).
  JsonValue() = default;

  bool isObject() const;
  bool isArray() const;
  bool isString() const;
  bool isBoolean() const;
  /// The value as a 64-bit integer; false when it is not an integer that
  /// fits one.
  bool asInt64(int64_t *out) const;
  /// A string's text; a boolean's value.
  const std::string &string() const;
  bool boolean() const;
  /// The items of an array or the members of an object, in text order.
  size_t size() const;
  JsonValue operator[](size_t i) const;
  /// The key of member `i` of an object.
  const std::string &key(size_t i) const;
  /// The member `key` of an object; false when it has none.
  bool find(std::string_view key, JsonValue *out) const;
  /// The value as compact JSON, shortened to 40 characters ("..." ending)
  /// for messages.
  std::string describe() const;

private:
  friend class JsonDocument;
  JsonValue(const JsonDocument *doc, uint32_t index)
      : doc_(doc), index_(index) {}
  void write(std::string *out, size_t limit) const;

  const JsonDocument *doc_ = nullptr;
  uint32_t index_ = 0;
};

/// Where and why a text was not read: `path` is empty for malformed JSON
/// (then `what` says where in the text), else the JSON path of the object
/// or array at fault ("modules[0].kernels[1]", "manifest" for the root).
struct JsonError {
  std::string path;
  std::string what;
};

/// A parsed JSON text.
class JsonDocument {
public:
  /// Parses `text`, refusing nesting deeper than `maxDepth` arrays and
  /// objects, more than `maxValues` values, and a key repeated in an
  /// object. False with `*error` when it fails.
  bool parse(const std::string &text, size_t maxDepth, size_t maxValues,
             JsonError *error);

  /// The text's value (after a successful parse).
  JsonValue root() const { return JsonValue(this, 0); }

private:
  friend class JsonValue;
  friend class JsonBuilder;
  enum class Kind : uint8_t {
    Null,
    Boolean,
    Integer,
    Unsigned,
    Float,
    String,
    Array,
    Object
  };
  struct Node {
    Kind kind = Kind::Null;
    bool boolean = false;
    union {
      int64_t integer;
      uint64_t unsignedInteger;
    };
    uint32_t text = 0;            ///< String, Float: index in texts_
    uint32_t first = 0, size = 0; ///< Array, Object: members_[first, +size)
    Node() : integer(0) {}
  };
  /// An item of an array (key kNoKey) or a member of an object.
  struct Member {
    uint32_t key;
    uint32_t value;
  };
  static constexpr uint32_t kNoKey = UINT32_MAX;

  std::vector<Node> nodes_;
  std::vector<std::string> texts_; ///< strings, keys, floats as written
  std::vector<Member> members_;
};

} // namespace liger::runtime

#endif // LIGER_LIB_RUNTIME_JSONDOCUMENT_H
