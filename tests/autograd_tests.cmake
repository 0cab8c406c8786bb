# Autograd suites: gradient checks for every differentiable op and the tape's
# semantics (autograd_test), and an MLP trained by gt against the same MLP
# trained by LibTorch's own autograd (mlp_test). Both run real
# gt-dispatcher/gt-worker processes from the build tree.

gt_add_test(autograd_test autograd_test.cc autograd_gradient_test.cc)
target_link_libraries(autograd_test PRIVATE gt_client gt_libtorch)
add_dependencies(autograd_test gt-dispatcher gt-worker gt_torch)

# The one suite that uses torch's own autograd and optimizers: torch/torch.h
# lives under LibTorch's C++ API include folder (Debian:
# /usr/include/torch/csrc/api/include); its code is in libtorch_cpu.
find_path(GT_TORCH_API_INCLUDE torch/torch.h PATH_SUFFIXES torch/csrc/api/include REQUIRED)
gt_add_test(mlp_test mlp_test.cc)
target_include_directories(mlp_test SYSTEM PRIVATE ${GT_TORCH_API_INCLUDE})
target_link_libraries(mlp_test PRIVATE gt_client gt_libtorch)
add_dependencies(mlp_test gt-dispatcher gt-worker gt_torch)
