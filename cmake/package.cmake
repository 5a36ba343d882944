# `cmake --install` puts the libraries, the public headers (the src/ layout
# under include/hyperpipe/, none of them including <torch/torch.h>), the
# hyperpipe binary and a CMake package config under the prefix, so an outside
# project does
#   find_package(hyperpipe REQUIRED)
#   target_link_libraries(app PRIVATE hyperpipe::hyperpipe)
# and includes <hyperpipe/runtime/pipeline.hpp> (examples/custom_model/).
include(CMakePackageConfigHelpers)

add_library(hp_package INTERFACE)
set_target_properties(hp_package PROPERTIES EXPORT_NAME hyperpipe)
target_link_libraries(hp_package INTERFACE ${HP_TORCH_LIBS})
target_include_directories(hp_package INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
add_library(hyperpipe::hyperpipe ALIAS hp_package)

install(TARGETS hp_package ${HP_TORCH_LIBS} EXPORT hyperpipeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS hyperpipe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/src/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hyperpipe
        FILES_MATCHING PATTERN "*.hpp")
install(EXPORT hyperpipeTargets NAMESPACE hyperpipe:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hyperpipe)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/hyperpipeConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/hyperpipeConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hyperpipe)
install(FILES ${CMAKE_BINARY_DIR}/hyperpipeConfig.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hyperpipe)
