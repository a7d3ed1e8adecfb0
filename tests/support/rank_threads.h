// Runs one function per rank, each on its own thread, and joins them all.
#pragma once

#include <functional>

namespace loom::testing {

void runRankThreads(int nranks, const std::function<void(int rank)>& body);

}  // namespace loom::testing
