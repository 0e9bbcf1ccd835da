# Installs the build in BINARY_DIR to a scratch prefix under WORK_DIR, then configures, builds and
# runs the consumer project against that prefix. Run with cmake -P (see test/CMakeLists.txt).
file(REMOVE_RECURSE ${WORK_DIR})

function(run_step what)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
    if(NOT result EQUAL 0)
        message(FATAL_ERROR "consumer test: ${what} failed (${result})")
    endif()
endfunction()

run_step("install" ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${WORK_DIR}/prefix)
run_step("configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/test/cmake_consumer -B ${WORK_DIR}/build
         -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
         "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINKER_FLAGS}")
run_step("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run_step("run" ${WORK_DIR}/build/consumer)
