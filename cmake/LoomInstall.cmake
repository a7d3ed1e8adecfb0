# What `cmake --install` puts where (docs/install.md), by component:
#   runtime  libloom.so.<major>, the NCCL shim's .so.<major>, LICENSE, CHANGELOG, the docs
#   dev      headers, the .so links, LoomConfig*.cmake, LoomTargets*.cmake, loom.pc, nccl.pc
#   tools    loomrun, loom_tune_fit, the perf tools and their man pages
# The components are also the Debian packages (cmake/LoomPackaging.cmake).
# The shim's own rules are in shim/nccl/CMakeLists.txt (its install block).
include(CMakePackageConfigHelpers)

set(LOOM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Loom)
set(LOOM_INSTALL_PKGCONFIGDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- Libraries and headers --------------------------------------------------
install(TARGETS loom EXPORT LoomTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/loom DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
        FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
# Consumers write Loom::nccl, not Loom::loom_nccl.
set_target_properties(loom_nccl PROPERTIES EXPORT_NAME nccl)

# ---- find_package(Loom) -------------------------------------------------------
# Relocatable: the files locate the prefix from their own directory, so the
# tree works under any --prefix or DESTDIR.
install(EXPORT LoomTargets NAMESPACE Loom:: FILE LoomTargets.cmake
        DESTINATION ${LOOM_INSTALL_CMAKEDIR} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/LoomConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/install/LoomConfig.cmake
                              INSTALL_DESTINATION ${LOOM_INSTALL_CMAKEDIR})
# Same major version: the C API is the ABI, and only a major bump breaks it.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/LoomConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/install/LoomConfig.cmake ${PROJECT_BINARY_DIR}/install/LoomConfigVersion.cmake
        DESTINATION ${LOOM_INSTALL_CMAKEDIR} COMPONENT dev)

# ---- pkg-config -------------------------------------------------------------
# prefix is taken relative to the .pc file itself (${pcfiledir}), so that,
# like LoomConfig.cmake, the files stay right under any --prefix or DESTDIR.
function(loom_pkgconfig_dir var dir)
  if(IS_ABSOLUTE "${dir}")
    set(${var} "${dir}" PARENT_SCOPE)
  else()
    set(${var} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
file(RELATIVE_PATH LOOM_PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${LOOM_INSTALL_PKGCONFIGDIR} ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" LOOM_PC_TO_PREFIX "${LOOM_PC_TO_PREFIX}")
loom_pkgconfig_dir(LOOM_PC_LIBDIR ${CMAKE_INSTALL_LIBDIR})
loom_pkgconfig_dir(LOOM_PC_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR})
loom_pkgconfig_dir(LOOM_PC_NCCL_LIBDIR ${LOOM_NCCL_INSTALL_LIBDIR})
loom_pkgconfig_dir(LOOM_PC_NCCL_INCLUDEDIR ${LOOM_NCCL_INSTALL_INCLUDEDIR})
# nccl.pc carries the NCCL version whose API the shim's nccl.h declares, as
# NVIDIA's would, so that `pkg-config --atleast-version` checks keep meaning.
file(STRINGS ${PROJECT_SOURCE_DIR}/shim/nccl/include/nccl.h LOOM_NCCL_VERSION_LINES
     REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) [0-9]+")
set(LOOM_NCCL_API_VERSION "")
foreach(part MAJOR MINOR PATCH)
  string(REGEX MATCH "NCCL_${part} ([0-9]+)" _ "${LOOM_NCCL_VERSION_LINES}")
  list(APPEND LOOM_NCCL_API_VERSION ${CMAKE_MATCH_1})
endforeach()
list(JOIN LOOM_NCCL_API_VERSION "." LOOM_NCCL_API_VERSION)
get_target_property(LOOM_NCCL_LIBNAME loom_nccl OUTPUT_NAME)
if(NOT LOOM_NCCL_LIBNAME)
  set(LOOM_NCCL_LIBNAME loom_nccl)
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/loom.pc.in ${PROJECT_BINARY_DIR}/install/loom.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/nccl.pc.in ${PROJECT_BINARY_DIR}/install/nccl.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/install/loom.pc ${PROJECT_BINARY_DIR}/install/nccl.pc
        DESTINATION ${LOOM_INSTALL_PKGCONFIGDIR} COMPONENT dev)

# ---- Programs and their man pages ------------------------------------------------
# One line per installed program: name, then the NAME line of its man page.
set(LOOM_INSTALLED_PROGRAMS
  "loomrun|start the ranks of a Loom (or torchrun-style) job on this node"
  "loom_tune_fit|fit Loom's cost model to measured times and write a tuning file")
set(LOOM_PERF_SUMMARY_all_reduce "all-reduce")
set(LOOM_PERF_SUMMARY_all_gather "all-gather")
set(LOOM_PERF_SUMMARY_broadcast "broadcast")
set(LOOM_PERF_SUMMARY_reduce "reduce")
set(LOOM_PERF_SUMMARY_reduce_scatter "reduce-scatter")
set(LOOM_PERF_SUMMARY_sendrecv "send/receive (ring exchange)")
set(LOOM_PERF_SUMMARY_alltoall "all-to-all")
get_property(loom_perf_tools GLOBAL PROPERTY LOOM_PERF_TOOLS)
foreach(tool IN LISTS loom_perf_tools)
  if(TARGET ${tool}_perf)
    set(what "${LOOM_PERF_SUMMARY_${tool}}")
    if(NOT what)
      set(what "${tool}")
    endif()
    list(APPEND LOOM_INSTALLED_PROGRAMS "${tool}_perf|measure Loom's ${what} bandwidth and check its results")
  endif()
endforeach()

# Installed programs find libloom in ../lib of wherever they are installed.
file(RELATIVE_PATH loom_bin_to_lib ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}
     ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR})
# Man pages are the programs' own --help and --version (scripts/help_to_man.py),
# so they cannot drift from the programs.
find_package(Python3 COMPONENTS Interpreter)
set(loom_man_pages "")
foreach(entry IN LISTS LOOM_INSTALLED_PROGRAMS)
  string(REPLACE "|" ";" entry "${entry}")
  list(GET entry 0 program)
  list(GET entry 1 summary)
  set_target_properties(${program} PROPERTIES INSTALL_RPATH "$ORIGIN/${loom_bin_to_lib}")
  install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
  if(Python3_Interpreter_FOUND)
    set(page ${PROJECT_BINARY_DIR}/man/${program}.1)
    add_custom_command(OUTPUT ${page}
                       COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/help_to_man.py
                               --program $<TARGET_FILE:${program}> --name ${program}
                               --summary "${summary}" --output ${page}
                       DEPENDS ${program} ${PROJECT_SOURCE_DIR}/scripts/help_to_man.py
                       COMMENT "Man page ${program}.1 from ${program} --help"
                       VERBATIM)
    list(APPEND loom_man_pages ${page})
  endif()
endforeach()
if(loom_man_pages)
  add_custom_target(loom_man_pages ALL DEPENDS ${loom_man_pages})
  install(FILES ${loom_man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tools)
else()
  message(STATUS "Loom: no Python 3 interpreter, so no man pages (scripts/help_to_man.py)")
endif()

# ---- Documents -----------------------------------------------------------------
file(GLOB loom_docs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/CHANGELOG.md ${PROJECT_SOURCE_DIR}/README.md
        ${loom_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
