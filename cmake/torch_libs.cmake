# The LibTorch layers (DESIGN.md section 1, with models as users of the
# runtime's API): each folder a static library that links only the layers it
# depends on, and its tests link only that library (plus what the test itself
# needs), so a half-finished edit in one layer never blocks the tests of the
# layers below.
function(hp_torch_layer folder)
  cmake_parse_arguments(L "" "" "DEPS;TEST_DEPS" ${ARGN})
  hp_library(hp_${folder} ${folder} ${L_DEPS} ${TORCH_LIBRARIES})
  target_compile_definitions(hp_${folder} PUBLIC USE_C10D_GLOO)
  hp_tests(${folder}_tests ${folder} hp_${folder} ${L_TEST_DEPS})
endfunction()

# A job over several hosts keeps its store in node 0's launcher (launch/store_server.hpp);
# the comm and runtime dist tests start their ranks with the local launcher.
hp_torch_layer(comm DEPS hp_launch TEST_DEPS hp_launch)
# The runtime runs stages; the GPT and VL models its tests pipeline come from model/.
hp_torch_layer(runtime DEPS hp_schedule hp_comm TEST_DEPS hp_model hp_data hp_launch)
# dlsym finds the BLAS that fused attention calls (model/fused_attention.cpp).
hp_torch_layer(model DEPS hp_runtime ${CMAKE_DL_LIBS} TEST_DEPS hp_data)
# Fused attention's loop over heads is at::parallel_for, whose OpenMP pragma
# lives in ATen's header: compiled without OpenMP it runs on one thread. Only
# that file, so every other one keeps its flags; the runtime is the one
# LibTorch already loads (Debian's links libgomp).
find_package(OpenMP REQUIRED COMPONENTS CXX)
set_source_files_properties(${PROJECT_SOURCE_DIR}/src/model/fused_attention.cpp
                            TARGET_DIRECTORY hp_model PROPERTIES COMPILE_OPTIONS "${OpenMP_CXX_FLAGS}")
target_link_libraries(hp_model PRIVATE ${OpenMP_CXX_LIBRARIES})
# zlib's crc32 checksums the checkpoint files (LibTorch itself links zlib).
find_package(ZLIB REQUIRED)
# The train dist tests (the sharded optimizer, the measured trace) start their ranks with the local launcher.
hp_torch_layer(train DEPS hp_model hp_data ZLIB::ZLIB TEST_DEPS hp_launch)
# Generation: decoders over the forward-only pipeline; its tests start ranks and load checkpoints.
hp_torch_layer(infer DEPS hp_model TEST_DEPS hp_train hp_launch)
# Model families: each one's Task, profile and decode model, registered by name.
hp_torch_layer(family DEPS hp_train hp_infer TEST_DEPS hp_cli)
# The bench engine: calibration, links, rows measured beside simulated (bench reads a Task).
hp_torch_layer(bench DEPS hp_train TEST_DEPS hp_launch)
set(HP_TORCH_LIBS hp_bench hp_family hp_infer hp_train hp_model hp_runtime hp_comm hp_data hp_schedule hp_launch CACHE INTERNAL "")
# The family dist tests start a program that registers a family of its own.
add_dependencies(family_tests_dist family_worker)
# The BLAS test starts a worker with each BLAS on its library path.
add_dependencies(runtime_tests blas_worker)
