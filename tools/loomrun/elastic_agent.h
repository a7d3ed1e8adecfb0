// The elastic agent: loomrun under --nnodes MIN:MAX. Each node's loomrun
// meets the others at --rdzv-endpoint (rendezvous_server.h; the agent that
// can bind it hosts it), gets its node rank and the number of nodes of the
// round, and runs its local ranks with the torchrun environment of that
// round (WORLD_SIZE = nodes * local ranks, RANK, GROUP_RANK, MASTER_ADDR/PORT
// of node 0, TORCHELASTIC_RESTART_COUNT = the round this agent is in, counted
// from 0). When the server ends the round (a node left, joined, or had a
// rank fail) or one of its own ranks fails, the agent stops its ranks and
// joins the next round; the program is expected to resume from its last
// checkpoint, as train_demo does.
//
// --max-restarts counts as torchrun's: rounds ended by a failure or a node
// leaving use one restart; a round ended because a node joined does not.
#pragma once

#include <vector>

#include "tools/loomrun/loomrun_options.h"
#include "tools/loomrun/signal_channel.h"

namespace loom::launcher {

// Runs the job until it finishes, fails past --max-restarts, the rendezvous
// gives up, or loomrun is signalled; returns loomrun's exit status (1 for a
// rendezvous error).
int runElastic(const LaunchOptions& opts, const std::vector<std::vector<int>>& rankCpus, SignalChannel& signals);

}  // namespace loom::launcher
