gt_add_test(sharding_test sharding_test.cc)
target_link_libraries(sharding_test PRIVATE gt_client)
add_dependencies(sharding_test gt-dispatcher gt-worker gt_torch gt_sharding)
