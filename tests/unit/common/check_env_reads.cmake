# Keeps the rule of common/config.h: every environment variable Loom reads is
# declared in the table of common/config.cc (configKnobs()) and read there,
# by Config::fromEnv() or readKnob(); config.cc is the one file that calls
# getenv for a Loom variable.
#
#   cmake -DROOT=<source root> -DDIRS=<dir;dir;...> -DTABLE=<config.cc> -P check_env_reads.cmake
#
# In every C, C++ and CUDA source under DIRS (folders named tests skipped:
# tests set variables on purpose and read back what a launcher passed):
#   - getenv/secure_getenv only with a string literal naming a variable that
#     is not Loom's (OPENBLAS_CORETYPE, UCX_*): a LOOM_ literal or a name held
#     in a variable must go through readKnob;
#   - readKnob("NAME") only with a NAME declared in the table;
# and in Python sources no os.environ/getenv of a LOOM_ variable. TABLE itself
# must call getenv exactly once (inside readKnob).
cmake_minimum_required(VERSION 3.20)  # IN_LIST, list(JOIN) in script mode

foreach(var ROOT DIRS TABLE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_env_reads.cmake: -D${var}=... is required")
  endif()
endforeach()

file(READ "${TABLE}" table_text)
string(REGEX MATCHALL "{\"[A-Z][A-Z0-9_]*\", k[A-Za-z]+," entries "${table_text}")
set(declared "")
foreach(entry IN LISTS entries)
  string(REGEX REPLACE "^{\"([A-Z0-9_]+)\".*" "\\1" name "${entry}")
  list(APPEND declared "${name}")
endforeach()
list(LENGTH declared declared_count)
if(declared_count EQUAL 0)
  message(FATAL_ERROR "no {\"NAME\", kSection, ...} entries found in ${TABLE}: the table's layout changed, update this script")
endif()

set(violations "")
string(REGEX MATCHALL "getenv[ \t]*\\(" table_getenvs "${table_text}")
list(LENGTH table_getenvs table_getenv_count)
if(NOT table_getenv_count EQUAL 1)
  list(APPEND violations "${TABLE}: ${table_getenv_count} getenv calls; only readKnob() may call it")
endif()

set(files "")
foreach(dir IN LISTS DIRS)
  if(NOT IS_DIRECTORY "${ROOT}/${dir}")
    message(FATAL_ERROR "${ROOT}/${dir} is not a directory: update DIRS where this test is declared")
  endif()
  file(GLOB_RECURSE found LIST_DIRECTORIES false
       "${ROOT}/${dir}/*.c" "${ROOT}/${dir}/*.cc" "${ROOT}/${dir}/*.cpp" "${ROOT}/${dir}/*.h"
       "${ROOT}/${dir}/*.hpp" "${ROOT}/${dir}/*.cu" "${ROOT}/${dir}/*.cuh" "${ROOT}/${dir}/*.py")
  list(APPEND files ${found})
endforeach()

get_filename_component(table_path "${TABLE}" REALPATH)
set(scanned 0)
foreach(file IN LISTS files)
  file(RELATIVE_PATH rel "${ROOT}" "${file}")
  if(rel MATCHES "(^|/)tests/")
    continue()
  endif()
  get_filename_component(real "${file}" REALPATH)
  if(real STREQUAL table_path)
    continue()
  endif()
  math(EXPR scanned "${scanned} + 1")
  if(file MATCHES "\\.py$")
    file(STRINGS "${file}" lines REGEX "(environ|getenv).*LOOM_")
    foreach(line IN LISTS lines)
      string(STRIP "${line}" line)
      list(APPEND violations "${rel}: reads a Loom variable from Python: ${line}")
    endforeach()
    continue()
  endif()
  file(STRINGS "${file}" lines REGEX "getenv[ \t]*\\(|readKnob[ \t]*\\(\"")
  foreach(line IN LISTS lines)
    string(REGEX MATCHALL "getenv[ \t]*\\([^)]*\\)" calls "${line}")
    foreach(call IN LISTS calls)
      string(REGEX REPLACE "^getenv[ \t]*\\([ \t]*(.*[^ \t])?[ \t]*\\)$" "\\1" arg "${call}")
      if(NOT arg MATCHES "^\"[^\"]*\"$" OR arg MATCHES "^\"LOOM_")
        list(APPEND violations "${rel}: ${call}: read Loom's variables through loom::readKnob (common/config.h), declared in configKnobs()")
      endif()
    endforeach()
    string(REGEX MATCHALL "readKnob[ \t]*\\(\"[^\"]*\"" knob_calls "${line}")
    foreach(call IN LISTS knob_calls)
      string(REGEX REPLACE "^readKnob[ \t]*\\(\"([^\"]*)\"$" "\\1" name "${call}")
      if(NOT name IN_LIST declared)
        list(APPEND violations "${rel}: readKnob(\"${name}\"): ${name} is not declared in configKnobs() (${TABLE})")
      endif()
    endforeach()
  endforeach()
endforeach()

if(scanned EQUAL 0)
  message(FATAL_ERROR "no source files found under ${DIRS} in ${ROOT}")
endif()
list(LENGTH violations violation_count)
if(violation_count GREATER 0)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "environment read outside the Config table (${violation_count}):\n  ${text}")
endif()
message(STATUS "${scanned} source files read the environment only through the table of ${declared_count} variables")
