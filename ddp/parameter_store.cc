#include "ddp/parameter_store.h"

#include <algorithm>
#include <stdexcept>

namespace loom::ddp {

size_t ParameterStore::add(std::string name, std::vector<size_t> shape) {
  if (finalized_) throw std::logic_error("ParameterStore::add(\"" + name + "\") after finalize()");
  size_t size = 1;
  for (size_t d : shape) size *= d;
  if (size == 0) throw std::invalid_argument("ParameterStore::add(\"" + name + "\"): a dimension is 0");
  params_.push_back(ParamInfo{std::move(name), std::move(shape), total_, size});
  total_ += size;
  return params_.size() - 1;
}

void ParameterStore::finalize() {
  if (finalized_) return;
  values_.assign(total_, 0.0f);
  grads_.assign(total_, 0.0f);
  finalized_ = true;
}

std::span<float> ParameterStore::value(size_t index) {
  const ParamInfo& p = params_.at(index);
  return std::span<float>(values_).subspan(p.offset, p.size);
}

std::span<float> ParameterStore::grad(size_t index) {
  const ParamInfo& p = params_.at(index);
  return std::span<float>(grads_).subspan(p.offset, p.size);
}

void ParameterStore::zeroGrads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

void ParameterStore::markGradReady(size_t index) {
  if (index >= params_.size()) throw std::out_of_range("ParameterStore::markGradReady: index out of range");
  if (hook_) hook_(index);
}

}  // namespace loom::ddp
