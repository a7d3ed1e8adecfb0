# docs/environment.md is the Markdown form of the table in common/config.cc:
# fails when the committed file differs from what loomrun prints now.
#
#   cmake -DLOOMRUN=<loomrun> -DDOC=<docs/environment.md> -P check_env_doc.cmake
foreach(var LOOMRUN DOC)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_env_doc.cmake: -D${var}=... is required")
  endif()
endforeach()
execute_process(COMMAND "${LOOMRUN}" --help-env=markdown OUTPUT_VARIABLE generated RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${LOOMRUN} --help-env=markdown exited with ${rc}")
endif()
if(NOT EXISTS "${DOC}")
  message(FATAL_ERROR "${DOC} is missing; create it with: loomrun --help-env=markdown > docs/environment.md")
endif()
file(READ "${DOC}" committed)
if(NOT generated STREQUAL committed)
  message(FATAL_ERROR "${DOC} differs from `loomrun --help-env=markdown` (the table in common/config.cc); "
                      "regenerate it with: loomrun --help-env=markdown > docs/environment.md")
endif()
message(STATUS "${DOC} matches the table")
