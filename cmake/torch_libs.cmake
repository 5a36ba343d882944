# The LibTorch layers (DESIGN.md section 1): each folder a static library that
# links only the layers it depends on, and its tests link only that library, so
# a half-finished edit in one layer never blocks the tests of the layers below.
function(hp_torch_layer folder)
  hp_library(hp_${folder} ${folder} ${ARGN} ${TORCH_LIBRARIES})
  target_compile_definitions(hp_${folder} PUBLIC USE_C10D_GLOO)
  hp_tests(${folder}_tests ${folder} hp_${folder})
endfunction()

hp_torch_layer(comm)
hp_torch_layer(model)
hp_torch_layer(runtime hp_schedule hp_comm hp_model)
hp_torch_layer(train hp_runtime hp_data)
set(HP_TORCH_LIBS hp_train hp_runtime hp_model hp_comm hp_data hp_schedule CACHE INTERNAL "")
