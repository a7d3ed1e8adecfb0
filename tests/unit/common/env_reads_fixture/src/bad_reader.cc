// Input of config_env_reads_rule_catches_violations (read as text, never
// compiled): three of the functions below break the rule check_env_reads.cmake
// keeps, and the check must name each; the last one is allowed.
#include <cstdlib>

const char* direct() { return std::getenv("LOOM_UNDECLARED_DIRECT"); }
const char* byName(const char* name) { return std::getenv(name); }
const char* undeclared() { return loom::readKnob("LOOM_UNDECLARED_KNOB"); }
const char* allowed() { return std::getenv("OPENBLAS_CORETYPE"); }
