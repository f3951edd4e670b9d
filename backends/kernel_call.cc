//===- kernel_call.cc - bindCall for every row of kernels.def -------------===//
#include "backends/kernel_call.h"

namespace tfc {

#define TFC_ARG(n, present, cpu, cuda, flags) c.n = s.n >= 0 ? r.in[s.n] : nullptr;
#define TFC_KERNEL(ENUM, name, Camel, id, flags, oc, ocu, of, A_, O_)           \
  Status bindCall(schema::Backend backend, const RawCall &r, Camel##Call &c) {            \
    std::vector<uint32_t> dtypes(r.in.size());                                           \
    for (size_t i = 0; i < r.in.size(); ++i) {                                           \
      if (!r.in[i])                                                                      \
        return Status::invalidModel(std::string(#name) + ": input " + std::to_string(i) + \
                                    " is missing");                                      \
      dtypes[i] = r.in[i]->dtype;                                                        \
    }                                                                                    \
    std::string err = schema::checkOperands(                                             \
        backend, id, r.ints, r.floats, {dtypes.data(), dtypes.size(), r.out.dtype});     \
    if (!err.empty())                                                                    \
      return Status::invalidModel(std::move(err));                                       \
    err = schema::Camel##Attrs::decode(r.ints, r.floats, c.attrs);                       \
    if (!err.empty())                                                                    \
      return Status::invalidModel(std::string(#name) + ": " + err);                      \
    schema::Camel##Slots s;                                                              \
    schema::Camel##Slots::locate(c.attrs, {dtypes.data(), dtypes.size()}, s);            \
    TFC_SCHEMA_UNPAREN O_                                                          \
    c.out = &r.out;                                                                      \
    return Status();                                                                     \
  }
#include "tfc/kernels.def"
#undef TFC_KERNEL
#undef TFC_ARG

} // namespace tfc
