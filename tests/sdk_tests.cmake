# Plugin SDK tests (docs/writing-a-modifier.md).
#
#   sdk_test_safety   GoogleTest, build tree only: each safety rule of plugin
#                     loading with its exact message (ABI, option schema,
#                     option tables, factories, host restrictions, a plugin
#                     throwing in a real dispatcher process, gt inspect).
#   sdk_install       tests/sdk_test.sh: installs this build into a prefix,
#                     builds examples/modifier-template and
#                     examples/modifier-inject against it with
#                     find_package(gt), then runs sdk_test_install: the
#                     installed hosts load the built plugins from manifests.

# Probe plugins: MODULE libraries in their own directory (never installed,
# never on the default search path).
set(GT_SDK_TEST_PLUGIN_DIR ${CMAKE_BINARY_DIR}/sdk-test-plugins)
if(NOT DEFINED GT_TEST_PLUGIN_DIR)
  set(GT_TEST_PLUGIN_DIR ${CMAKE_BINARY_DIR}/test-plugins)  # tests/manifest_tests.cmake
endif()

# Adds probe plugin `name` (file gt_<name>.so) from sdk_test_probe_plugin.cc,
# compiled with the extra definitions in ARGN.
function(gt_add_sdk_probe name)
  set(target gt_sdk_probe_${name})
  gt_add_modifier(${name} NO_INSTALL TARGET ${target} OUTPUT_DIRECTORY ${GT_SDK_TEST_PLUGIN_DIR}
                  ${CMAKE_CURRENT_SOURCE_DIR}/sdk_test_probe_plugin.cc)
  target_compile_definitions(${target} PRIVATE GT_SDK_PROBE_NAME="${name}" ${ARGN})
  set(GT_SDK_PROBE_TARGETS ${GT_SDK_PROBE_TARGETS} ${target} PARENT_SCOPE)
endfunction()

gt_add_sdk_probe(probe)
gt_add_sdk_probe(probe_abi99 GT_PLUGIN_ABI_VERSION=99)
gt_add_sdk_probe(probe_bad_default GT_SDK_PROBE_BAD_DEFAULT)
gt_add_sdk_probe(probe_duplicate_option GT_SDK_PROBE_DUPLICATE_OPTION)
gt_add_sdk_probe(probe_empty_range GT_SDK_PROBE_EMPTY_RANGE)

gt_add_test(sdk_test_safety sdk_test_safety.cc)
target_compile_definitions(sdk_test_safety PRIVATE
  GT_SDK_TEST_PLUGIN_DIR="${GT_SDK_TEST_PLUGIN_DIR}" GT_TEST_PLUGIN_DIR="${GT_TEST_PLUGIN_DIR}")
target_link_libraries(sdk_test_safety PRIVATE GTest::gmock)
add_dependencies(sdk_test_safety ${GT_SDK_PROBE_TARGETS} gt-dispatcher gt-worker gt gt_torch)
foreach(needed gt_test_plugin_throwing gt_test_plugin_dispatcher_only)
  if(TARGET ${needed})
    add_dependencies(sdk_test_safety ${needed})
  endif()
endforeach()

# The out-of-tree half: run by sdk_test.sh, never on its own (without the
# script's environment every test in it is skipped).
add_executable(sdk_test_install sdk_test_install.cc)
target_link_libraries(sdk_test_install PRIVATE gt_test_support GTest::gtest_main GTest::gmock)

find_program(GT_SDK_CCACHE ccache)
add_test(NAME sdk_install
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/sdk_test.sh
          --build-dir "${CMAKE_BINARY_DIR}"
          --source-dir "${PROJECT_SOURCE_DIR}"
          --work-dir "${CMAKE_BINARY_DIR}/sdk-test"
          --generator "${CMAKE_GENERATOR}"
          --make-program "${CMAKE_MAKE_PROGRAM}"
          --cxx-compiler "${CMAKE_CXX_COMPILER}"
          --ccache "$<$<BOOL:${GT_SDK_CCACHE}>:${GT_SDK_CCACHE}>"
          --runner "$<TARGET_FILE:sdk_test_install>")
# Installs the whole build, so it needs everything `cmake --install` copies
# (a plain `ninja` builds all of it).
add_dependencies(sdk_test_install gt-dispatcher gt-worker gt gt_torch gt_instruction_log gt_client)
if(TARGET gt_python_ext)
  add_dependencies(sdk_test_install gt_python_ext)
endif()
set_tests_properties(sdk_install PROPERTIES TIMEOUT 300 LABELS sdk)
