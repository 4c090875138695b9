# Shared by the consumer test scripts (run_*_test.cmake, cmake -P): argument checks and
# run_step.

# Fails unless every variable named is defined (-D<var>=...); GENERATOR defaults to Ninja.
macro(require_arguments script)
  foreach(var ${ARGN})
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "${script}: -D${var}=... is required")
    endif()
  endforeach()
  if(NOT DEFINED GENERATOR)
    set(GENERATOR Ninja)
  endif()
endmacro()

# Runs a command; fails the test naming the step when it exits non-zero. Its stdout is left
# in LAST_OUTPUT.
function(run_step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "[${name}] ${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: step '${name}' failed (exit ${rc})")
  endif()
  set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()
