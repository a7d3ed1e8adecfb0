// The Python extension loom_torch._C: the backend class and the creator that
// torch.distributed calls for init_process_group("loom") and new_group
// (registered by loom_torch/__init__.py).
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "bindings/torch/backend_loom.h"
#include "bindings/torch/tensor_args.h"

namespace py = pybind11;

namespace {

// torch.distributed's creator signature for third-party backends.
c10::intrusive_ptr<c10d::Backend> createLoomBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout) {
  return c10::make_intrusive<loom_torch::LoomBackend>(store, rank, size, timeout);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Loom collectives as the torch.distributed backend \"loom\"";
  // c10d's classes must be registered with pybind11 before ours derives from them.
  py::module_::import("torch.distributed");

  py::class_<loom_torch::LoomBackend, c10d::Backend, c10::intrusive_ptr<loom_torch::LoomBackend>>(
      m, "LoomBackend",
      "A c10d Backend over one Loom communicator; create it through "
      "torch.distributed.init_process_group(\"loom\") or new_group(backend=\"loom\").");

  // Bootstrapping waits for every rank: let other Python threads run meanwhile.
  m.def("create_backend", &createLoomBackend, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>(),
        "Creates the backend of `rank` among `size` ranks; the Loom unique id travels through `store`, "
        "and `timeout` becomes the communicator's deadline.");

  m.def("version", [] {
    int v = 0;
    loomGetVersion(&v);
    return v;
  });
  m.def("cuda_built", &loom_torch::cudaBuilt, "True if this extension takes CUDA tensors.");
  m.def(
      "loom_cuda_usable",
      [] {
        // Loom returns no stream for the default CUDA stream when it has no
        // usable device (built without CUDA, no driver, no GPU).
        loomStream_t s = nullptr;
        return loomStreamFromCuda(nullptr, &s) == loomSuccess && s != nullptr;
      },
      "True if libloom can run collectives on CUDA memory here.");
}
