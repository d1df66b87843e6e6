//===- JsonDocument.cpp - a JSON text as a flat, bounded document ---------===//
//
// nlohmann/json's SAX parser (iterative: no recursion however deep the
// text) feeds JsonBuilder, which appends each value to the document and,
// when an array or object ends, its items to the document's member list in
// one contiguous run. The builder refuses the text as soon as it nests too
// deep, holds too many values, or repeats a key in an object.
//
//===----------------------------------------------------------------------===//

#include "JsonDocument.h"

#include <nlohmann/json.hpp>

#include <set>

using namespace liger::runtime;

//===----------------------------------------------------------------------===//
// Building
//===----------------------------------------------------------------------===//

namespace liger::runtime {
/// The SAX handler that builds a JsonDocument (nlohmann/json's SAX
/// interface; every event returns false to stop the parse).
class JsonBuilder {
public:
  using json = nlohmann::json;

  JsonBuilder(JsonDocument &doc, size_t maxDepth, size_t maxValues,
              JsonError *error)
      : doc(doc), maxDepth(maxDepth), maxValues(maxValues), error(error) {}

  bool null() { return value(JsonDocument::Node()); }
  bool boolean(bool v) {
    JsonDocument::Node n;
    n.kind = JsonDocument::Kind::Boolean;
    n.boolean = v;
    return value(n);
  }
  bool number_integer(json::number_integer_t v) {
    JsonDocument::Node n;
    n.kind = JsonDocument::Kind::Integer;
    n.integer = v;
    return value(n);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    JsonDocument::Node n;
    n.kind = JsonDocument::Kind::Unsigned;
    n.unsignedInteger = v;
    return value(n);
  }
  bool number_float(json::number_float_t, const json::string_t &spelling) {
    JsonDocument::Node n;
    n.kind = JsonDocument::Kind::Float;
    n.text = text(spelling);
    return value(n);
  }
  bool string(json::string_t &v) {
    JsonDocument::Node n;
    n.kind = JsonDocument::Kind::String;
    n.text = text(std::move(v));
    return value(n);
  }
  bool binary(json::binary_t &) { return fail("", "binary values"); }
  bool start_object(std::size_t) { return open(JsonDocument::Kind::Object); }
  bool start_array(std::size_t) { return open(JsonDocument::Kind::Array); }
  bool key(json::string_t &k) {
    Frame &f = frames.back();
    if (!f.keys.insert(k).second)
      return fail(path(), "duplicate key '" + k + "'");
    f.key = text(std::move(k));
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &e) {
    // "[json.exception.parse_error.101] parse error at line 1, ...".
    // It quotes the last token read, which may be the rest of the text.
    std::string what = e.what();
    size_t at = what.find("] ");
    if (at != std::string::npos)
      what = what.substr(at + 2);
    if (what.size() > kMaxErrorLength)
      what = what.substr(0, kMaxErrorLength - 3) + "...";
    return fail("", what);
  }

private:
  static constexpr size_t kMaxErrorLength = 240;

  /// An array or object being read.
  struct Frame {
    uint32_t node;
    bool isArray;
    uint32_t key = JsonDocument::kNoKey; ///< objects: the pending key
    std::vector<JsonDocument::Member> items;
    std::set<std::string> keys;
  };

  bool fail(std::string at, std::string what) {
    error->path = std::move(at);
    error->what = std::move(what);
    return false;
  }

  uint32_t text(std::string t) {
    doc.texts_.push_back(std::move(t));
    return static_cast<uint32_t>(doc.texts_.size() - 1);
  }

  /// Appends `n` and makes it an item of the array or object being read.
  bool value(const JsonDocument::Node &n) {
    if (doc.nodes_.size() >= maxValues)
      return fail(frames.empty() ? "manifest" : path(),
                  "more than " + std::to_string(maxValues) +
                      " JSON values (the runtime reads no more)");
    auto index = static_cast<uint32_t>(doc.nodes_.size());
    doc.nodes_.push_back(n);
    if (!frames.empty()) {
      Frame &f = frames.back();
      f.items.push_back({f.isArray ? JsonDocument::kNoKey : f.key, index});
    }
    return true;
  }

  bool open(JsonDocument::Kind kind) {
    if (frames.size() >= maxDepth)
      return fail(path(), "nested deeper than " + std::to_string(maxDepth) +
                              " arrays and objects");
    JsonDocument::Node n;
    n.kind = kind;
    if (!value(n))
      return false;
    frames.push_back({static_cast<uint32_t>(doc.nodes_.size() - 1),
                      kind == JsonDocument::Kind::Array});
    return true;
  }

  bool close() {
    Frame &f = frames.back();
    JsonDocument::Node &n = doc.nodes_[f.node];
    n.first = static_cast<uint32_t>(doc.members_.size());
    n.size = static_cast<uint32_t>(f.items.size());
    doc.members_.insert(doc.members_.end(), f.items.begin(), f.items.end());
    frames.pop_back();
    return true;
  }

  /// "modules[0].kernels[1]": the array or object being read ("manifest"
  /// for the outermost).
  std::string path() const {
    std::string p;
    for (size_t i = 0; i + 1 < frames.size(); ++i) {
      const Frame &f = frames[i];
      if (f.isArray)
        p += "[" + std::to_string(f.items.size() - 1) + "]";
      else
        p += (p.empty() ? "" : ".") + doc.texts_[f.items.back().key];
    }
    return p.empty() ? "manifest" : p;
  }

  JsonDocument &doc;
  size_t maxDepth, maxValues;
  JsonError *error;
  std::vector<Frame> frames;
};
} // namespace liger::runtime

bool JsonDocument::parse(const std::string &text, size_t maxDepth,
                         size_t maxValues, JsonError *error) {
  nodes_.clear();
  texts_.clear();
  members_.clear();
  JsonBuilder builder(*this, maxDepth, maxValues, error);
  return nlohmann::json::sax_parse(text, &builder) && !nodes_.empty();
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

bool JsonValue::isObject() const {
  return doc_->nodes_[index_].kind == JsonDocument::Kind::Object;
}
bool JsonValue::isArray() const {
  return doc_->nodes_[index_].kind == JsonDocument::Kind::Array;
}
bool JsonValue::isString() const {
  return doc_->nodes_[index_].kind == JsonDocument::Kind::String;
}
bool JsonValue::isBoolean() const {
  return doc_->nodes_[index_].kind == JsonDocument::Kind::Boolean;
}

bool JsonValue::asInt64(int64_t *out) const {
  const JsonDocument::Node &n = doc_->nodes_[index_];
  if (n.kind == JsonDocument::Kind::Integer) {
    *out = n.integer;
    return true;
  }
  if (n.kind == JsonDocument::Kind::Unsigned &&
      n.unsignedInteger <= static_cast<uint64_t>(INT64_MAX)) {
    *out = static_cast<int64_t>(n.unsignedInteger);
    return true;
  }
  return false;
}

const std::string &JsonValue::string() const {
  return doc_->texts_[doc_->nodes_[index_].text];
}

bool JsonValue::boolean() const { return doc_->nodes_[index_].boolean; }

size_t JsonValue::size() const { return doc_->nodes_[index_].size; }

JsonValue JsonValue::operator[](size_t i) const {
  return JsonValue(doc_, doc_->members_[doc_->nodes_[index_].first + i].value);
}

const std::string &JsonValue::key(size_t i) const {
  return doc_->texts_[doc_->members_[doc_->nodes_[index_].first + i].key];
}

bool JsonValue::find(std::string_view name, JsonValue *out) const {
  for (size_t i = 0; i < size(); ++i)
    if (key(i) == name) {
      *out = (*this)[i];
      return true;
    }
  return false;
}

namespace {
/// `s` as a JSON string literal.
void writeString(std::string *out, const std::string &s) {
  *out += '"';
  for (char c : s) {
    switch (c) {
    case '"':
      *out += "\\\"";
      break;
    case '\\':
      *out += "\\\\";
      break;
    case '\n':
      *out += "\\n";
      break;
    case '\t':
      *out += "\\t";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        static const char kHex[] = "0123456789abcdef";
        *out += "\\u00";
        *out += kHex[(c >> 4) & 0xf];
        *out += kHex[c & 0xf];
      } else {
        *out += c;
      }
    }
  }
  *out += '"';
}
} // namespace

/// Writes the value as compact JSON, stopping once `out` is longer than
/// `limit` (so the work is bounded however large the value).
void JsonValue::write(std::string *out, size_t limit) const {
  const JsonDocument::Node &n = doc_->nodes_[index_];
  switch (n.kind) {
  case JsonDocument::Kind::Null:
    *out += "null";
    return;
  case JsonDocument::Kind::Boolean:
    *out += n.boolean ? "true" : "false";
    return;
  case JsonDocument::Kind::Integer:
    *out += std::to_string(n.integer);
    return;
  case JsonDocument::Kind::Unsigned:
    *out += std::to_string(n.unsignedInteger);
    return;
  case JsonDocument::Kind::Float:
    *out += doc_->texts_[n.text];
    return;
  case JsonDocument::Kind::String:
    writeString(out, string());
    return;
  case JsonDocument::Kind::Array:
  case JsonDocument::Kind::Object:
    break;
  }
  bool object = n.kind == JsonDocument::Kind::Object;
  *out += object ? '{' : '[';
  for (size_t i = 0; i < n.size && out->size() <= limit; ++i) {
    if (i)
      *out += ',';
    if (object) {
      writeString(out, key(i));
      *out += ':';
    }
    (*this)[i].write(out, limit);
  }
  *out += object ? '}' : ']';
}

std::string JsonValue::describe() const {
  std::string text;
  write(&text, 40);
  if (text.size() > 40)
    text = text.substr(0, 37) + "...";
  return text;
}
