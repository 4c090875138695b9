// runtime/model_impl.h — Model's private state, and entry points shared by the runtime's
// own files and tests.
#pragma once

#include <memory>
#include <string>

#include "model_state.h"
#include "pt2rt/archive_writer.h"
#include "pt2rt/model.h"

namespace pt2rt {

struct Model::Impl {
  std::shared_ptr<ModelState> state;
  bool training = false;
};

/// Model::save with writer options (tests use WriteOptions::fail_after_bytes to simulate a
/// write failing halfway). @throws Error as Model::save.
void save_model(const ModelState& state, const std::string& path, const WriteOptions& options);

/// The state behind a Model (for tests and benchmarks in this repository).
const ModelState& model_state(const Model& model);

}  // namespace pt2rt
