//===- YamlDoc.cpp - yaml-cpp to a located tree, exceptions contained ----===//
//
// The only file in tfc that includes yaml-cpp. We use yaml-cpp (Debian's
// libyaml-cpp-dev) rather than a hand-written parser because YAML's grammar is large
// (flow and block styles, anchors, multi-line scalars) and yaml-cpp gives marks
// (line/column) for every node, which our diagnostics need. Every exception it
// throws is caught here.
//
//===----------------------------------------------------------------------------===//
#include "frontend/YamlDoc.h"

#include <yaml-cpp/yaml.h>

#include <set>

namespace tfc::yaml {

const Node *Node::get(const std::string &k) const {
  for (const auto &e : entries)
    if (e.first.scalar == k)
      return &e.second;
  return nullptr;
}

const Node *Node::keyNode(const std::string &k) const {
  for (const auto &e : entries)
    if (e.first.scalar == k)
      return &e.first;
  return nullptr;
}

namespace {
constexpr int kMaxDepth = 64;

struct Converter {
  Error &err;

  void setPos(const YAML::Node &n, Node &out) {
    YAML::Mark m = n.Mark();
    out.line = m.line >= 0 ? m.line + 1 : 0;
    out.col = m.column >= 0 ? m.column + 1 : 0;
  }

  bool fail(const Node &at, std::string msg) {
    err.line = at.line;
    err.col = at.col;
    err.message = std::move(msg);
    return false;
  }

  bool convert(const YAML::Node &n, Node &out, int depth) {
    setPos(n, out);
    if (depth > kMaxDepth)
      return fail(out, "YAML nesting is deeper than 64 levels (a recursive alias?)");
    switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      out.kind = Node::Kind::Null;
      return true;
    case YAML::NodeType::Scalar:
      out.kind = Node::Kind::Scalar;
      out.scalar = n.Scalar();
      return true;
    case YAML::NodeType::Sequence:
      out.kind = Node::Kind::Sequence;
      for (const auto &item : n) {
        out.items.emplace_back();
        if (!convert(item, out.items.back(), depth + 1))
          return false;
      }
      return true;
    case YAML::NodeType::Map: {
      out.kind = Node::Kind::Map;
      std::set<std::string> seen;
      for (const auto &kv : n) {
        Node key, value;
        if (!convert(kv.first, key, depth + 1))
          return false;
        if (!key.isScalar())
          return fail(key, "map keys must be plain scalars");
        if (!seen.insert(key.scalar).second)
          return fail(key, "duplicate key '" + key.scalar + "'");
        if (!convert(kv.second, value, depth + 1))
          return false;
        if (value.isNull() && value.line == 0) {
          value.line = key.line;
          value.col = key.col;
        }
        out.entries.emplace_back(std::move(key), std::move(value));
      }
      return true;
    }
    }
    return fail(out, "unsupported YAML node");
  }
};

std::string firstLine(const std::string &s) {
  auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}
} // namespace

bool parse(const std::string &text, Node &out, Error &err) {
  try {
    YAML::Node root = YAML::Load(text);
    Converter c{err};
    return c.convert(root, out, 0);
  } catch (const YAML::Exception &e) {
    err.line = e.mark.line >= 0 ? e.mark.line + 1 : 0;
    err.col = e.mark.column >= 0 ? e.mark.column + 1 : 0;
    err.message = "malformed YAML: " + firstLine(e.msg);
    return false;
  } catch (const std::exception &e) {
    err.message = std::string("malformed YAML: ") + e.what();
    return false;
  } catch (...) {
    err.message = "malformed YAML";
    return false;
  }
}

} // namespace tfc::yaml
