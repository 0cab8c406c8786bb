# Core suites: the IR and wire protocol (no processes), and the conformance
# test that runs every op through real gt-dispatcher/gt-worker processes and
# compares it with in-process LibTorch (docs: plugins/torch/README.md).

gt_add_test(ir_test ir_test.cc)

gt_add_test(conformance_test conformance_test.cc)
target_link_libraries(conformance_test PRIVATE gt_client gt_libtorch)
# The hosts it starts and the backend plugin they load come from the build tree.
add_dependencies(conformance_test gt-dispatcher gt-worker gt_torch)

# The sequence code the hotpath and compile stages share, in-process.
gt_add_test(sequence_test sequence_test.cc)
target_link_libraries(sequence_test PRIVATE gt_sequence)
