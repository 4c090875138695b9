# ctest consumer_add_subdirectory: export a model with this build's export-cli, then configure
# and build tests/consumer/subdirectory — a fresh project that takes pt2rt in with
# add_subdirectory — run its consumer on the model, and check that building pt2rt that way
# wrote nothing into pt2rt's source tree.
#
#   cmake -DEXPORT_CLI=<export-cli> -DWORK_DIR=<scratch> -DSOURCE_DIR=<repo>
#         [-DEXCLUDE_DIR=<pt2rt's own build dir>] [-DGENERATOR=Ninja] -P run_subdirectory_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/consumer_steps.cmake)
require_arguments(run_subdirectory_test.cmake EXPORT_CLI WORK_DIR SOURCE_DIR)

# The source tree's files newer than `stamp`, less pt2rt's own build dirs and what concurrent
# pytest runs write (__pycache__, .pytest_cache).
function(files_newer_than stamp out_var)
  set(prune -path "${SOURCE_DIR}/.git" -o -path "${SOURCE_DIR}/build*" -o -path "${WORK_DIR}"
            -o -name __pycache__ -o -name .pytest_cache)
  if(DEFINED EXCLUDE_DIR)
    list(APPEND prune -o -path "${EXCLUDE_DIR}")
  endif()
  execute_process(COMMAND find ${SOURCE_DIR} ( ${prune} ) -prune -o -newer ${stamp} -print
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: find failed: ${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
run_step(export ${EXPORT_CLI} save ${SOURCE_DIR}/tests/consumer/tiny_model.py:build
         ${WORK_DIR}/tiny.pt2)

# Everything written from here on must land in WORK_DIR.
file(TOUCH ${WORK_DIR}/stamp)
execute_process(COMMAND ${CMAKE_COMMAND} -E sleep 1)  # mtimes of 1 s resolution
run_step(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer/subdirectory
         -B ${WORK_DIR}/build -G ${GENERATOR} -DPT2RT_SOURCE_DIR=${SOURCE_DIR})
run_step(build ${CMAKE_COMMAND} --build ${WORK_DIR}/build --parallel 2)  # all: pt2rt's too
files_newer_than(${WORK_DIR}/stamp written)
if(NOT written STREQUAL "")
  message(FATAL_ERROR "consumer test: building pt2rt as a subproject wrote into its source "
                      "tree:\n${written}")
endif()

run_step(consumer ${WORK_DIR}/build/consumer ${WORK_DIR}/tiny.pt2)
if(NOT LAST_OUTPUT MATCHES "consumer: ok")
  message(FATAL_ERROR "consumer test: the consumer did not report success")
endif()
message(STATUS "consumer test: passed")
