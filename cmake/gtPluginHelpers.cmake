# gt_add_modifier(<name> [NO_INSTALL] [TARGET <target>] [OUTPUT_DIRECTORY <dir>]
#                 <source>...)
#
# Builds the gt plugin <name>: a MODULE library target gt_<name> (or
# <target>), file gt_<name>.so (the file name the hosts look for when a
# manifest says `plugin: <name>`), in the current binary directory (or
# <dir>). gt builds its own plugins, test plugins included, with this same
# function, so every plugin gets the same link rules. It links gt::plugin,
# hides every symbol except the two that GT_PLUGIN() exports, and refuses to
# link with undefined symbols (a missing symbol is a build error here rather
# than a dlopen failure in a host).
#
# Unless NO_INSTALL is given, `cmake --install` puts it in
# <prefix>/<libdir>/gt/plugins, where a gt installed to the same prefix finds
# it without GT_PLUGIN_PATH.
#
# The same function builds a backend plugin: the kind is the descriptor's,
# not the build's.
include_guard(GLOBAL)
include(GNUInstallDirs)

function(gt_add_modifier name)
  cmake_parse_arguments(PARSE_ARGV 1 GT_ARG "NO_INSTALL" "TARGET;OUTPUT_DIRECTORY" "")
  set(sources ${GT_ARG_UNPARSED_ARGUMENTS})
  if(NOT sources)
    message(FATAL_ERROR "gt_add_modifier(${name}): no source files")
  endif()
  if(NOT name MATCHES "^[a-z][a-z0-9_]*$")
    message(FATAL_ERROR "gt_add_modifier(${name}): a plugin name is lower-case letters, digits and '_'")
  endif()
  set(target gt_${name})
  if(GT_ARG_TARGET)
    set(target ${GT_ARG_TARGET})
  endif()
  set(version_script ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/gtPlugin.map)
  add_library(${target} MODULE ${sources})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME gt_${name}
    SUFFIX ".so"
    CXX_EXTENSIONS OFF
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    # Installed in <libdir>/gt/plugins: libgt_core is two levels up.
    INSTALL_RPATH "$ORIGIN/../..")
  if(GT_ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${GT_ARG_OUTPUT_DIRECTORY})
  endif()
  target_link_libraries(${target} PRIVATE gt::plugin)
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_link_options(${target} PRIVATE "LINKER:--no-undefined"
                        "LINKER:--version-script=${version_script}")
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${version_script})
  endif()
  if(NOT GT_ARG_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/gt/plugins)
  endif()
endfunction()
