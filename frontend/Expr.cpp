//===- Expr.cpp - arithmetic over model parameters ------------------------===//
#include "frontend/Expr.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace tfc {
namespace {

class Parser {
public:
  Parser(const std::string &t, const NameResolver &r) : text(t), resolve(r) {}

  bool run(Number &out) {
    if (!expr(out))
      return false;
    skipSpace();
    if (pos != text.size())
      return fail("unexpected '" + std::string(1, text[pos]) + "' in expression");
    return true;
  }

  std::string error;
  size_t errorPos = 0;

private:
  const std::string &text;
  const NameResolver &resolve;
  size_t pos = 0;
  int depth = 0;

  bool fail(std::string msg) {
    if (error.empty()) {
      error = std::move(msg);
      errorPos = pos;
    }
    return false;
  }
  void skipSpace() {
    while (pos < text.size() && std::isspace((unsigned char)text[pos]))
      ++pos;
  }
  bool accept(const char *tok) {
    skipSpace();
    size_t n = std::char_traits<char>::length(tok);
    if (text.compare(pos, n, tok) == 0) {
      pos += n;
      return true;
    }
    return false;
  }

  bool expr(Number &out) {
    if (++depth > 129)
      return fail("expression is nested too deeply");
    if (!term(out))
      return false;
    for (;;) {
      Number rhs;
      if (accept("+")) {
        if (!term(rhs))
          return false;
        out = {out.value + rhs.value, out.isInt && rhs.isInt};
      } else if (accept("-")) {
        if (!term(rhs))
          return false;
        out = {out.value - rhs.value, out.isInt && rhs.isInt};
      } else {
        --depth;
        return true;
      }
    }
  }

  bool term(Number &out) {
    if (!unary(out))
      return false;
    for (;;) {
      Number rhs;
      if (accept("//")) {
        if (!unary(rhs))
          return false;
        if (rhs.value == 0)
          return fail("division by zero");
        out = {std::floor(out.value / rhs.value), out.isInt && rhs.isInt};
      } else if (accept("/")) {
        if (!unary(rhs))
          return false;
        if (rhs.value == 0)
          return fail("division by zero");
        double q = out.value / rhs.value;
        // Integer division that is exact stays an integer (d_model / heads).
        out = {q, out.isInt && rhs.isInt && std::fmod(out.value, rhs.value) == 0};
      } else if (accept("%")) {
        if (!unary(rhs))
          return false;
        if (rhs.value == 0)
          return fail("division by zero");
        // Python's modulo (sign of the divisor), consistent with floor division.
        double r = std::fmod(out.value, rhs.value);
        if (r != 0 && (r < 0) != (rhs.value < 0))
          r += rhs.value;
        out = {r, out.isInt && rhs.isInt};
      } else if (text.compare(pos, 2, "**") != 0 && accept("*")) {
        if (!unary(rhs))
          return false;
        out = {out.value * rhs.value, out.isInt && rhs.isInt};
      } else {
        return true;
      }
    }
  }

  bool unary(Number &out) {
    // Unary chains and ** recurse here, so they count toward the depth limit.
    if (++depth > 129)
      return fail("expression is nested too deeply");
    bool ok = unaryInner(out);
    --depth;
    return ok;
  }

  bool unaryInner(Number &out) {
    if (accept("-")) {
      if (!unary(out))
        return false;
      out.value = -out.value;
      if (!out.literal.empty())
        out.literal = out.literal[0] == '-' ? out.literal.substr(1) : "-" + out.literal;
      return true;
    }
    if (accept("+"))
      return unary(out);
    if (!primary(out))
      return false;
    if (accept("**")) {
      Number e;
      if (!unary(e))
        return false;
      out = {std::pow(out.value, e.value), out.isInt && e.isInt && e.value >= 0};
    }
    return true;
  }

  bool primary(Number &out) {
    skipSpace();
    if (pos >= text.size())
      return fail("expression ends unexpectedly");
    char c = text[pos];
    if (c == '(') {
      ++pos;
      if (!expr(out))
        return false;
      if (!accept(")"))
        return fail("expected ')'");
      return true;
    }
    if (std::isdigit((unsigned char)c) || c == '.') {
      const char *begin = text.c_str() + pos;
      char *end = nullptr;
      double v = std::strtod(begin, &end);
      if (end == begin)
        return fail("bad number");
      std::string lit(begin, end - begin);
      pos += end - begin;
      bool isInt = lit.find_first_of(".eE") == std::string::npos;
      out = {v, isInt, lit};
      return true;
    }
    if (std::isalpha((unsigned char)c) || c == '_') {
      size_t start = pos;
      while (pos < text.size() &&
             (std::isalnum((unsigned char)text[pos]) || text[pos] == '_'))
        ++pos;
      std::string name = text.substr(start, pos - start);
      if (accept("("))
        return call(name, start, out);
      if (name == "inf") {
        out = {std::numeric_limits<double>::infinity(), false};
        return true;
      }
      std::string err;
      if (!resolve(name, out, err)) {
        pos = start;
        return fail(err);
      }
      return true;
    }
    return fail("unexpected '" + std::string(1, c) + "' in expression");
  }

  bool call(const std::string &fn, size_t at, Number &out) {
    Number args[2];
    int n = 0;
    if (!accept(")")) {
      for (;;) {
        if (n == 2)
          return fail("too many arguments to " + fn);
        if (!expr(args[n++]))
          return false;
        if (accept(")"))
          break;
        if (!accept(","))
          return fail("expected ',' or ')'");
      }
    }
    auto want = [&](int k) {
      if (n != k) {
        pos = at;
        return fail(fn + "() takes " + std::to_string(k) + " argument" +
                    (k == 1 ? "" : "s"));
      }
      return true;
    };
    if (fn == "sqrt") {
      if (!want(1))
        return false;
      if (args[0].value < 0)
        return fail("sqrt of a negative number");
      out = {std::sqrt(args[0].value), false};
    } else if (fn == "exp") {
      if (!want(1))
        return false;
      out = {std::exp(args[0].value), false};
    } else if (fn == "log") {
      if (!want(1))
        return false;
      if (args[0].value <= 0)
        return fail("log of a non-positive number");
      out = {std::log(args[0].value), false};
    } else if (fn == "min" || fn == "max") {
      if (!want(2))
        return false;
      bool lt = args[0].value < args[1].value;
      out = (fn == "min") == lt ? args[0] : args[1];
    } else {
      pos = at;
      return fail("unknown function '" + fn + "'");
    }
    return true;
  }
};

} // namespace

bool isIdentifier(const std::string &t) {
  if (t.empty() || !(std::isalpha((unsigned char)t[0]) || t[0] == '_'))
    return false;
  for (char c : t)
    if (!(std::isalnum((unsigned char)c) || c == '_'))
      return false;
  return true;
}

bool evalExpr(const std::string &text, const NameResolver &resolve, Number &out,
              std::string &error, size_t &errorOffset) {
  Parser p(text, resolve);
  if (p.run(out))
    return true;
  error = p.error;
  errorOffset = p.errorPos;
  return false;
}

} // namespace tfc
