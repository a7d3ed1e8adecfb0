// Every trainable tensor of a model lives in one flat float buffer (and its
// gradient in a second one), in registration order, as PyTorch's DDP views
// parameters through flat buckets. Layers hold views (ParamInfo) into it.
//
// Why flat: DDP's buckets are then contiguous ranges of the gradient buffer
// (reverse registration order = a range read from the end), so a bucket is
// all-reduced in place with no copy; ZeRO shards are plain sub-ranges; an
// optimizer updates a span; a checkpoint writes two arrays.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace loom::ddp {

struct ParamInfo {
  std::string name;
  std::vector<size_t> shape;
  size_t offset = 0;  // first element in the flat buffers
  size_t size = 0;    // product of shape
};

class ParameterStore {
 public:
  // Registers a parameter; allowed only before finalize(). Registration order
  // is forward order (the first layer's weight first). Returns its index.
  size_t add(std::string name, std::vector<size_t> shape);
  // Allocates both flat buffers, zero-filled. Parameters are packed back to
  // back (no padding), so bucket ranges are contiguous.
  void finalize();
  bool finalized() const { return finalized_; }

  size_t count() const { return params_.size(); }
  const ParamInfo& info(size_t index) const { return params_.at(index); }
  size_t totalSize() const { return total_; }

  std::span<float> values() { return values_; }
  std::span<const float> values() const { return values_; }
  std::span<float> grads() { return grads_; }
  std::span<const float> grads() const { return grads_; }
  std::span<float> value(size_t index);
  std::span<float> grad(size_t index);

  void zeroGrads();

  // Backward calls markGradReady(i) once parameter i's gradient is complete
  // for this step; DDP installs a hook here to launch bucket all-reduces
  // while the rest of backward runs. Without a hook it does nothing.
  using GradReadyHook = std::function<void(size_t index)>;
  void setGradReadyHook(GradReadyHook hook) { hook_ = std::move(hook); }
  void markGradReady(size_t index);

 private:
  std::vector<ParamInfo> params_;
  std::vector<float> values_;
  std::vector<float> grads_;
  size_t total_ = 0;
  bool finalized_ = false;
  GradReadyHook hook_;
};

}  // namespace loom::ddp
