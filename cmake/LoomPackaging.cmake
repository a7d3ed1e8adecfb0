# Debian packages (`cpack -G DEB` in the build tree; docs/install.md), one per
# install component of cmake/LoomInstall.cmake:
#   libloom<major>  runtime: libloom.so.<major>, the NCCL shim, LICENSE and docs
#   libloom-dev     headers, .so links, CMake package, pkg-config files
#   loom-tools      loomrun, loom_tune_fit, the perf tools, man pages
# The library package carries the SONAME's major version in its name, as
# Debian names shared-library packages, so two majors can be installed side
# by side. dpkg-shlibdeps computes each package's system dependencies; -dev
# and tools also depend on the library package of exactly their version.
set(CPACK_PACKAGE_NAME loom)
set(CPACK_PACKAGE_VENDOR "The Loom authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: CPackDeb would put it above every
# package's own first line (the summary) below.
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_FILE_NAME loom-${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL runtime dev tools)
set(CPACK_DEB_COMPONENT_INSTALL ON)
# Debian packages ship stripped binaries.
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "The Loom authors")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The tools need libloom, which is in the runtime package: dpkg-shlibdeps,
# run in each component's staging folder, finds it in the runtime's (a
# private library to it, so it adds no dependency; the exact one below does).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
    ../runtime${CPACK_PACKAGING_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}
    ../runtime${CPACK_PACKAGING_INSTALL_PREFIX}/${LOOM_NCCL_INSTALL_LIBDIR})
list(REMOVE_DUPLICATES CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS)
set(loom_runtime_package libloom${PROJECT_VERSION_MAJOR})
set(loom_exact_runtime "${loom_runtime_package} (= ${PROJECT_VERSION})")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ${loom_runtime_package})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "Loom collective communication library (runtime)
libloom, the C API of <loom/loom.h>, and the NCCL shim that runs programs
written for NCCL's API on Loom: all-reduce, all-gather, broadcast, reduce,
reduce-scatter and send/receive between processes, over shared memory, TCP,
InfiniBand/RoCE or UCX, for host and CUDA memory.")
# A shlibs file, so that packages built against libloom get their dependency
# on this package from dpkg-shlibdeps.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libloom-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${loom_exact_runtime}")
set(CPACK_DEBIAN_DEV_DESCRIPTION "Loom collective communication library (development files)
Headers (<loom/loom.h>, <loom/loom.hpp>, the shim's <nccl.h>), the CMake
package (find_package(Loom): Loom::loom, Loom::nccl) and pkg-config files
(loom.pc, nccl.pc).")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME loom-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${loom_exact_runtime}")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "Loom collective communication library (tools)
loomrun, the job launcher, the nccl-tests-style perf tools
(all_reduce_perf, ...) and loom_tune_fit, with their man pages.")

include(CPack)
