# ctest consumer_find_package: install this build of pt2rt into a scratch prefix, build
# tests/consumer against it with find_package(pt2rt), export a model with the *installed*
# export-cli (and its installed Python exporter), and run the consumer on it.
#
#   cmake -DPT2RT_BUILD_DIR=<build> -DWORK_DIR=<scratch> -DSOURCE_DIR=<repo>
#         [-DGENERATOR=Ninja] -P run_consumer_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/consumer_steps.cmake)
require_arguments(run_consumer_test.cmake PT2RT_BUILD_DIR WORK_DIR SOURCE_DIR)

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

run_step(install ${CMAKE_COMMAND} --install ${PT2RT_BUILD_DIR} --prefix ${prefix})
foreach(f include/pt2rt/model.h lib/cmake/pt2rt/pt2rtConfig.cmake bin/export-cli
          share/pt2rt/python/pt2rt/__init__.py)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "consumer test: install did not produce ${f}")
  endif()
endforeach()

run_step(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build
         -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run_step(build ${CMAKE_COMMAND} --build ${WORK_DIR}/build)

# The installed export-cli must find the installed exporter (not the source tree's): run it
# from the scratch dir with a PYTHONPATH that does not name the source tree.
run_step(export ${CMAKE_COMMAND} -E env --unset=PYTHONPATH
         ${prefix}/bin/export-cli save ${SOURCE_DIR}/tests/consumer/tiny_model.py:build
         ${WORK_DIR}/tiny.pt2)
run_step(inspect ${prefix}/bin/export-cli inspect ${WORK_DIR}/tiny.pt2)
run_step(consumer ${WORK_DIR}/build/consumer ${WORK_DIR}/tiny.pt2)
if(NOT LAST_OUTPUT MATCHES "consumer: ok")
  message(FATAL_ERROR "consumer test: the consumer did not report success")
endif()
message(STATUS "consumer test: passed")
