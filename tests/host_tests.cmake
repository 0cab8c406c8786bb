gt_add_test(host_test host_test.cc host_unit_test.cc host_worker_test.cc)
add_dependencies(host_test gt-dispatcher gt-worker gt_torch gt_instruction_log)

# Hot paths and compiled units (modifiers/hotpath, modifiers/compile).
add_executable(hotpath_client hotpath_client.cc)
target_link_libraries(hotpath_client PRIVATE gt_client)
set_target_properties(hotpath_client PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
gt_add_test(hotpath_test hotpath_test.cc)
add_dependencies(hotpath_test hotpath_client gt-dispatcher gt-worker gt_torch gt_instruction_log gt_hotpath gt_compile
                 gt_sharding gt_test_plugin_throwing)
target_compile_definitions(hotpath_test PRIVATE GT_TEST_PLUGIN_DIR="${GT_TEST_PLUGIN_DIR}")
# Compiled-unit strategies in the torch backend, in-process.
gt_add_test(unit_strategy_test unit_strategy_test.cc)
target_link_libraries(unit_strategy_test PRIVATE gt_torch_runtime)
# The unit cache budget's bookkeeping, without LibTorch.
gt_add_test(unit_budget_test unit_budget_test.cc ${CMAKE_SOURCE_DIR}/plugins/torch/unit_budget.cc)
target_include_directories(unit_budget_test PRIVATE ${CMAKE_SOURCE_DIR}/plugins/torch)
# gt::worker_stats() against the hosts' /metrics (hotpath and compile in the dispatcher).
gt_add_test(stats_test stats_test.cc)
target_link_libraries(stats_test PRIVATE gt_client)
add_dependencies(stats_test gt-dispatcher gt-worker gt_torch gt_hotpath gt_compile)
# Exit with work pending (embedded and connected): tests/exit_client.cc in fresh processes.
add_executable(exit_client exit_client.cc)
target_link_libraries(exit_client PRIVATE gt_client)
set_target_properties(exit_client PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
gt_add_test(exit_test exit_test.cc)
add_dependencies(exit_test exit_client gt-dispatcher gt-worker gt_torch)

# The worker's fair queue on its own (core/worker/fair_queue.h).
gt_add_test(fair_queue_test fair_queue_test.cc)

# The dispatcher's lost notice to a worker on its own (core/host/worker_lost_notice.h).
gt_add_test(lost_notice_test lost_notice_test.cc)
