// The element count an element-wise optimizer is bound to: fixed by its first
// step (or by a loaded state), then every step must pass that many elements,
// so state allocated for one model or ZeRO shard is never applied to another.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace loom::ddp::optim {

class ElementCount {
 public:
  // Checks one step's spans; binds the count on the first call.
  void checkStep(const std::string& who, size_t params, size_t grads) {
    if (params != grads) {
      throw std::invalid_argument(who + "::step: params has " + std::to_string(params) + " elements but grads has " +
                                  std::to_string(grads));
    }
    bind(who + "::step: params", params);
  }
  // Binds (or checks) the count; `what` names the argument in the error.
  void bind(const std::string& what, size_t count) {
    if (bound_ && count != count_) {
      throw std::invalid_argument(what + " has " + std::to_string(count) + " elements, but this optimizer holds state for " +
                                  std::to_string(count_));
    }
    count_ = count;
    bound_ = true;
  }
  bool bound() const { return bound_; }
  size_t count() const { return count_; }

 private:
  size_t count_ = 0;
  bool bound_ = false;
};

}  // namespace loom::ddp::optim
