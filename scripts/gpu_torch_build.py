"""Builds loom_torch for the Python and PyTorch that run this script, against
a Loom library built elsewhere (the GPU check's packed .gpu/lib): the GPU
machine's torch and Python differ from this project's venv, so the
extension is compiled there, with torch's own extension builder.

    python3 scripts/gpu_torch_build.py LIBLOOM_DIR OUT_DIR

OUT_DIR/loom_torch is then an importable package (PYTHONPATH=OUT_DIR) whose
extension finds libloom in LIBLOOM_DIR (RUNPATH). CUDA tensors are built in
when this torch has CUDA and the toolkit's headers are found. Exits 77 with
the reason when torch is missing, as the GPU check reads a skip.
"""
import os
import shutil
import sys
import tempfile


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    libloom = os.path.abspath(sys.argv[1])
    out = os.path.abspath(sys.argv[2])
    try:
        import torch
        from setuptools import setup
        from torch.utils import cpp_extension
    except ImportError as e:
        print(f"SKIP: cannot build loom_torch here: {e}")
        sys.exit(77)
    if not os.path.exists(os.path.join(libloom, "libloom.so")) and not any(
            f.startswith("libloom.so") for f in os.listdir(libloom)):
        sys.exit(f"gpu_torch_build: no libloom.so* in {libloom}")

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    here = os.path.join(root, "bindings", "torch")
    sources = [os.path.join(here, f) for f in ("loom_op.cc", "backend_loom.cc", "collectives.cc", "module.cc")]
    macros = [("TORCH_EXTENSION_NAME", "_C"), ("TORCH_API_INCLUDE_EXTENSION_H", None)]
    cuda_home = cpp_extension.CUDA_HOME
    with_cuda = bool(torch.version.cuda) and cuda_home and os.path.exists(
        os.path.join(cuda_home, "include", "cuda_runtime_api.h"))
    # The C++ ABI of torch's own libraries, as the project's CMake takes it.
    macros.append(("_GLIBCXX_USE_CXX11_ABI", str(int(torch._C._GLIBCXX_USE_CXX11_ABI))))
    if with_cuda:
        sources.append(os.path.join(here, "cuda_ordering.cc"))
        macros += [("LOOM_TORCH_CUDA", "1"), ("USE_C10D_NCCL", "0")]
    # libloom.so may be only the versioned file in a pack: link against it by path.
    versioned = sorted(f for f in os.listdir(libloom) if f.startswith("libloom.so"))
    make = cpp_extension.CUDAExtension if with_cuda else cpp_extension.CppExtension
    ext = make(
        name="loom_torch._C",
        sources=sources,
        include_dirs=[root, os.path.join(root, "include")],
        define_macros=macros,
        extra_compile_args=["-std=c++20", "-O2", "-fvisibility=hidden"],
        extra_link_args=[os.path.join(libloom, versioned[0]), f"-Wl,-rpath,{libloom}"],
    )
    package = os.path.join(out, "loom_torch")
    os.makedirs(package, exist_ok=True)
    shutil.copy(os.path.join(here, "loom_torch", "__init__.py"), package)
    with tempfile.TemporaryDirectory(prefix="loom-torch-build-") as build:
        setup(name="loom_torch", ext_modules=[ext],
              cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=False)},
              script_args=["build_ext", "--build-lib", out, "--build-temp", build], zip_safe=False)
    print(f"gpu_torch_build: loom_torch for torch {torch.__version__} (CUDA {torch.version.cuda}, "
          f"CUDA tensors {'on' if with_cuda else 'off'}) in {package}")


if __name__ == "__main__":
    main()
