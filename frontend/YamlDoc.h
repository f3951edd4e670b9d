//===- YamlDoc.h - a located YAML tree, free of yaml-cpp ------------------===//
//
// yaml-cpp throws, and MLIR code must not see exceptions. This header is the
// boundary: YamlDoc.cpp parses with yaml-cpp, catches everything, and hands back a
// plain tree in which every node keeps its 1-based line and column. The importer
// works on this tree only.
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_FRONTEND_YAMLDOC_H
#define TFC_FRONTEND_YAMLDOC_H

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tfc::yaml {

/// One YAML node with its source position.
struct Node {
  enum class Kind { Null, Scalar, Sequence, Map };
  Kind kind = Kind::Null;
  std::string scalar;                   ///< for Scalar
  std::vector<Node> items;              ///< for Sequence
  std::vector<std::pair<Node, Node>> entries; ///< for Map: (key, value), in file order
  int line = 0, col = 0;                ///< 1-based; 0 when unknown

  bool isMap() const { return kind == Kind::Map; }
  bool isSeq() const { return kind == Kind::Sequence; }
  bool isScalar() const { return kind == Kind::Scalar; }
  bool isNull() const { return kind == Kind::Null; }
  /// The value of key |k| in a map, or nullptr.
  const Node *get(const std::string &k) const;
  /// The key node of |k| in a map (for locating "unknown key" errors), or nullptr.
  const Node *keyNode(const std::string &k) const;
};

/// A parse failure: position (1-based) and a one-line message.
struct Error {
  int line = 0, col = 0;
  std::string message;
};

/// Parses a YAML document from |text|. Returns false and fills |err| on malformed
/// YAML, duplicate keys, or nesting deeper than 64 levels (a recursive alias).
bool parse(const std::string &text, Node &out, Error &err);

} // namespace tfc::yaml

#endif // TFC_FRONTEND_YAMLDOC_H
