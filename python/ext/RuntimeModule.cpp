//===- RuntimeModule.cpp - the _liger_runtime Python extension ------------===//
//
// pybind11 bindings of the liger runtime (no MLIR, no LibTorch): open a
// bundle, list its kernels, launch one on raw device pointers and a stream.
// python/liger/runtime.py wraps it for torch tensors. A failed runtime
// Status becomes a RuntimeError carrying its message.
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/Bundle.h"
#include "liger/Runtime/CudaDriver.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;
using namespace liger::runtime;

namespace {
void check(const Status &status) {
  if (!status.isOk())
    throw std::runtime_error(status.message());
}

const char *kindName(ParamKind kind) {
  switch (kind) {
  case ParamKind::Rows:
    return "rows";
  case ParamKind::RowScalars:
    return "row_scalars";
  case ParamKind::Feature:
    return "feature";
  case ParamKind::Scalar:
    return "scalar";
  case ParamKind::Heads:
    return "heads";
  case ParamKind::Partials:
    return "partials";
  case ParamKind::Matrix:
    return "matrix";
  case ParamKind::Tables:
    return "tables";
  }
  return "?";
}
} // namespace

PYBIND11_MODULE(_liger_runtime, m) {
  m.doc() = "liger runtime: load kernel bundles and launch their kernels";

  m.def(
      "driver_status",
      [] {
        const CudaDriver *driver = nullptr;
        Status s = CudaDriver::get(&driver);
        return s.isOk() ? std::string("OK") : s.message();
      },
      "'OK', or why the CUDA driver cannot be used");

  py::class_<Bundle>(m, "Bundle")
      .def_static(
          "open",
          [](const std::string &dir) {
            std::unique_ptr<Bundle> bundle;
            check(Bundle::open(dir, &bundle));
            return bundle;
          },
          py::arg("dir"), "Reads a bundle directory written by liger-compile")
      .def("kernels",
           [](const Bundle &bundle) {
             py::list kernels;
             for (const ModuleSpec &module : bundle.manifest().modules)
               for (const KernelSpec &kernel : module.kernels) {
                 py::list params;
                 for (const KernelParam &p : kernel.params) {
                   py::dict d;
                   d["name"] = p.name;
                   d["role"] = p.isWorkspace ? "workspace"
                               : p.isOutput  ? "output"
                                             : "input";
                   d["kind"] = kindName(p.kind);
                   d["dtype"] = dtypeName(p.dtype);
                   d["length"] = p.length;
                   d["heads"] = p.heads;
                   params.append(d);
                 }
                 py::dict k;
                 k["name"] = kernel.name;
                 k["ops"] = kernel.ops;
                 k["arch"] = module.arch;
                 k["params"] = params;
                 k["ctas_per_sm"] = kernel.ctasPerSm;
                 k["finish"] = kernel.finish.name;
                 kernels.append(k);
               }
             return kernels;
           })
      .def(
          "workspace_ctas",
          [](const Bundle &bundle, const std::string &name, int64_t rows,
             int smCount) {
            const KernelSpec *kernel = bundle.findKernel(name);
            if (!kernel)
              throw py::key_error("no kernel '" + name + "'");
            return workspaceCtas(*kernel, rows, smCount);
          },
          py::arg("name"), py::arg("rows"), py::arg("sm_count"),
          "The leading size of the workspaces of `name` for `rows` rows on a "
          "device with `sm_count` SMs")
      .def(
          "launch",
          [](Bundle &bundle, const std::string &name, const py::list &args,
             uintptr_t stream, int device) {
            std::vector<TensorArg> tensors;
            for (py::handle item : args) {
              auto tuple = item.cast<py::tuple>();
              TensorArg a;
              a.data = reinterpret_cast<void *>(tuple[0].cast<uintptr_t>());
              if (!parseDType(tuple[1].cast<std::string>(), &a.dtype))
                throw std::runtime_error("unknown dtype '" +
                                         tuple[1].cast<std::string>() + "'");
              a.shape = tuple[2].cast<std::vector<int64_t>>();
              tensors.push_back(std::move(a));
            }
            check(bundle.launch(name, tensors,
                                reinterpret_cast<CUstream>(stream), device));
          },
          py::arg("name"), py::arg("args"), py::arg("stream") = 0,
          py::arg("device") = 0,
          "Launches `name` on [(pointer, dtype, shape), ...] (inputs, "
          "outputs, then workspaces) on `stream`");
}
