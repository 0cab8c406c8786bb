# The torch backend's reuse of freed tensors and its flat tensor table, in-process.
gt_add_test(tensor_cache_test tensor_cache_test.cc)
target_link_libraries(tensor_cache_test PRIVATE gt_torch_runtime)
