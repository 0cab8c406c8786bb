gt_add_test(host_test host_test.cc)
add_dependencies(host_test gt-dispatcher gt-worker gt_torch gt_instruction_log)
