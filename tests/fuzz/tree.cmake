# libFuzzer targets (docs/FUZZING.md), included by the root CMakeLists.txt
# when configured with -DGT_FUZZ=ON. scripts/fuzz.sh configures such a tree
# (build-fuzz/) with clang and builds only `gt_fuzz`: the targets, the
# libraries they run and the plugins the dispatcher target loads. The rest of
# the project (LibTorch targets included) is configured but never built there.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "GT_FUZZ needs clang (CC=clang CXX=clang++): libFuzzer ships with it")
endif()

# UB aborts like a crash, so that libFuzzer saves the input. vptr is off: a
# plugin's hidden-visibility copy of gt::Stage's type info differs from the
# host's, which vptr would report on every stage call.
set(GT_FUZZ_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-sanitize=vptr)

add_custom_target(gt_fuzz)

# Code the targets run: coverage for libFuzzer's guidance, plus the sanitizers.
function(gt_fuzz_instrument)
  foreach(target ${ARGN})
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link ${GT_FUZZ_SANITIZERS} -fno-omit-frame-pointer)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "MODULE_LIBRARY")
      # The sanitizer runtimes live in the fuzz executable, which exports them
      # to what it loads: a plugin leaves those symbols undefined (this undoes
      # gt_add_modifier's --no-undefined, for this tree only).
      target_link_options(${target} PRIVATE "LINKER:-z,undefs")
    endif()
    add_dependencies(gt_fuzz ${target})
  endforeach()
endfunction()

# gt_add_fuzzer(<name> <source>...): executable fuzz/gt_fuzz_<name>.
function(gt_add_fuzzer name)
  set(target gt_fuzz_${name})
  add_executable(${target} ${ARGN})
  target_compile_options(${target} PRIVATE -fsanitize=fuzzer ${GT_FUZZ_SANITIZERS} -fno-omit-frame-pointer)
  target_link_options(${target} PRIVATE -fsanitize=fuzzer ${GT_FUZZ_SANITIZERS})
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  add_dependencies(gt_fuzz ${target})
endfunction()

# gt_client as client/CMakeLists.txt builds it (its sources and links), less
# the root's build-order dependency on the plugins the embedded default
# loads: those include gt_torch, which would pull LibTorch into this tree.
get_target_property(GT_FUZZ_CLIENT_SOURCES gt_client SOURCES)
get_target_property(GT_FUZZ_CLIENT_DIR gt_client SOURCE_DIR)
get_target_property(GT_FUZZ_CLIENT_LIBS gt_client LINK_LIBRARIES)
list(TRANSFORM GT_FUZZ_CLIENT_SOURCES PREPEND ${GT_FUZZ_CLIENT_DIR}/)
add_library(gt_fuzz_client SHARED ${GT_FUZZ_CLIENT_SOURCES})
target_include_directories(gt_fuzz_client PUBLIC ${GT_FUZZ_CLIENT_DIR}/include)
target_link_libraries(gt_fuzz_client PUBLIC ${GT_FUZZ_CLIENT_LIBS})

gt_fuzz_instrument(gt_core gt_fuzz_client gt_sequence gt_sharding_runtime gt_hotpath gt_compile gt_instruction_log)

# The sharding stage as its plugin registers it, with a rendezvous that hosts
# no store (its real one is LibTorch's TCPStore; no worker runs a collective
# here). Its own directory, put first on GT_PLUGIN_PATH by the targets that
# load it, so that it stands in for gt_sharding.so.
set(GT_FUZZ_PLUGIN_DIR ${CMAKE_BINARY_DIR}/fuzz/plugins)
gt_add_modifier(sharding NO_INSTALL TARGET gt_fuzz_sharding_plugin OUTPUT_DIRECTORY ${GT_FUZZ_PLUGIN_DIR}
                ${PROJECT_SOURCE_DIR}/modifiers/sharding/plugin.cc ${CMAKE_CURRENT_LIST_DIR}/no_rendezvous.cc)
target_link_libraries(gt_fuzz_sharding_plugin PRIVATE gt_sharding_runtime)
gt_fuzz_instrument(gt_fuzz_sharding_plugin)

set(GT_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})

gt_add_fuzzer(codec ${GT_FUZZ_DIR}/codec_fuzzer.cc)
target_link_libraries(gt_fuzz_codec PRIVATE gt_core_internal)

gt_add_fuzzer(manifest ${GT_FUZZ_DIR}/manifest_fuzzer.cc)
target_link_libraries(gt_fuzz_manifest PRIVATE gt_core_internal)
target_compile_definitions(gt_fuzz_manifest PRIVATE GT_FUZZ_PLUGIN_DIR="${GT_FUZZ_PLUGIN_DIR}")

gt_add_fuzzer(signal_config ${GT_FUZZ_DIR}/signal_config_fuzzer.cc)
target_link_libraries(gt_fuzz_signal_config PRIVATE gt_fuzz_client)

gt_add_fuzzer(dispatcher ${GT_FUZZ_DIR}/dispatcher_fuzzer.cc ${GT_FUZZ_DIR}/program.cc)
target_link_libraries(gt_fuzz_dispatcher PRIVATE gt_core_internal)
target_compile_definitions(gt_fuzz_dispatcher PRIVATE GT_FUZZ_PLUGIN_DIR="${GT_FUZZ_PLUGIN_DIR}")

# Writes the seed corpora (tests/fuzz/corpus/) from gt's own encoders; run
# by hand after a format change (docs/FUZZING.md). It links the sanitizer
# runtimes that the instrumented libgt_core.so needs, but no libFuzzer.
add_executable(gt_fuzz_make_seeds ${GT_FUZZ_DIR}/make_seeds.cc ${GT_FUZZ_DIR}/program.cc)
target_include_directories(gt_fuzz_make_seeds PRIVATE ${GT_FUZZ_DIR})
target_link_options(gt_fuzz_make_seeds PRIVATE -fsanitize=fuzzer-no-link ${GT_FUZZ_SANITIZERS})
target_link_libraries(gt_fuzz_make_seeds PRIVATE gt_core_internal)
set_target_properties(gt_fuzz_make_seeds PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
