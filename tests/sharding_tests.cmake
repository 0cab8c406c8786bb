gt_add_test(sharding_test sharding_test.cc sharding_shard_local_test.cc)
target_link_libraries(sharding_test PRIVATE gt_client)
add_dependencies(sharding_test gt-dispatcher gt-worker gt_torch gt_sharding)

# A session of its own (tensors before the first config; a collective with a
# failed operand): the workers run the test plugin "throwing"
# (manifest_tests.cmake builds it into GT_TEST_PLUGIN_DIR).
gt_add_test(sharding_session_test sharding_session_test.cc)
target_link_libraries(sharding_session_test PRIVATE gt_client)
target_compile_definitions(sharding_session_test PRIVATE GT_TEST_PLUGIN_DIR="${GT_TEST_PLUGIN_DIR}")
add_dependencies(sharding_session_test gt-dispatcher gt-worker gt_torch gt_sharding gt_test_plugin_throwing)

# The sharding stage in-process with a recording emitter: which instructions
# and collectives each row of the strategy table emits. No hosts, no LibTorch.
gt_add_test(sharding_strategy_test sharding_strategy_test.cc sharding_strategy_transformer_test.cc)
target_link_libraries(sharding_strategy_test PRIVATE gt_sharding_runtime)

# The stage's part of a distributed checkpoint: plans split by piece, paths kept under checkpoint_root.
gt_add_test(sharding_checkpoint_test sharding_checkpoint_test.cc)
target_link_libraries(sharding_checkpoint_test PRIVATE gt_sharding_runtime)

# redistribute / inspect from a raw-wire client that lies about its tensors,
# on four worker processes.
gt_add_test(redistribute_wire_test redistribute_wire_test.cc)
add_dependencies(redistribute_wire_test gt-dispatcher gt-worker gt_torch gt_sharding)

# gt::distributed from C++ against four worker processes.
gt_add_test(distributed_test distributed_test.cc)
target_link_libraries(distributed_test PRIVATE gt_client)
add_dependencies(distributed_test gt-dispatcher gt-worker gt_torch gt_sharding)

gt_add_test(fused_wire_test fused_wire_test.cc fused_wire_numerics_test.cc)
add_dependencies(fused_wire_test gt-dispatcher gt-worker gt_torch gt_sharding)
