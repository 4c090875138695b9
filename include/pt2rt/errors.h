// pt2rt/errors.h — the typed exceptions pt2rt throws.
//
// Every error pt2rt raises derives from pt2rt::Error (itself a std::runtime_error),
// and every message names what was wrong: the zip entry, graph node, op overload
// or input involved, with the numbers (sizes, offsets, versions) that disagree.
//
//   FormatError        the archive is not a valid pt2rt v1 archive (not a zip, wrong
//                      archive_format, future major version, Verifier failure, bad
//                      value id, weight entry of the wrong length, ...)
//   OpResolutionError  what the running LibTorch lacks for this archive — operators, overloads,
//                      arguments its schemas do not take — all listed at once, with the torch
//                      version that exported the archive and the one running
//   InputError         a user input (or CLI argument) of the wrong count, dtype, rank,
//                      size or device
//   ExecutionError     a kernel failed while running a graph; wraps the dispatcher's
//                      c10::Error with each argument's dtype, shape and device and the
//                      Python stack trace recorded at export
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace pt2rt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what), message_(what) {}
  /// The message without the "pt2rt::FormatError: " style prefix of what(), for callers
  /// that rethrow with more context.
  const std::string& message() const noexcept { return message_; }

 protected:
  Error(const char* prefix, const std::string& message)
      : std::runtime_error(prefix + message), message_(message) {}

 private:
  std::string message_;
};

class FormatError : public Error {
 public:
  explicit FormatError(const std::string& what) : Error("pt2rt::FormatError: ", what) {}
};

class OpResolutionError : public Error {
 public:
  /// @param missing  one entry per thing the running LibTorch lacks, as listed in the message:
  ///   "aten::name.overload" for an operator or overload, "aten::name.overload(argument)" for
  ///   an argument, "aten::name.overload(->)" for a node whose outputs differ from the returns.
  explicit OpResolutionError(const std::string& what, std::vector<std::string> missing = {})
      : Error("pt2rt::OpResolutionError: ", what), missing_(std::move(missing)) {}
  /// What the message lists (see the constructor), in the message's order.
  const std::vector<std::string>& missing() const noexcept { return missing_; }

 private:
  std::vector<std::string> missing_;
};

class InputError : public Error {
 public:
  explicit InputError(const std::string& what) : Error("pt2rt::InputError: ", what) {}
};

class ExecutionError : public Error {
 public:
  explicit ExecutionError(const std::string& what) : Error("pt2rt::ExecutionError: ", what) {}
};

}  // namespace pt2rt
