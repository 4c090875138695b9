// pt2rt/pt2rt.h — the whole public C++ API in one include (each header stays includable on
// its own; a TU that needs one concept compiles faster with just that one).
//
//   #include <pt2rt/pt2rt.h>
//   pt2rt::Model m = pt2rt::Model::load("model.pt2", torch::kCUDA);
//
// Model (load, forward, train/eval, save), its signature and the AOTAutograd-style queries,
// load options, errors, the decoded program, weights, gradient sketches, randomness, training
// state, node observers, and data-parallel training (pt2rt::distributed, which needs the
// pt2rt::distributed library).
#pragma once

#include "pt2rt/archive.h"
#include "pt2rt/archive_writer.h"
#include "pt2rt/constants.h"
#include "pt2rt/distributed.h"
#include "pt2rt/distributed_sampler.h"
#include "pt2rt/errors.h"
#include "pt2rt/grad_sketch.h"
#include "pt2rt/limits.h"
#include "pt2rt/load_options.h"
#include "pt2rt/mapped_file.h"
#include "pt2rt/mapped_weights.h"
#include "pt2rt/model.h"
#include "pt2rt/node_observer.h"
#include "pt2rt/program.h"
#include "pt2rt/queries.h"
#include "pt2rt/randomness.h"
#include "pt2rt/signature.h"
#include "pt2rt/text.h"
#include "pt2rt/training_state.h"
#include "pt2rt/weights.h"
