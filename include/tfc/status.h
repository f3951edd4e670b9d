//===- tfc/status.h - the one internal error type of libtfrun -------------===//
//
// Every fallible function in runtime/ and every kernel entry point in
// backends/ returns a Status: a named code and a one-line message. The codes
// are tfrun_code_t's, one for one (runtime/capi.cc static_asserts it), so the
// C API turns a Status into a tfrun_status_t without a table. Internal: not
// installed, and never thrown.
//
//   tfc::Status loadThing(...) {
//     if (bad)
//       return tfc::Status::invalidModel("thing " + name + " is truncated");
//     TFC_RETURN_IF_ERROR(other(...));
//     return tfc::Status::ok();
//   }
//
//===----------------------------------------------------------------------===//
#ifndef TFC_STATUS_H
#define TFC_STATUS_H

#include <string>
#include <utility>

namespace tfc {

/// The codes of tfrun_code_t (include/tfrun/tfrun.h), with the same values.
enum class Code : int {
  Ok = 0,
  InvalidArgument = 1, ///< bad input from the caller: names, shapes, ids, options
  InvalidModel = 2,    ///< model.bin is truncated, corrupt or inconsistent
  Unsupported = 3,     ///< a format version, kernel, device or CPU this build lacks
  IoError = 4,
  OutOfMemory = 5,
  Internal = 6, ///< a bug, or a device failure the caller did not cause
  NonFinite = 7, ///< the model computed NaN or +inf where a finite value is needed
  Cancelled = 8, ///< the request was cancelled (the generation engine)
  Busy = 9,      ///< the engine's queue is full: try again later
};

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  static Status invalidArgument(std::string m) { return {Code::InvalidArgument, std::move(m)}; }
  static Status invalidModel(std::string m) { return {Code::InvalidModel, std::move(m)}; }
  static Status unsupported(std::string m) { return {Code::Unsupported, std::move(m)}; }
  static Status ioError(std::string m) { return {Code::IoError, std::move(m)}; }
  static Status outOfMemory(std::string m) { return {Code::OutOfMemory, std::move(m)}; }
  static Status internal(std::string m) { return {Code::Internal, std::move(m)}; }
  static Status nonFinite(std::string m) { return {Code::NonFinite, std::move(m)}; }
  static Status cancelled(std::string m) { return {Code::Cancelled, std::move(m)}; }
  static Status busy(std::string m) { return {Code::Busy, std::move(m)}; }
  /// A backend's "" (success) or message, as |code|.
  static Status fromMessage(std::string m, Code code = Code::InvalidArgument) {
    return m.empty() ? Status() : Status(code, std::move(m));
  }

  bool isOk() const { return code_ == Code::Ok; }
  Code code() const { return code_; }
  const std::string &message() const { return message_; }

private:
  Code code_ = Code::Ok;
  std::string message_;
};

} // namespace tfc

/// Returns the Status of |expr| from the enclosing function when it failed.
#define TFC_RETURN_IF_ERROR(expr)                                                          \
  do {                                                                                     \
    ::tfc::Status tfc_status_ = (expr);                                                    \
    if (!tfc_status_.isOk())                                                               \
      return tfc_status_;                                                                  \
  } while (0)

#endif // TFC_STATUS_H
