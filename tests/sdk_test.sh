#!/usr/bin/env bash
# The plugin SDK as a third party uses it (ctest: sdk_install):
#   1. install this build into a fresh prefix (cmake --install --prefix);
#   2. check what was installed: the public headers and no internal ones, the
#      libraries, the services, the bundled plugins, the CMake package;
#   3. configure and build examples/modifier-template and
#      examples/modifier-inject out of tree with find_package(gt)
#      (CMAKE_PREFIX_PATH=<prefix>), through ccache when there is one;
#   4. build tests/sdk_client (a C++ client program) against the install with
#      find_package(gt) + gt::client and with pkg-config gt-client, and run it;
#   5. run sdk_test_install: the installed hosts load the built plugins from
#      manifests and the tests look at their effect and their metrics.
# The work directory is wiped at the start and kept afterwards for a look.
set -euo pipefail

usage() {
  echo "usage: $0 --build-dir DIR --source-dir DIR --work-dir DIR --runner EXE" \
       "[--generator G] [--make-program P] [--cxx-compiler C] [--ccache PATH]" >&2
  exit 2
}

build_dir= source_dir= work_dir= runner= generator=Ninja make_program= cxx= ccache=
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$2 ;;
    --source-dir) source_dir=$2 ;;
    --work-dir) work_dir=$2 ;;
    --runner) runner=$2 ;;
    --generator) generator=$2 ;;
    --make-program) make_program=$2 ;;
    --cxx-compiler) cxx=$2 ;;
    --ccache) ccache=$2 ;;
    *) usage ;;
  esac
  shift 2 || usage
done
[[ -n $build_dir && -n $source_dir && -n $work_dir && -n $runner ]] || usage

step() { printf '\n== %s\n' "$*"; }
fail() { echo "sdk_test: FAILED: $*" >&2; exit 1; }

rm -rf "$work_dir"
mkdir -p "$work_dir"
work_dir=$(cd "$work_dir" && pwd -P)
prefix=$work_dir/prefix

step "install $build_dir into $prefix"
cmake --install "$build_dir" --prefix "$prefix" > "$work_dir/install.log" \
  || { cat "$work_dir/install.log"; fail "cmake --install"; }

step "installed layout"
for f in include/gt/plugin.h include/gt/stage.h include/gt/options.h include/gt/metrics.h \
         include/gt/instruction.h include/gt/op.h include/gt/dtype.h include/gt/status.h \
         include/gt/backend.h include/gt/gt.h \
         lib/libgt_core.so lib/libgt_client.so \
         lib/gt/plugins/gt_torch.so lib/gt/plugins/gt_instruction_log.so \
         lib/cmake/gt/gtConfig.cmake lib/cmake/gt/gtConfigVersion.cmake lib/cmake/gt/gtTargets.cmake \
         lib/cmake/gt/gtPluginHelpers.cmake lib/cmake/gt/gtPlugin.map lib/pkgconfig/gt-client.pc \
         bin/gt bin/gt-dispatcher bin/gt-worker; do
  [[ -e $prefix/$f ]] || fail "not installed: $f"
done
# core's rooms stay private: none of its headers (nor generated ones) installed.
for f in "$source_dir"/core/{ir,net,host,dispatcher,worker,embedded}/*.h; do
  [[ ! -e $prefix/include/$(basename "$f") && ! -e $prefix/include/gt/$(basename "$f") ]] \
    || fail "internal header installed: $(basename "$f")"
done
[[ -z $(find "$prefix/include" -name '*.pb.h') ]] || fail "generated wire headers installed"
echo "headers, libraries, services, bundled plugins and the CMake package are in place"

compiler_args=()
[[ -n $cxx ]] && compiler_args+=(-DCMAKE_CXX_COMPILER="$cxx")
[[ -n $make_program ]] && compiler_args+=(-DCMAKE_MAKE_PROGRAM="$make_program")
[[ -n $ccache ]] && compiler_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$ccache")

for example in modifier-template modifier-inject; do
  step "build examples/$example against the install (find_package(gt))"
  out=$work_dir/$example
  # A clean environment: only CMAKE_PREFIX_PATH says where gt is.
  env -u GT_PLUGIN_PATH cmake -S "$source_dir/examples/$example" -B "$out" -G "$generator" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" "${compiler_args[@]}" \
    > "$out.configure.log" 2>&1 || { cat "$out.configure.log"; fail "configure $example"; }
  cmake --build "$out" > "$out.build.log" 2>&1 || { cat "$out.build.log"; fail "build $example"; }
  tail -n 1 "$out.build.log"
done

template_so=$work_dir/modifier-template/gt_op_filter.so
inject_so=$work_dir/modifier-inject/gt_decompose.so
for so in "$template_so" "$inject_so"; do
  [[ -f $so ]] || fail "not built: $so"
  # Exactly the two GT_PLUGIN symbols are exported.
  exports=$(nm -D --defined-only "$so" | awk '{print $3}' | sort | tr '\n' ' ')
  [[ $exports == "gt_plugin_abi_version gt_plugin_descriptor " ]] || fail "$so exports: $exports"
  # It links the installed libgt_core, not the build tree's.
  grep -q "$prefix" "$(dirname "$so")/CMakeCache.txt" || fail "$so was not configured against $prefix"
done
echo "both plugins export only gt_plugin_abi_version and gt_plugin_descriptor"

# The C++ client from the install, both ways the README's C++ quick start
# gives: CMake (find_package(gt), gt::client) and pkg-config (gt-client).
# Each program runs on the embedded default, whose plugins the installed
# libgt_core finds beside itself.
client_src=$source_dir/tests/sdk_client
step "build a client program against the install with find_package(gt) and gt::client"
out=$work_dir/sdk-client-cmake
env -u GT_PLUGIN_PATH cmake -S "$client_src" -B "$out" -G "$generator" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" "${compiler_args[@]}" \
  > "$out.configure.log" 2>&1 || { cat "$out.configure.log"; fail "configure the client program"; }
cmake --build "$out" > "$out.build.log" 2>&1 || { cat "$out.build.log"; fail "build the client program"; }
grep -q "$prefix" "$out/CMakeCache.txt" || fail "the client program was not configured against $prefix"
env -u GT_PLUGIN_PATH GT_WORKERS=1 "$out/sdk_client" || fail "the client program built with CMake"

step "build a client program against the install with pkg-config"
[[ -f $prefix/lib/pkgconfig/gt-client.pc ]] || fail "not installed: lib/pkgconfig/gt-client.pc"
flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs gt-client) || fail "pkg-config gt-client"
echo "pkg-config --cflags --libs gt-client: $flags"
# shellcheck disable=SC2086  # the flags are words
"${cxx:-c++}" "$client_src/main.cc" $flags -o "$work_dir/sdk-client-pkgconfig" \
  > "$work_dir/sdk-client-pkgconfig.log" 2>&1 || { cat "$work_dir/sdk-client-pkgconfig.log"; fail "pkg-config build"; }
env -u GT_PLUGIN_PATH GT_WORKERS=1 "$work_dir/sdk-client-pkgconfig" || fail "the client program built with pkg-config"

step "installed gt inspect --check"
"$prefix/bin/gt" inspect --check "$template_so"

step "the installed hosts run the built plugins"
GT_SDK_PREFIX=$prefix \
GT_SDK_TEMPLATE_DIR=$work_dir/modifier-template \
GT_SDK_INJECT_DIR=$work_dir/modifier-inject \
  "$runner"
