// runtime/model/model_impl.h — Model's private state, and entry points shared by the
// runtime's own files and tests.
#pragma once

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "exec/model_state.h"
#include "pt2rt/archive_writer.h"
#include "pt2rt/model.h"

namespace pt2rt {

struct Model::Impl {
  std::shared_ptr<ModelState> state;
  bool training = false;
  /// A mapped load's weight CRC check (LoadOptions::check_mapped_weights), running on its own
  /// thread: "" when every entry matched, else the FormatError message. Invalid when none.
  std::shared_future<std::string> weight_check;
  /// Waits for weight_check; throws its FormatError (every call) when an entry differed.
  void require_checked_weights() const;
};

/// Model::save with writer options (tests use WriteOptions::fail_after_bytes to simulate a
/// write failing halfway). @throws Error as Model::save.
/// `extra` entries are written after the weights and program (training_state_io.cpp: the
/// training state); any optimizer/* entry of the source is dropped.
void save_model(const ModelState& state, const std::string& path, const WriteOptions& options,
                const std::vector<NewEntry>& extra = {});

/// The state behind a Model (for tests and benchmarks in this repository).
const ModelState& model_state(const Model& model);

}  // namespace pt2rt
