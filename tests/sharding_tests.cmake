gt_add_test(sharding_test sharding_test.cc)
target_link_libraries(sharding_test PRIVATE gt_client)
add_dependencies(sharding_test gt-dispatcher gt-worker gt_torch gt_sharding)

# A collective with a failed operand: the workers run the test plugin
# "throwing" (manifest_tests.cmake builds it into GT_TEST_PLUGIN_DIR).
gt_add_test(sharding_failure_test sharding_failure_test.cc)
target_link_libraries(sharding_failure_test PRIVATE gt_client)
target_compile_definitions(sharding_failure_test PRIVATE GT_TEST_PLUGIN_DIR="${GT_TEST_PLUGIN_DIR}")
add_dependencies(sharding_failure_test gt-dispatcher gt-worker gt_torch gt_sharding gt_test_plugin_throwing)
