# hp_discover_suites(target label): one CTest test per GoogleTest suite of a
# unit-test binary ("Suite.*"), where gtest_discover_tests adds one per test.
# Every test process pays for loading LibTorch (about 0.6 s of CPU on this
# machine, most of a unit test's time), so a suite's tests share one. A
# suite's tests that skip mark the CTest test skipped (scripts/test.sh fails
# on it), as gtest_discover_tests marks a skipped test.
set(HP_SUITES_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/gtest_suites_list.cmake)

function(hp_discover_suites target label)
  set(list_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake)
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake)
  add_custom_command(
    TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D EXE=$<TARGET_FILE:${target}> -D OUT=${list_file} -D LABEL=${label}
            -D WORKDIR=${CMAKE_CURRENT_BINARY_DIR} -P ${HP_SUITES_SCRIPT}
    BYPRODUCTS ${list_file}
    VERBATIM)
  file(WRITE ${include_file}
       "if(EXISTS \"${list_file}\")\n  include(\"${list_file}\")\nelse()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()
