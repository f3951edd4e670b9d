//===- executor.h - runs one function of a plan on a session's device -----===//
//
// Internal to libtfrun. One loop for every device: bind the symbolic dims from
// the inputs, give every value its shape and address (inputs, weights, arena
// slots, session state, views), then hand each instruction to the device.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_RUNTIME_EXECUTOR_H
#define TFC_RUNTIME_EXECUTOR_H

#include "runtime/session.h"

#include <vector>

namespace tfrun::rt {

/// An input of one function run: host memory the caller keeps alive for the run.
struct BoundInput {
  const void *data = nullptr;
  uint32_t dtype = TFC_DTYPE_I64;
  std::vector<int64_t> shape;
};

/// Function |fn|'s first-run setup on the session's device: each value's
/// dtype there, its weights and its arena. Runs once; later calls return ok.
Status prepareFunction(Session &s, size_t fn);

/// Runs function |fn| on |ins| (one per function input, in order). On success
/// s.lastRun is |fn| and its outputs are readable through s.hostOutput().
Status runFunction(Session &s, size_t fn, const std::vector<BoundInput> &ins);

} // namespace tfrun::rt

#endif // TFC_RUNTIME_EXECUTOR_H
