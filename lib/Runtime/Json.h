//===- Json.h - a small JSON reader for bundle manifests --------*- C++ -*-===//
//
// The runtime has no LLVM dependency, so it reads manifests with this small
// recursive-descent parser: objects, arrays, strings (with \" \\ \/ \n \t
// escapes), numbers, true/false/null. Errors carry the byte offset.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_LIB_RUNTIME_JSON_H
#define LIGER_LIB_RUNTIME_JSON_H

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace liger::runtime::json {

struct Value {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  /// The member `key` of an object, or null.
  const Value *get(const std::string &key) const;
};

/// Parses `text`; on failure returns false and sets `error`.
bool parse(const std::string &text, Value *value, std::string *error);

} // namespace liger::runtime::json

#endif // LIGER_LIB_RUNTIME_JSON_H
