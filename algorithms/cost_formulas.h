// The cost shapes (cost.h) of the built-in algorithms, one CostFn per
// registry record; the formulas and their reasoning are in cost_formulas.cc.
#pragma once

#include "algorithms/cost.h"

namespace loom::algo {

Cost ringAllReduceCost(const CostQuery& q);
Cost ringReduceScatterCost(const CostQuery& q);
Cost ringAllGatherCost(const CostQuery& q);
Cost recursiveDoublingCost(const CostQuery& q);
Cost halvingDoublingCost(const CostQuery& q);
Cost doubleBinaryTreeCost(const CostQuery& q);
Cost oneShotCost(const CostQuery& q);
Cost windowAllReduceCost(const CostQuery& q);
Cost directAllReduceCost(const CostQuery& q);
Cost deterministicAllReduceCost(const CostQuery& q);  // and reduce: the same two hops
Cost deterministicReduceScatterCost(const CostQuery& q);
Cost chainBroadcastCost(const CostQuery& q);
Cost chainReduceCost(const CostQuery& q);
Cost treeBroadcastCost(const CostQuery& q);
Cost treeReduceCost(const CostQuery& q);
Cost hierarchicalAllReduceCost(const CostQuery& q);

// ceil(log2(n)) for n >= 1.
int ceilLog2(int n);

}  // namespace loom::algo
