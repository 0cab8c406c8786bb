// The pieces of the `gt._C` extension module, one per concept. Each Bind*
// adds its classes and functions to the module; module.cc calls them in
// order (tensor first: the others take and return gt::Tensor).
//
// The extension is a thin, typed layer over the C++ client: argument
// parsing that is Python idiom (varargs shapes, indexing, dtype inference
// from lists) lives in python/gt/, not here.
#pragma once

#include <pybind11/pybind11.h>

namespace gt::python {

// gt::Tensor as `_C.Tensor`, `_C.DType`, creation functions, grad mode,
// signal scopes, the tape, session control, and the `_C.Error` exception
// that every gt::Error becomes.
void BindTensor(pybind11::module_& m);
// gt::nn: Linear, the losses, and the optimizers' update steps.
void BindNN(pybind11::module_& m);
// Signal configs: the C++ client's YAML reader, register_config, clear_configs.
void BindConfig(pybind11::module_& m);
// gt::worker_stats() as plain dicts.
void BindStats(pybind11::module_& m);
// gt::distributed (meshes, placements, layouts, recording) over plain values.
void BindDistributed(pybind11::module_& m);
// gt::checkpoint: the distributed checkpoint's plans queued (gt.distributed.checkpoint).
void BindCheckpoint(pybind11::module_& m);

}  // namespace gt::python
