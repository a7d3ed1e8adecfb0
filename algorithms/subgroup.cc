#include "algorithms/subgroup.h"

#include <algorithm>

namespace loom::algo {

Subgroup::Subgroup(const AlgoContext& parent, const std::vector<int>& members, bool singleHost)
    : members_(members), links_(*parent.links, members), ctx_(parent) {
  ctx_.rank = static_cast<int>(std::find(members.begin(), members.end(), parent.rank) - members.begin());
  ctx_.nranks = static_cast<int>(members.size());
  ctx_.links = &links_;
  ctx_.singleHost = singleHost;
  ctx_.hosts = nullptr;
  // The bulletin's rounds involve every rank of the communicator; a subset
  // posting alone would break its round contract.
  ctx_.bulletin = nullptr;
}

std::string Subgroup::describe() const {
  std::string text = "ranks ";
  for (size_t i = 0; i < members_.size(); ++i) text += (i ? "," : "") + std::to_string(members_[i]);
  return text;
}

}  // namespace loom::algo
