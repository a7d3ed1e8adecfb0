# One precompiled header for the GoogleTest executables under tests/:
# gtest.h and the standard headers most tests include. Parsing gtest.h is
# most of a small test file's compile time (~2.5 of ~3.5 s at -O2 -g); the
# header is compiled once and every test target reuses it (REUSE_FROM), in
# the regular build and in the sanitizer builds alike.
#
# GCC uses a precompiled header only where the flags that shape it match:
# -fPIE (so the owner is an executable like the tests), the -O level and
# GTEST_HAS_PTHREAD (so it links GTest::gtest like them); a test target
# whose flags differ compiles correctly without it, and -Winvalid-pch (which
# CMake adds) says so in the build log; a target with an -O option of its
# own is left out.
#
# LOOM_TEST_PCH defaults to ON without a compiler launcher (CI's fresh
# builds) and OFF with one: ccache cannot cache a file compiled against a
# precompiled header unless its sloppiness allows it, and a warm cache
# beats the header.
if(CMAKE_CXX_COMPILER_LAUNCHER)
  set(loom_test_pch_default OFF)
else()
  set(loom_test_pch_default ON)
endif()
option(LOOM_TEST_PCH "Compile the tests against one precompiled GoogleTest header" ${loom_test_pch_default})

# Every buildsystem target defined in `dir` and the folders below it.
function(loom_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    loom_targets_below(${sub} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# The -O options in `target`'s COMPILE_OPTIONS (the folder's included).
function(loom_optimization_options target out)
  get_target_property(options ${target} COMPILE_OPTIONS)
  set(levels "")
  foreach(option ${options})
    if(option MATCHES "^-O")
      list(APPEND levels ${option})
    endif()
  endforeach()
  set(${out} "${levels}" PARENT_SCOPE)
endfunction()

# Makes every GoogleTest executable defined under `dir` reuse the header:
# executables that link GTest directly or through loom_test_support and
# compile only C++.
function(loom_use_test_pch dir)
  if(NOT LOOM_TEST_PCH)
    return()
  endif()
  if(NOT TARGET loom_test_pch)
    add_executable(loom_test_pch ${PROJECT_SOURCE_DIR}/tests/pch/pch_main.cc)
    target_link_libraries(loom_test_pch PRIVATE GTest::gtest)
    target_precompile_headers(loom_test_pch PRIVATE
      <gtest/gtest.h> <algorithm> <atomic> <chrono> <cstring> <functional> <string> <thread> <vector>)
  endif()
  loom_optimization_options(loom_test_pch pch_levels)
  loom_targets_below(${dir} targets)
  set(count 0)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    if(NOT type STREQUAL "EXECUTABLE" OR target STREQUAL "loom_test_pch")
      continue()
    endif()
    get_target_property(libs ${target} LINK_LIBRARIES)
    if(NOT libs MATCHES "GTest::|loom_test_support")
      continue()
    endif()
    # A target that sets its own -O level would not match the header's.
    loom_optimization_options(${target} target_levels)
    if(NOT target_levels STREQUAL pch_levels)
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    if(sources MATCHES "\\.(c|cu)(;|$)")
      continue()
    endif()
    target_precompile_headers(${target} REUSE_FROM loom_test_pch)
    math(EXPR count "${count} + 1")
  endforeach()
  message(STATUS "Loom tests: ${count} test targets under ${dir} reuse the precompiled GoogleTest header")
endfunction()
