# Script for hp_discover_suites (gtest_suites.cmake): lists EXE's suites and
# writes OUT, the add_test() of each, labelled LABEL, run in WORKDIR.
execute_process(COMMAND "${EXE}" --gtest_list_tests OUTPUT_VARIABLE listing RESULT_VARIABLE rc TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} --gtest_list_tests failed (${rc}):\n${listing}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(content "")
foreach(line IN LISTS lines)
  # A suite's line starts in column 0 and ends its name with a dot
  # ("Suite." or "Instance/Suite.", perhaps followed by "  # TypeParam = ...").
  if(line MATCHES "^([A-Za-z0-9_/]+)\\.")
    set(name "${CMAKE_MATCH_1}.*")
    string(APPEND content
           "add_test([=[${name}]=] [==[${EXE}]==] [==[--gtest_filter=${name}]==])\n"
           "set_tests_properties([=[${name}]=] PROPERTIES LABELS ${LABEL} WORKING_DIRECTORY [==[${WORKDIR}]==] "
           "SKIP_REGULAR_EXPRESSION [==[\\[  SKIPPED \\]]==])\n")
  endif()
endforeach()
file(WRITE "${OUT}" "${content}")
