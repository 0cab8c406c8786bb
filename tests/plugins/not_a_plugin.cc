// Test "plugin": a loadable shared library that exports no gt symbols, as
// any stray gt_*.so on the plugin path might be. The loader must refuse it
// with "not a gt plugin" and carry on.
extern "C" __attribute__((visibility("default"))) int gt_test_not_a_plugin_answer() { return 42; }
