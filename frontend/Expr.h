//===- Expr.h - arithmetic over model parameters --------------------------===//
//
// Values in a model description may be expressions over the named parameters:
// `d_model / heads`, `sqrt(d_model)`, `4 * d_model`. This is a small
// recursive-descent evaluator; names are resolved through a callback so the caller
// can evaluate parameters lazily and detect reference cycles.
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_FRONTEND_EXPR_H
#define TFC_FRONTEND_EXPR_H

#include <functional>
#include <string>

namespace tfc {

/// A number that remembers whether it is an integer (so `d_model / heads` can be
/// checked for exact division where an integer is required).
struct Number {
  double value = 0;
  bool isInt = false;
  /// The digits as written, when the value is one literal (parentheses
  /// allowed): what an error quotes, since a double rounds integers past 2^53.
  std::string literal;
};

/// Resolves an identifier. Returns false and sets |error| if it cannot.
using NameResolver =
    std::function<bool(const std::string &name, Number &out, std::string &error)>;

/// Evaluates |text|. Grammar: + - * / // % **, unary minus, parentheses, numbers
/// (including 1e-6, inf), identifiers, and the functions sqrt, exp, log, min, max.
/// On failure returns false with |error| set and |errorOffset| the byte offset in
/// |text| where the problem is.
bool evalExpr(const std::string &text, const NameResolver &resolve, Number &out,
              std::string &error, size_t &errorOffset);

/// True if |text| is a plain identifier ([A-Za-z_][A-Za-z0-9_]*).
bool isIdentifier(const std::string &text);

} // namespace tfc

#endif // TFC_FRONTEND_EXPR_H
