# Manifest, plugin-loader and shipped-config tests.
#
# Test plugins: MODULE libraries in their own directory (not the plugin
# directory, never installed), so that only tests that put that directory on
# GT_PLUGIN_PATH ever see them. Each file is gt_<name>.so, the name the
# loader looks for.
set(GT_TEST_PLUGIN_DIR ${CMAKE_BINARY_DIR}/test-plugins)

# Adds test plugin target gt_test_plugin_<name>, file gt_<name>.so, from
# plugins/<source>.
function(gt_add_test_plugin name source)
  gt_add_modifier(${name} NO_INSTALL TARGET gt_test_plugin_${name} OUTPUT_DIRECTORY ${GT_TEST_PLUGIN_DIR}
                  ${CMAKE_CURRENT_SOURCE_DIR}/plugins/${source})
endfunction()

gt_add_test_plugin(wrong_abi wrong_abi.cc)
# Built for a plugin ABI the host does not speak.
target_compile_definitions(gt_test_plugin_wrong_abi PRIVATE GT_PLUGIN_ABI_VERSION=99)
gt_add_test_plugin(not_a_plugin not_a_plugin.cc)
gt_add_test_plugin(throwing throwing.cc)
gt_add_test_plugin(dispatcher_only counting.cc)
gt_add_test_plugin(partial_backend partial_backend.cc)

set(GT_TEST_PLUGIN_TARGETS gt_test_plugin_wrong_abi gt_test_plugin_not_a_plugin
    gt_test_plugin_throwing gt_test_plugin_dispatcher_only gt_test_plugin_partial_backend)

gt_add_test(manifest_test manifest_test.cc plugin_loader_test.cc)
target_compile_definitions(manifest_test PRIVATE GT_TEST_PLUGIN_DIR="${GT_TEST_PLUGIN_DIR}"
                           GT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
target_link_libraries(manifest_test PRIVATE GTest::gmock)  # HasSubstr
# The suite loads these at run time; `gt` is run by the command tests below.
add_dependencies(manifest_test ${GT_TEST_PLUGIN_TARGETS} gt_instruction_log gt_sharding gt_hotpath gt_compile gt_torch gt)

# Every shipped manifest must validate against the plugins this tree builds.
# GT_PLUGIN_PATH is cleared so that only the build tree's plugins count.
file(GLOB GT_SHIPPED_CONFIGS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/configs/*.yaml)
add_test(NAME configs_validate COMMAND $<TARGET_FILE:gt> validate ${GT_SHIPPED_CONFIGS})
set_tests_properties(configs_validate PROPERTIES ENVIRONMENT "GT_PLUGIN_PATH=")

# `gt inspect` lists the shipped plugins (files are listed in name order).
add_test(NAME gt_inspect_lists_plugins COMMAND $<TARGET_FILE:gt> inspect)
set_tests_properties(gt_inspect_lists_plugins PROPERTIES ENVIRONMENT "GT_PLUGIN_PATH="
  PASS_REGULAR_EXPRESSION "\n  instruction_log +modifier[^\n]*\n(.*\n)?  torch +backend")

# The listing shows each plugin's options with their defaults, from the descriptor alone.
add_test(NAME gt_inspect_lists_options COMMAND $<TARGET_FILE:gt> inspect)
set_tests_properties(gt_inspect_lists_options PROPERTIES ENVIRONMENT "GT_PLUGIN_PATH="
  PASS_REGULAR_EXPRESSION "instruction_log [^\n]*\n +options: [^\n]*flush_every=256 \\(int\\)(.*\n)*  torch [^\n]*\n +options: intra_op_threads=0 \\(int\\)")

# ... and a directory of broken plugins neither hides them nor stops it.
add_test(NAME gt_inspect_survives_bad_plugins COMMAND $<TARGET_FILE:gt> inspect)
set_tests_properties(gt_inspect_survives_bad_plugins PROPERTIES ENVIRONMENT "GT_PLUGIN_PATH=${GT_TEST_PLUGIN_DIR}"
  PASS_REGULAR_EXPRESSION "gt_wrong_abi.so: plugin ABI version 99 does not match host ABI version ${GT_PLUGIN_ABI_VERSION_FOR_PACKAGE}.*\n  torch ")

# `gt inspect torch` describes the backend's options from its descriptor.
add_test(NAME gt_inspect_torch COMMAND $<TARGET_FILE:gt> inspect torch)
set_tests_properties(gt_inspect_torch PROPERTIES ENVIRONMENT "GT_PLUGIN_PATH="
  PASS_REGULAR_EXPRESSION "\n    intra_op_threads +int +default 0 threads")

# `gt inspect --check` refuses a plugin built for another ABI: it says why ...
add_test(NAME gt_inspect_check_wrong_abi COMMAND $<TARGET_FILE:gt> inspect --check
         ${GT_TEST_PLUGIN_DIR}/gt_wrong_abi.so)
set_tests_properties(gt_inspect_check_wrong_abi PROPERTIES
  PASS_REGULAR_EXPRESSION "gt_wrong_abi.so: plugin ABI version 99 does not match host ABI version ${GT_PLUGIN_ABI_VERSION_FOR_PACKAGE}")
# ... and exits non-zero.
add_test(NAME gt_inspect_check_wrong_abi_fails COMMAND $<TARGET_FILE:gt> inspect --check
         ${GT_TEST_PLUGIN_DIR}/gt_wrong_abi.so)
set_tests_properties(gt_inspect_check_wrong_abi_fails PROPERTIES WILL_FAIL TRUE)
