// One collective call of the integration matrix, seen from one rank: its
// parameters (CaseSpec), and a CaseRun that owns the rank's guarded buffers,
// fills them, calls the public API and checks every byte it may and may not
// touch against a reference computed here, independently of the library.
//
// Inputs are small integers drawn from (seed, rank, index) so that every
// dtype's sum/prod/avg is exact in any reduction order:
//   sum/max/min/avg and data movement: signed types [-4, 4], unsigned [0, 8]
//   prod: signed {-2, -1, 1, 2}, unsigned {1, 2}  (|prod| <= 2^8 for 8 ranks)
// The reference folds the inputs of every rank in int64 and converts; integer
// avg is the C quotient sum / nranks (truncated toward zero). Exactness (and
// the poison value 99 never being a result) holds up to kMaxRanks ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <loom/loom.h>

namespace loom::integration {

constexpr int kMaxRanks = 8;

enum class Coll { kAllReduce, kBroadcast, kReduce, kReduceScatter, kAllGather };
constexpr int kNumColls = 5;

const char* collName(Coll coll);
const char* dtypeName(loomDataType_t dtype);
const char* opName(loomRedOp_t op);
bool collTakesOp(Coll coll);
bool collTakesRoot(Coll coll);

struct CaseSpec {
  Coll coll = Coll::kAllReduce;
  loomDataType_t dtype = loomFloat32;
  loomRedOp_t op = loomSum;  // ignored by Broadcast and AllGather
  size_t count = 0;          // the API's count (recvcount for ReduceScatter, sendcount for AllGather)
  bool inPlace = false;      // at NCCL's in-place position (see loom.h)
  bool useBcast = false;     // in-place Broadcast through loomBcast instead of loomBroadcast
  bool misaligned = false;   // buffers start 1 (sendbuff) / 3 (recvbuff) elements past a 64-byte boundary
  int root = 0;              // Broadcast and Reduce
  uint64_t seed = 1;
};

// "AllReduce int32 sum count=7 out-of-place root=0 seed=3" (for SCOPED_TRACE).
std::string describe(const CaseSpec& spec);

// A host allocation with guard bytes on both sides, filled with a known
// pattern so that writes outside [data, data + bytes) can be detected.
// data() lies `offset` bytes past a 64-byte boundary.
class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 64;
  static constexpr size_t kMaxOffset = 64;
  explicit GuardedBuffer(size_t bytes, size_t offset = 0);
  uint8_t* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // EXPECTs that both guards still hold their pattern; `what` names the buffer.
  void expectGuardsIntact(const char* what) const;

 private:
  size_t bytes_;
  std::unique_ptr<uint8_t[]> storage_;  // over-allocated so that data_ can be aligned
  uint8_t* data_;
};

class CaseRun {
 public:
  CaseRun(const CaseSpec& spec, int rank, int nranks);
  CaseRun(CaseRun&&) noexcept;
  CaseRun& operator=(CaseRun&&) noexcept;
  ~CaseRun();

  // Allocates and fills the rank's buffers (inputs, and a poison value in
  // every output element so that unwritten output is detected).
  void prepare();
  // Calls the collective; the buffers must stay alive until it completes
  // (at return for a NULL stream, after loomStreamSynchronize otherwise).
  loomResult_t launch(loomComm_t comm, loomStream_t stream);
  // EXPECTs: output equals the reference, bytes outside the output are
  // untouched (guards, non-root Reduce recvbuff, out-of-place sendbuff).
  void verify();

  const CaseSpec& spec() const { return spec_; }
  std::string trace() const;  // describe(spec) plus rank and world size

 private:
  struct Buffers;
  CaseSpec spec_;
  int rank_;
  int nranks_;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace loom::integration
