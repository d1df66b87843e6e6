//===- RuntimeModule.cpp - the _liger_runtime Python extension ------------===//
//
// pybind11 bindings of the liger runtime (no MLIR, no LibTorch): open a
// bundle, describe its kernels and loss plans as the kernel ABI has them,
// compare it with a device, give the shapes of a kernel's outputs and
// workspaces for given inputs (the runtime's rules: python/liger/runtime.py
// does not re-derive them), and launch on raw device pointers and a stream.
// A failed runtime Status becomes an exception carrying its message:
// InvalidArgument (a ValueError and a RuntimeError) for bad arguments,
// KeyError for an unknown kernel, RuntimeError otherwise.
//
//===----------------------------------------------------------------------===//

#include "liger/Runtime/Bundle.h"
#include "liger/Runtime/CudaDriver.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;
using namespace liger::runtime;

namespace {
/// _liger_runtime.InvalidArgument, set at import.
PyObject *invalidArgument = nullptr;

void check(const Status &status) {
  if (status.isOk())
    return;
  if (status.code() == StatusCode::kInvalidArgument) {
    PyErr_SetString(invalidArgument, status.message().c_str());
    throw py::error_already_set();
  }
  throw std::runtime_error(status.message());
}

/// A kernel handle from an index or a name.
size_t kernelOf(const Bundle &bundle, const py::object &kernel) {
  if (py::isinstance<py::int_>(kernel)) {
    auto index = kernel.cast<int64_t>();
    if (index < 0 || static_cast<size_t>(index) >= bundle.kernelCount())
      throw py::key_error("no kernel #" + std::to_string(index));
    return static_cast<size_t>(index);
  }
  auto name = kernel.cast<std::string>();
  int index = bundle.kernelIndex(name);
  if (index < 0)
    throw py::key_error("no kernel '" + name + "'");
  return static_cast<size_t>(index);
}

/// Shapes from Python sequences of ints, checked as launch arguments are.
std::vector<Shape> shapesOf(const std::vector<std::vector<int64_t>> &list) {
  std::vector<Shape> shapes(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    TensorArg arg;
    check(makeTensorArg(nullptr, DType::f32, list[i].data(),
                        static_cast<int64_t>(list[i].size()), "input", i,
                        &arg));
    shapes[i] = arg.shape;
  }
  return shapes;
}

py::list shapeList(const std::vector<Shape> &shapes) {
  py::list list;
  for (const Shape &s : shapes) {
    py::tuple t(s.size());
    for (size_t d = 0; d < s.size(); ++d)
      t[d] = s[d];
    list.append(t);
  }
  return list;
}

py::dict paramDict(const KernelParam &p) {
  py::list shape;
  for (const ShapeEntry &e : manifestShape(p)) {
    if (e.symbol)
      shape.append(e.symbol);
    else
      shape.append(e.size);
  }
  py::dict d;
  d["name"] = p.name;
  d["role"] = roleName(p.role);
  d["kind"] = kindName(p.kind);
  d["dtype"] = dtypeName(p.dtype);
  d["length"] = p.length;
  d["outer"] = p.outer;
  d["shape"] = shape;
  return d;
}
} // namespace

PYBIND11_MODULE(_liger_runtime, m) {
  m.doc() = "liger runtime: load kernel bundles and launch their kernels";
  invalidArgument = PyErr_NewExceptionWithDoc(
      "_liger_runtime.InvalidArgument",
      "A kernel's arguments or a bundle break the kernel ABI",
      py::make_tuple(py::handle(PyExc_ValueError),
                     py::handle(PyExc_RuntimeError))
          .ptr(),
      nullptr);
  m.attr("InvalidArgument") = py::handle(invalidArgument);
  m.attr("MANIFEST_VERSION") = kManifestVersion;

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
      .def_property_readonly("path", &Bundle::dir)
      .def(
          "kernels",
          [](const Bundle &bundle) {
            py::list kernels;
            for (size_t i = 0; i < bundle.kernelCount(); ++i) {
              const KernelSpec &kernel = bundle.kernel(i);
              py::list params;
              for (const KernelParam &p : kernel.params)
                params.append(paramDict(p));
              py::dict k;
              k["index"] = i;
              k["name"] = kernel.name;
              k["function"] = kernel.function;
              k["template"] = templateName(kernel.kernelTemplate);
              k["ops"] = kernel.ops;
              k["arch"] = bundle.moduleOf(i).arch;
              k["params"] = params;
              k["ctas_per_sm"] = kernel.ctasPerSm;
              k["prepare"] = kernel.prepare.name;
              k["finish"] = kernel.finish.name;
              k["narrow"] = kernel.narrow.name;
              kernels.append(k);
            }
            return kernels;
          },
          "The kernels, each a dict with its handle ('index'), as the "
          "manifest has them")
      .def(
          "kernel_index",
          [](const Bundle &bundle, const std::string &name) {
            return bundle.kernelIndex(name);
          },
          py::arg("name"), "The handle of kernel `name`, or -1")
      .def(
          "plans",
          [](const Bundle &bundle) {
            py::list plans;
            for (const LossPlan &p : bundle.manifest().plans) {
              py::dict kernels;
              for (int s = 0; s < kNumLossStages; ++s)
                if (!p.kernels[s].empty())
                  kernels[lossStageName(static_cast<LossStage>(s))] =
                      p.kernels[s];
              py::dict d;
              d["function"] = p.function;
              d["kind"] = lossPlanKindName(p.kind);
              d["chunk_tokens"] = p.chunkTokens;
              d["memory_budget"] = p.memoryBudget;
              d["mean"] = p.mean;
              d["ignore_index"] = p.ignoreIndex;
              d["class_weight"] = p.classWeight;
              d["dw_f32"] = p.dwF32;
              d["kernels"] = kernels;
              plans.append(d);
            }
            return plans;
          },
          "The planned loss groups (docs/Design/Bundle.md, 'Plans')")
      .def(
          "check_device",
          [](Bundle &bundle, int device) { check(bundle.checkDevice(device)); },
          py::arg("device"),
          "Raises naming the first kernel `device` cannot run, and why")
      .def(
          "output_shapes",
          [](const Bundle &bundle, const py::object &kernel,
             const std::vector<std::vector<int64_t>> &inputs) {
            std::vector<Shape> in = shapesOf(inputs), out;
            check(inferOutputShapes(bundle.kernel(kernelOf(bundle, kernel)),
                                    in.data(), in.size(), &out));
            return shapeList(out);
          },
          py::arg("kernel"), py::arg("inputs"),
          "The shapes of the outputs of `kernel` (a handle or a name) for "
          "inputs of shapes `inputs`, checked as a launch checks them")
      .def(
          "output_shape_rules",
          [](const Bundle &bundle, const py::object &kernel,
             const std::vector<size_t> &ranks) {
            std::vector<std::vector<DimSource>> rules;
            check(outputShapeRules(bundle.kernel(kernelOf(bundle, kernel)),
                                   ranks.data(), ranks.size(), &rules));
            py::list list;
            for (const std::vector<DimSource> &rule : rules) {
              py::list sizes;
              for (const DimSource &d : rule) {
                if (d.input < 0)
                  sizes.append(d.size);
                else
                  sizes.append(py::make_tuple(d.input, d.dim));
              }
              list.append(sizes);
            }
            return list;
          },
          py::arg("kernel"), py::arg("ranks"),
          "output_shapes over the inputs' ranks alone: each output size is "
          "an int, or (input, dim) for that size of that input")
      .def(
          "workspace_shapes",
          [](const Bundle &bundle, const py::object &kernel,
             const std::vector<std::vector<int64_t>> &inputs, int smCount) {
            std::vector<Shape> in = shapesOf(inputs), out;
            check(inferWorkspaceShapes(bundle.kernel(kernelOf(bundle, kernel)),
                                       in.data(), in.size(), smCount, &out));
            return shapeList(out);
          },
          py::arg("kernel"), py::arg("inputs"), py::arg("sm_count"),
          "The shapes of the f32 workspaces of `kernel` for inputs of shapes "
          "`inputs` on a device with `sm_count` SMs (none for most kernels)")
      .def(
          "workspace_ctas",
          [](const Bundle &bundle, const py::object &kernel, int64_t rows,
             int smCount) {
            return workspaceCtas(bundle.kernel(kernelOf(bundle, kernel)), rows,
                                 smCount);
          },
          py::arg("kernel"), py::arg("rows"), py::arg("sm_count"),
          "The leading size of the partials workspaces of `kernel` for "
          "`rows` rows on a device with `sm_count` SMs")
      .def(
          "launch",
          [](Bundle &bundle, const py::object &kernel, const py::list &args,
             uintptr_t stream, int device) {
            size_t index = kernelOf(bundle, kernel);
            std::vector<TensorArg> tensors(args.size());
            for (size_t i = 0; i < tensors.size(); ++i) {
              auto tuple = args[i].cast<py::tuple>();
              auto dtype = tuple[1].cast<std::string>();
              auto shape = tuple[2].cast<std::vector<int64_t>>();
              DType parsed;
              if (!parseDType(dtype, &parsed))
                check(Status(StatusCode::kInvalidArgument,
                             "argument #" + std::to_string(i) +
                                 " has an unknown dtype '" + dtype + "'"));
              check(makeTensorArg(
                  reinterpret_cast<void *>(tuple[0].cast<uintptr_t>()), parsed,
                  shape.data(), static_cast<int64_t>(shape.size()), "argument",
                  i, &tensors[i]));
            }
            check(bundle.launch(index, tensors.data(), tensors.size(),
                                reinterpret_cast<CUstream>(stream), device));
          },
          py::arg("kernel"), py::arg("args"), py::arg("stream") = 0,
          py::arg("device") = 0,
          "Launches `kernel` (a handle or a name) on [(pointer, dtype, "
          "shape), ...] (inputs, outputs, then workspaces) on `stream`");
}
