# Acceptance check of the build without LibTorch (DESIGN.md section 1): a fresh
# configure with -DHYPERPIPE_WITH_TORCH=OFF must build the hyperpipe target, and
# its `plan` and `launch` must run. Fails when either stops building without
# LibTorch (e.g. a torch include creeps into schedule/, launch/ or their cli files).
#
# cmake -DSOURCE_DIR=... -DBUILD_DIR=... -DGENERATOR=... -DCXX=... [-DLAUNCHER=ccache]
#       -DBUILD_TYPE=... -P no_torch_build.cmake
# BUILD_DIR is removed first, and again when the check passes.

# run(what expect command...): the command must exit 0 and, when `expect` is
# not empty, print text matching that regular expression.
function(run what expect)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "no-LibTorch build: ${what} failed (${rc}):\n${out}")
  endif()
  if(NOT expect STREQUAL "" AND NOT out MATCHES "${expect}")
    message(FATAL_ERROR "no-LibTorch build: ${what} printed no match for '${expect}':\n${out}")
  endif()
  message(STATUS "${what}: ok")
endfunction()

# Hit the cache entries of the main build, as scripts/build.sh does.
set(ENV{CCACHE_BASEDIR} "${SOURCE_DIR}")
set(ENV{CCACHE_NOHASHDIR} "true")

file(REMOVE_RECURSE "${BUILD_DIR}")
run("configure" "" ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${BUILD_DIR}" -G "${GENERATOR}"
    -DHYPERPIPE_WITH_TORCH=OFF -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
run("build hyperpipe" "" ${CMAKE_COMMAND} --build "${BUILD_DIR}" --target hyperpipe --parallel 2)
# The schedule itself, as the LibTorch build prints it (PlanCli tests the rest).
run("hyperpipe plan" "0,0F0,0SEND_F0@1,0F1,0SEND_F1@1,0RECV_B0@1,0B0,0RECV_B1@1,0B1\n1,1RECV_F0@0,1F0,1B0,1SEND_B0@0,1RECV_F1@0,1F1,1B1,1SEND_B1@0\n"
    "${BUILD_DIR}/bin/hyperpipe" plan --schedule 1f1b --pp 2 --vpp 1 --mb 2 --format csv)
# Each rank ran with its own RANK and WORLD_SIZE.
run("hyperpipe launch" "\\[rank 0\\] 0/2.*\\[rank 1\\] 1/2|\\[rank 1\\] 1/2.*\\[rank 0\\] 0/2"
    "${BUILD_DIR}/bin/hyperpipe" launch --nproc 2 -- sh -c "echo $RANK/$WORLD_SIZE")
file(REMOVE_RECURSE "${BUILD_DIR}")
