// A subset of the ranks seen as a communicator of its own, so that the
// existing algorithms (written against rank, nranks and Links) run on it
// unchanged: sub-rank i is members[i], and the links are the parent's,
// renumbered. The hierarchical all-reduce runs rings over a host's ranks and
// over one rank per host this way.
//
// All members must run the same algorithms over the same subgroup in the
// same order (the parent's connections carry them; a connection's chunks stay
// in order). Error messages from the primitives name sub-ranks, so callers
// add context naming the members.
#pragma once

#include <string>
#include <vector>

#include "algorithms/algorithm.h"

namespace loom::algo {

class Subgroup {
 public:
  // `members` (global ranks, in sub-rank order) must contain parent.rank and
  // outlive the subgroup. The context copies the parent's wait, chunk size,
  // protocol and progress counter; it has no host layout (rank-order rings).
  Subgroup(const AlgoContext& parent, const std::vector<int>& members, bool singleHost);
  Subgroup(const Subgroup&) = delete;
  Subgroup& operator=(const Subgroup&) = delete;

  const AlgoContext& context() const { return ctx_; }
  // "ranks 0,2,4" for error messages.
  std::string describe() const;

 private:
  class MappedLinks final : public Links {
   public:
    MappedLinks(Links& parent, const std::vector<int>& members) : parent_(parent), members_(members) {}
    transport::SendConnection& sendTo(int peer) override { return parent_.sendTo(members_[static_cast<size_t>(peer)]); }
    transport::RecvConnection& recvFrom(int peer) override {
      return parent_.recvFrom(members_[static_cast<size_t>(peer)]);
    }

   private:
    Links& parent_;
    const std::vector<int>& members_;
  };

  const std::vector<int>& members_;
  MappedLinks links_;
  AlgoContext ctx_;
};

// Runs `args` on the subgroup with the ring or chain algorithm of its
// collective (args.root is a sub-rank). Its members hold partial results of
// `avgRanks` ranks in all (a rail carrying whole hosts' sums), so kAvg sums
// and then divides by avgRanks, where a result lands (every member; the
// root alone for reduce). Errors name the members.
Status runOnSubgroup(const CollArgs& args, const Subgroup& group, int avgRanks);

}  // namespace loom::algo
