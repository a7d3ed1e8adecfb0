// Every algorithm Loom has, for the communicator's selection.
#pragma once

#include <vector>

#include "algorithms/algorithm.h"

namespace loom::algo {

const std::vector<AlgorithmInfo>& allAlgorithms();

}  // namespace loom::algo
