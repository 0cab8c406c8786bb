# Observability: the written metrics spec (docs/METRICS.md) against what real
# hosts export, the dispatcher's Prometheus service discovery, the Grafana
# dashboards evaluated by a real Prometheus, and `gt top`.

find_program(GT_PROMETHEUS prometheus)
find_program(GT_PROMTOOL promtool)

gt_add_test(observability_test observability_test.cc dashboard_test.cc)
target_link_libraries(observability_test PRIVATE gt_service_common)
# GCC 12 reports -Wdangling-pointer inside Boost.PropertyTree's own
# templates (a false positive in a third-party header), not in gt's code.
target_compile_options(observability_test PRIVATE -Wno-dangling-pointer)
target_compile_definitions(observability_test PRIVATE
  BOOST_BIND_GLOBAL_PLACEHOLDERS  # Boost.PropertyTree's deprecated boost/bind.hpp: no notice
  GT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
  # Empty when Prometheus is not installed: the tests that need it skip.
  GT_PROMETHEUS_BIN="$<$<BOOL:${GT_PROMETHEUS}>:${GT_PROMETHEUS}>")
# The hosts, the plugins they load and `gt` come from the build tree.
add_dependencies(observability_test gt gt-dispatcher gt-worker gt_torch gt_instruction_log gt_hotpath gt_compile gt_sharding)

# The shipped Prometheus configuration is valid.
if(GT_PROMTOOL)
  add_test(NAME prometheus_config_check COMMAND ${GT_PROMTOOL} check config ${PROJECT_SOURCE_DIR}/configs/prometheus.yml)
else()
  message(STATUS "promtool not found: prometheus_config_check is not run (scripts/setup.sh installs prometheus)")
endif()
