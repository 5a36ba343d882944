# Acceptance check of the build without LibTorch (DESIGN.md section 1): a fresh
# configure with -DHYPERPIPE_WITH_TORCH=OFF must build the hyperpipe target, and
# its `plan` and `launch` must run. Fails when either stops building without
# LibTorch (e.g. a torch include creeps into schedule/, launch/ or their cli files).
#
# cmake -DSOURCE_DIR=... -DBUILD_DIR=... -DGENERATOR=... -DCXX=... [-DLAUNCHER=ccache]
#       -DBUILD_TYPE=... -P no_torch_build.cmake
# BUILD_DIR is removed first, and again when the check passes.

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "no-LibTorch build: ${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${what}: ok")
endfunction()

# Hit the cache entries of the main build, as scripts/build.sh does.
set(ENV{CCACHE_BASEDIR} "${SOURCE_DIR}")
set(ENV{CCACHE_NOHASHDIR} "true")

file(REMOVE_RECURSE "${BUILD_DIR}")
run("configure" ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${BUILD_DIR}" -G "${GENERATOR}"
    -DHYPERPIPE_WITH_TORCH=OFF -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
run("build hyperpipe" ${CMAKE_COMMAND} --build "${BUILD_DIR}" --target hyperpipe --parallel 2)
run("hyperpipe plan" "${BUILD_DIR}/bin/hyperpipe" plan --schedule 1f1b --pp 2 --vpp 1 --mb 2)
run("hyperpipe launch" "${BUILD_DIR}/bin/hyperpipe" launch --nproc 2 -- true)
file(REMOVE_RECURSE "${BUILD_DIR}")
