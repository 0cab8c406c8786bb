# Core suites: the IR and wire protocol (no processes), and the conformance
# test that runs every op through real gt-dispatcher/gt-worker processes and
# compares it with in-process LibTorch (docs: plugins/torch/README.md).

gt_add_test(ir_test ir_codec_test.cc ir_shape_test.cc)

# The layout codec (gt/layout.h) and the inspect attribute, round trips and malformed input.
gt_add_test(layout_codec_test layout_codec_test.cc)

# The distributed checkpoint's plan (gt/checkpoint_plan.h): line forms and checkpoint_root paths.
gt_add_test(checkpoint_plan_test checkpoint_plan_test.cc)

gt_add_test(conformance_test conformance_test.cc)
target_link_libraries(conformance_test PRIVATE gt_client gt_libtorch)
# The hosts it starts and the backend plugin they load come from the build tree.
add_dependencies(conformance_test gt-dispatcher gt-worker gt_torch)

# The sequence code the hotpath and compile stages share, in-process.
gt_add_test(sequence_test sequence_test.cc)
target_link_libraries(sequence_test PRIVATE gt_sequence)

# The compile stage in-process (its sources compiled in: the plugin itself is
# a module library), fed marked regions directly.
gt_add_test(compile_stage_test compile_stage_test.cc ${PROJECT_SOURCE_DIR}/modifiers/compile/compile.cc)
target_include_directories(compile_stage_test PRIVATE ${PROJECT_SOURCE_DIR}/modifiers/compile)
target_link_libraries(compile_stage_test PRIVATE gt_sequence prometheus-cpp::core)

# The dispatcher's parts (router, worker registry, sync tracking, the
# failed-tensor ledger, typed op attributes) in-process, without a socket.
gt_add_test(router_test router_test.cc)
