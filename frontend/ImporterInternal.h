//===- ImporterInternal.h - the importer's shared state (private) ---------===//
//
// Private to frontend/. The importer is one class whose members are defined by
// concern in separate files:
//
//   Importer.cpp            the driver: inputs, stacks, output, module attributes
//   ImporterSchema.cpp      locations, errors and the schema checks (keys, kinds,
//                           choices, did-you-mean), and the document's top level
//   ImporterParams.cpp      `params:`, --set, and expressions over parameters
//   ImporterComponents.cpp  linear specs, norms, attention, feed_forward
//   ImporterStacks.cpp      embeddings, blocks, layer stacks, the output head
//   ImporterOps.cpp         the `ops:` table and the interpreter of `ops:` blocks
//
// Everything here is public so those files share one state without accessors;
// nothing outside frontend/ includes this header (the API is Importer.h).
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_FRONTEND_IMPORTERINTERNAL_H
#define TFC_FRONTEND_IMPORTERINTERNAL_H

#include "frontend/Expr.h"
#include "frontend/Importer.h"
#include "frontend/YamlDoc.h"
#include "ir/TfcDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tfc::detail {

using ::tfc::yaml::Node;
using ::mlir::FailureOr;
using ::mlir::Location;
using ::mlir::LogicalResult;
using ::mlir::Value;
using ::llvm::StringRef;
using ::llvm::Twine;

constexpr int64_t kDyn = mlir::ShapedType::kDynamic;
/// Largest size, count or id a description may use: 2^40 keeps every product of
/// two sizes (a weight's element count) far from int64 overflow.
constexpr double kMaxInt = 1099511627776.0;

/// "; did you mean 'x'?" when a candidate is close enough to |word|, else "".
std::string didYouMean(StringRef word, llvm::ArrayRef<std::string> candidates);
/// "a map", "a list", ... for "must be X, got Y" messages.
const char *kindName(const Node &n);
/// |t| as MLIR prints it.
std::string typeStr(mlir::Type t);

/// The stream a stack of layers works on, and what its attention masks refer to.
struct StackEnv {
  std::string name;    // "encoder" / "decoder"
  Value tokens;        // token ids [B, S] of this stack
  Value memory;        // encoder output, for cross-attention (decoder only)
  Value memoryTokens;  // encoder token ids, for the cross-attention padding mask
  Value mask;          // the stack's attention_mask input [B, S] (0 = padding), if any
  Value memoryMask;    // the encoder's attention_mask, for cross-attention, if any
  Value posBias;       // the stack's relative position bias [1, H, S, S] (T5), if any
  Value rotaryFreq;    // the stack's rotary inverse frequencies [R / 2] f32 (RoPE), if any
  bool rotaryInterleaved = false;
  double rotaryAttention = 1; // LongRoPE's attention_factor: cos and sin times it
};

class Importer {
public:
  Importer(mlir::MLIRContext &ctx, const ImportOptions &opts, const Node &root,
           WeightStore &ws)
      : ctx(ctx), b(&ctx), opts(opts), root(root), ws(ws), file(opts.yamlPath) {}

  /// Imports the whole document (Importer.cpp).
  FailureOr<mlir::OwningOpRef<mlir::ModuleOp>> run();
  /// The parameters' values after --set (valid once run() got past `params:`).
  std::map<std::string, double> evaluatedParams() const;

  //===--------------------------------------------------------------------===//
  // Locations and errors (ImporterSchema.cpp)
  //===--------------------------------------------------------------------===//

  /// The YAML position of |n|, |colOffset| columns to the right.
  Location fileLoc(const Node &n, int colOffset = 0);
  /// The location of ops made for |n|: the YAML position, named by the module
  /// path |name| (default: the current layer).
  Location loc(const Node &n, StringRef name = "");
  std::string scopeName() const;
  /// Emits the import's one error at |n|. The import stops at the first error,
  /// but some checks run side by side (both weights of a norm); only the first is
  /// reported so the user sees exactly one error line.
  LogicalResult error(const Node &n, const Twine &msg, int colOffset = 0);

  //===--------------------------------------------------------------------===//
  // Schema checks (ImporterSchema.cpp)
  //===--------------------------------------------------------------------===//

  LogicalResult expectMap(const Node &n, StringRef what);
  /// Every key of map |n| is in |allowed|; else "unknown key 'k' in <what>" at
  /// the key, with a did-you-mean. With |listAllowed| the error also lists
  /// |allowed| (for `ops:` entries, whose keys differ from op kind to op kind).
  LogicalResult checkKeys(const Node &n, StringRef what,
                          const std::vector<std::string> &allowed,
                          bool listAllowed = false);
  /// The value of |key| in |map|, or "<what> needs '<key>'" at the map.
  FailureOr<const Node *> require(const Node &map, StringRef key, StringRef what);
  FailureOr<std::string> getString(const Node &n, StringRef what);
  FailureOr<bool> getBool(const Node &n, StringRef what);
  /// true / false, or an integer expression that is 1 or 0 (per layer, with i).
  FailureOr<bool> getFlag(const Node &n, StringRef what);
  /// A string that must be one of |choices| ("unknown <what> 'v' (expected one
  /// of: ...)").
  FailureOr<std::string> getChoice(const Node &n, StringRef what,
                                   const std::vector<std::string> &choices);
  /// The document's top level: a map of known keys, of a supported version.
  LogicalResult checkDocument();

  //===--------------------------------------------------------------------===//
  // Parameters and expressions (ImporterParams.cpp)
  //===--------------------------------------------------------------------===//

  /// Reads `params:` and the --set overrides and evaluates every parameter.
  LogicalResult loadParams();
  /// Evaluates parameter |name| (memoized; finds cycles). Errors inside the
  /// parameter's own text are reported at its line and leave |err| empty.
  bool resolveParam(const std::string &name, Number &out, std::string &err);
  /// |n| as a number or an expression over the parameters.
  FailureOr<Number> evalNum(const Node &n, StringRef what);
  /// |n| as an integer in [min, kMaxInt].
  FailureOr<int64_t> evalInt(const Node &n, StringRef what, int64_t min = 1);
  /// A `softcap:` key of |n| (Gemma 2's tanh soft-capping, c * tanh(x / c)):
  /// a finite number >= 0, 0 (none) without the key.
  FailureOr<double> evalSoftcap(const Node &n);
  /// Parameter |name| as an integer in [min, kMaxInt]; errors at |at|.
  FailureOr<int64_t> paramInt(StringRef name, const Node &at, int64_t min = 1);

  //===--------------------------------------------------------------------===//
  // Op construction. Result types are inferred before the op is built, so a
  // shape error becomes a located diagnostic instead of a builder assertion.
  //===--------------------------------------------------------------------===//

  template <typename OpT>
  FailureOr<Value> make(Location l, mlir::ValueRange operands,
                        llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    llvm::SmallVector<mlir::Type> types;
    if (errored)
      return mlir::failure();
    mlir::DictionaryAttr dict = mlir::DictionaryAttr::get(&ctx, attrs);
    if (mlir::failed(OpT::inferReturnTypes(&ctx, l, operands, dict, {}, types))) {
      errored = true;
      return mlir::failure();
    }
    mlir::OperationState st(l, OpT::getOperationName());
    st.addOperands(operands);
    st.addAttributes(attrs);
    st.addTypes(types);
    return b.create(st)->getResult(0);
  }

  mlir::NamedAttribute attr(StringRef name, mlir::Attribute a) {
    return b.getNamedAttr(name, a);
  }
  mlir::NamedAttribute i64(StringRef name, int64_t v) {
    return attr(name, b.getI64IntegerAttr(v));
  }
  mlir::NamedAttribute f64(StringRef name, double v) {
    return attr(name, b.getF64FloatAttr(v));
  }
  mlir::NamedAttribute arr(StringRef name, llvm::ArrayRef<int64_t> v) {
    return attr(name, b.getDenseI64ArrayAttr(v));
  }

  /// Scalar constants (Importer.cpp).
  Value constF(Location l, double v);
  Value constI(Location l, int64_t v);
  /// tfc.gelu with the given approximation (Importer.cpp).
  FailureOr<Value> gelu(Location l, Value x, mlir::tfc::GeluApprox approx);
  /// Declares weight |name| of |shape| and returns its tfc.weight (Importer.cpp).
  FailureOr<Value> weight(const Node &at, const std::string &name,
                          std::vector<int64_t> shape, WeightRole role);
  /// |name| with the current layer's prefix.
  std::string qualify(const std::string &name) const { return scope + name; }

  //===--------------------------------------------------------------------===//
  // Components (ImporterComponents.cpp)
  //===--------------------------------------------------------------------===//

  struct LinearSpec {
    std::string weight, bias; // full names; bias empty if none
    bool inOut = false;       // Conv1D layout [in, out]
    const Node *node = nullptr;
  };
  FailureOr<LinearSpec> parseLinear(const Node &n, StringRef what);
  /// Applies a linear layer. For a packed weight (QKV in one tensor),
  /// |rowOffset| and |rowsTotal| select the output features
  /// [rowOffset, rowOffset + out) of a weight that has |rowsTotal| outputs in all;
  /// with |count| > 1, |count| blocks of out / count features, block j at
  /// rowOffset + j * stride (GPT-NeoX's query_key_value, whose rows go head by
  /// head, each head's q, k and v side by side).
  FailureOr<Value> applyLinear(const LinearSpec &s, Value x, int64_t in,
                               int64_t out, int64_t rowOffset = 0,
                               int64_t rowsTotal = -1, int64_t count = 1,
                               int64_t stride = 0);
  /// A norm over the last |width| features (0: d_model).
  FailureOr<Value> emitNorm(const Node &n, Value x, StringRef what, int64_t width = 0);
  /// The index of the layer whose blocks are being emitted (-1 outside a
  /// stack's layers): `i` in their expressions.
  int64_t layerIndex = -1;
  FailureOr<Value> emitAttention(const Node &n, Value x, const StackEnv &env);
  FailureOr<Value> emitFeedForward(const Node &n, Value x);
  /// feed_forward's activations (ImporterOps.cpp, beside the ops: table), the
  /// default first; and one of them applied to |h|.
  static std::vector<std::string> activationNames();
  FailureOr<Value> buildActivation(llvm::StringRef name, Location l, Value h);

  //===--------------------------------------------------------------------===//
  // Stacks (ImporterStacks.cpp) and `ops:` blocks (ImporterOps.cpp)
  //===--------------------------------------------------------------------===//

  FailureOr<Value> emitBlock(const Node &n, Value x, const StackEnv &env);
  FailureOr<Value> emitParallelBlock(const Node &n, Value x, const StackEnv &env);
  LogicalResult emitRotaryFrequencies(const Node &n, StackEnv &env);
  LogicalResult emitYarn(const Node &scaling, double factor, int64_t dim, double theta,
                         std::vector<double> &inv, StackEnv &env);
  FailureOr<Value> emitFusedAttention(const Node &n, Location l, Value q, Value k, Value v,
                                      int64_t heads, int64_t kvHeads, int64_t dk, bool rotary,
                                      const std::string &maskKind, double maskValue,
                                      bool posBias, const StackEnv &env);
  FailureOr<Value> emitStack(const Node &n, StringRef which, StackEnv &env);
  FailureOr<Value> emitEmbedding(const Node &stack, Value tokens);
  FailureOr<Value> emitOutput(const Node &n, Value x, int64_t vocabHint,
                              std::string &outName);
  /// The `ops:` list of |block| applied to |x|.
  FailureOr<Value> emitOps(const Node &block, Value x, const StackEnv &env);

  //===--------------------------------------------------------------------===//
  // State
  //===--------------------------------------------------------------------===//

  mlir::MLIRContext &ctx;
  mlir::OpBuilder b;
  const ImportOptions &opts;
  const Node &root;
  WeightStore &ws;
  std::string file;
  bool errored = false;

  // Parameters: their nodes, evaluated values, and the evaluation stack (cycles).
  const Node *paramsNode = nullptr;
  std::map<std::string, const Node *> paramNodes;
  std::vector<std::string> paramOrder;
  std::map<std::string, std::string> overrideText;
  std::map<std::string, Number> paramValues;
  std::vector<std::string> evaluating;
  bool reportedInner = false;
  /// Weights already scanned for NaN or infinite values (one warning each).
  std::set<std::string> nonFiniteChecked;

  int64_t dModel = 0, maxLen = 0, maxBatch = 0;
  std::string scope; // weight-name prefix inside a layer, e.g. "encoder.layers.0."

  // Function inputs by name, for stacks and `ops:` blocks.
  std::map<std::string, Value> inputs;
};

} // namespace tfc::detail

#endif // TFC_FRONTEND_IMPORTERINTERNAL_H
