// An environment variable set for one scope (Loom reads LOOM_* when a
// communicator is created), then unset.
#pragma once

#include <cstdlib>

namespace loom::testing {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace loom::testing
