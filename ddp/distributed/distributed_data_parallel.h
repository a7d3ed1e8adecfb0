// Data-parallel training over Loom, modelled on PyTorch's
// DistributedDataParallel: every rank holds the whole model; after backward
// each gradient holds the average over ranks, so identical optimizer steps
// keep the replicas identical.
//
//   DistributedDataParallel ddp(comm, store);    // broadcasts rank 0's parameters
//   for (...) {
//     store.zeroGrads();
//     model.forward(x); model.loss(y);
//     model.backward();           // markGradReady(i) launches bucket all-reduces
//     ddp.finishGradientSync();   // waits; grads are now averaged
//     optimizer.step(store.values(), store.grads());
//   }
//
// Buckets (bucket_plan.h) are reduced in index order on every rank, each
// asynchronously on its own Loom stream as soon as all its gradients are
// ready and every earlier bucket has been launched, so communication
// overlaps the rest of backward. The model must not touch a launched
// bucket's gradients until finishGradientSync() returns.
//
// Threading: markGradReady (from backward) and finishGradientSync must come
// from one thread; a helper thread waits for finished buckets (it sleeps in
// loomStreamSynchronize), decompresses them (hooks) and timestamps them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ddp/distributed/bucket_plan.h"
#include "ddp/distributed/half_precision.h"
#include "ddp/parameter_store.h"
#include "loom/loom.h"

namespace loom::ddp {

// PyTorch's fp16_compress_hook / bf16_compress_hook: each rank divides its
// bucket by the world size, rounds it to 16 bits, the 16-bit buffers are
// summed (Loom adds in fp32 and rounds each result to 16 bits), and the sum
// is widened back into the fp32 gradients. Halves the bytes on the wire.
enum class CommHook { kNone, kFp16Compress, kBf16Compress };

struct DdpOptions {
  size_t bucketCapBytes = 25u << 20;
  size_t firstBucketCapBytes = 1u << 20;
  // 0: PyTorch's plan. Otherwise the cap of the last bucket, whose
  // all-reduce cannot overlap backward (bucket_plan.h): a small one keeps
  // the gradients produced earlier out of that wait.
  size_t lastBucketCapBytes = 0;
  // 0: buckets close at their caps (PyTorch's plan). Otherwise a parameter of
  // at least this many bytes closes its bucket, so a large weight's
  // all-reduce need not wait for the next layer's input gradient
  // (bucket_plan.h).
  size_t closeAfterBytes = 0;
  // false: nothing is reduced during backward; finishGradientSync launches
  // every bucket and waits (the baseline for the overlap figure).
  bool overlap = true;
  CommHook hook = CommHook::kNone;
};

class DistributedDataParallel {
 public:
  // `store` must be finalized and have the same layout on every rank (checked:
  // std::invalid_argument naming the rank). Collective: broadcasts rank 0's
  // parameter values (blocking), plans the buckets and installs the store's
  // grad-ready hook. `comm` stays owned by the caller and must outlive this.
  // Its chunk size (loomConfig_t.chunkBytes at loomCommInitRankConfig) sets
  // how many hand-offs between ranks each bucket's all-reduce takes
  // (train_demo --chunk-mb; docs/user-guide.md has measurements).
  DistributedDataParallel(loomComm_t comm, ParameterStore& store, DdpOptions options = {});
  // Waits for outstanding bucket work and removes the hook.
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Waits until every bucket's all-reduce is done; the grads then hold the
  // average over ranks. Throws std::runtime_error with Loom's message if a
  // collective failed, or naming the parameters that never got
  // markGradReady this step (after waiting for the buckets already
  // launched). Inside noSync() it returns at once: nothing is reduced.
  void finishGradientSync();

  // PyTorch's no_sync(): while the guard lives, backward only accumulates
  // gradients locally (no communication); the next synchronized backward
  // then reduces the accumulated sums. Guards may nest.
  class NoSyncGuard {
   public:
    NoSyncGuard(NoSyncGuard&& other) noexcept;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;
    ~NoSyncGuard();

   private:
    friend class DistributedDataParallel;
    explicit NoSyncGuard(DistributedDataParallel* ddp);
    DistributedDataParallel* ddp_;
  };
  [[nodiscard]] NoSyncGuard noSync();

  // A contiguous range of the flat gradient buffer: parameters firstParam..
  // lastParam (inclusive); bucket 0 holds the last-registered parameters.
  using BucketInfo = BucketRange;  // {firstParam, lastParam, offset, size}
  const std::vector<BucketInfo>& buckets() const { return buckets_; }
  // Buckets of the current step whose reduction has finished (grads final);
  // safe to call from any thread. Lets tests see overlap happen.
  size_t finishedBuckets() const;

  // For the overlap figure, summed over steps. commSeconds: wall time during
  // which at least one bucket was in flight (launch to done, including
  // waiting for peers and decompression); exposedSeconds: the part of it
  // after finishGradientSync was called, when backward was over (with
  // overlap off, all of it). The caller's own wake-up after the last bucket
  // is done is not communication and not counted, so exposed <= comm.
  // hiddenShare() = 1 - exposed/comm, clamped to [0, 1]: the share of
  // communication time that backward hid.
  //
  // What bounds it: communication overlaps backward only between the first
  // bucket's launch and finishGradientSync's call (windowSeconds; 0 with
  // overlap off), and the last bucket, launched when backward produced its
  // final gradient, runs after that (tailSeconds: its run, from its launch
  // or the end of the bucket before it, whichever is later, to its end,
  // counted from the finishGradientSync call on). So
  // maxHiddenShare() = min(window, comm - tail) / comm bounds hiddenShare():
  // a model whose backward is short next to its all-reduces cannot hide
  // them, whatever the buckets.
  struct CommStats {
    double commSeconds = 0, exposedSeconds = 0;
    double windowSeconds = 0, tailSeconds = 0;
    size_t steps = 0;
    double hiddenShare() const;
    double maxHiddenShare() const;
  };
  CommStats stats() const;
  void resetStats();

 private:
  using Clock = std::chrono::steady_clock;
  struct BucketState {
    size_t pending = 0;       // gradients not yet marked ready this step
    loomStream_t stream = nullptr;
    std::vector<uint16_t> compressed;  // hook buffer
    Clock::time_point launched, done;
  };

  void onGradReady(size_t index);
  void launchReadyBuckets();
  void launch(size_t bucket);
  void watcherLoop();
  void waitForLaunched();  // until every launched bucket is done
  void resetStep();
  std::string where() const;  // "rank R" for messages
  void endNoSync();

  loomComm_t comm_;
  ParameterStore& store_;
  DdpOptions options_;
  int rank_ = 0, nranks_ = 1;
  std::vector<BucketInfo> buckets_;
  std::vector<size_t> bucketOfParam_;
  std::vector<BucketState> state_;

  // Step state, touched only by the backward thread.
  std::vector<uint8_t> marked_;
  size_t markedCount_ = 0;
  size_t nextLaunch_ = 0;
  int noSyncDepth_ = 0;

  // Shared with the watcher thread.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<size_t> toWatch_;
  size_t finished_ = 0;   // buckets done this step
  std::string error_;     // first failure this step
  bool stopping_ = false;
  CommStats stats_;
  std::thread watcher_;
};

}  // namespace loom::ddp
