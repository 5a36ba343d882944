# `cmake --install` puts the libraries, the public headers (those
# cmake/public_headers.txt lists, in the src/ layout under include/hyperpipe/,
# none of them including <torch/torch.h>), the
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
# tokenize, train --tokenizer-model and generate start it from beside the binary.
install(TARGETS hyperpipe-sentencepiece RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/public_headers.txt)
file(STRINGS ${PROJECT_SOURCE_DIR}/cmake/public_headers.txt public_headers REGEX "^[^#]")
foreach(header ${public_headers})
  get_filename_component(folder ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/src/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hyperpipe/${folder})
endforeach()
install(EXPORT hyperpipeTargets NAMESPACE hyperpipe:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hyperpipe)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/hyperpipeConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/hyperpipeConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hyperpipe)
install(FILES ${CMAKE_BINARY_DIR}/hyperpipeConfig.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hyperpipe)
