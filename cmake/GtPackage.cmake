# The installable plugin SDK: what `cmake --install` adds beyond the targets'
# own install() rules, so that an out-of-tree project can do
#
#   find_package(gt REQUIRED)
#   gt_add_modifier(my_stage my_stage.cc)   # builds gt_my_stage.so
#
# Installed layout (relative to the prefix):
#   include/gt/*.h                 the public plugin API (core/include/gt) and
#                                  the client header (client/include/gt/gt.h)
#   <libdir>/libgt_core.so         what every plugin links
#   <libdir>/gt/plugins/gt_*.so    the bundled plugins
#   <libdir>/cmake/gt/             this package: gtConfig.cmake, its version
#                                  file, the exported targets, gt_add_modifier
#   bin/gt, gt-dispatcher, gt-worker
#
# Exported targets (namespace gt::):
#   gt::core    libgt_core.so with the public headers; brings
#               prometheus-cpp::core, which gt/metrics.h includes
#   gt::plugin  what a plugin links: gt::core and C++20
#   gt::client  the C++ client (gt/gt.h, gt/nn.h): libgt_client.so and C++20
#               (client/CMakeLists.txt, which also installs the pkg-config
#               module <libdir>/pkgconfig/gt-client.pc)
include(CMakePackageConfigHelpers)

# The plugin ABI the installed headers speak, read from its one definition.
file(STRINGS ${PROJECT_SOURCE_DIR}/core/include/gt/plugin.h GT_ABI_LINE
     REGEX "^#define GT_PLUGIN_ABI_VERSION [0-9]+$")
string(REGEX REPLACE "^#define GT_PLUGIN_ABI_VERSION " "" GT_PLUGIN_ABI_VERSION_FOR_PACKAGE "${GT_ABI_LINE}")
if(NOT GT_PLUGIN_ABI_VERSION_FOR_PACKAGE MATCHES "^[0-9]+$")
  message(FATAL_ERROR "cannot read GT_PLUGIN_ABI_VERSION from core/include/gt/plugin.h")
endif()

# A plugin's one dependency. An INTERFACE target, so that the in-tree name
# (gt::plugin) and the installed one mean the same thing.
add_library(gt_plugin_api INTERFACE)
target_link_libraries(gt_plugin_api INTERFACE gt_core)
target_compile_features(gt_plugin_api INTERFACE cxx_std_20)
set_target_properties(gt_plugin_api PROPERTIES EXPORT_NAME plugin)
add_library(gt::plugin ALIAS gt_plugin_api)
set_target_properties(gt_core PROPERTIES EXPORT_NAME core)
add_library(gt::core ALIAS gt_core)

install(TARGETS gt_plugin_api EXPORT gtTargets)

set(GT_PACKAGE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gt)
# Relative to the prefix, so that the package works wherever it is installed.
set(GT_PLUGIN_INSTALL_RELDIR ${CMAKE_INSTALL_LIBDIR}/gt/plugins)

install(EXPORT gtTargets NAMESPACE gt:: DESTINATION ${GT_PACKAGE_INSTALL_DIR} FILE gtTargets.cmake)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/gtConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/gtConfig.cmake
  INSTALL_DESTINATION ${GT_PACKAGE_INSTALL_DIR}
  PATH_VARS GT_PLUGIN_INSTALL_RELDIR CMAKE_INSTALL_BINDIR CMAKE_INSTALL_INCLUDEDIR)
# 0.x: a minor version may change the plugin ABI, so only the same minor
# version is compatible (the host still checks kPluginAbiVersion at load).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/gtConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)

install(FILES
  ${CMAKE_BINARY_DIR}/cmake/gtConfig.cmake
  ${CMAKE_BINARY_DIR}/cmake/gtConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/gtPluginHelpers.cmake
  ${CMAKE_CURRENT_LIST_DIR}/gtPlugin.map
  DESTINATION ${GT_PACKAGE_INSTALL_DIR})
