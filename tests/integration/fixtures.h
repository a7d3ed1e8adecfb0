// The two fixtures every integration test uses. Threads: a loomCommInitAll
// clique of --world-size communicators, created per test. Process: this
// process's rank of a loomrun job (skipped when not started by loomrun);
// every rank runs the same gtest sequence, so collective calls match.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "tests/integration/collective_case.h"
#include "tests/integration/test_world.h"

namespace loom::integration {

class Threads : public ::testing::Test {
 protected:
  void SetUp() override {
    nranks_ = testOptions().threadWorldSize;
    clique_ = std::make_unique<Clique>(nranks_);
    ASSERT_EQ(clique_->initResult(), loomSuccess) << "loomCommInitAll(" << nranks_ << "): " << clique_->initError();
  }
  void TearDown() override { clique_.reset(); }

  loomComm_t comm(int rank) const { return clique_->comm(rank); }

  int nranks_ = 0;
  std::unique_ptr<Clique> clique_;
};

class Process : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!startedByLauncher()) GTEST_SKIP() << "not started by loomrun (RANK/WORLD_SIZE unset)";
    world_ = &processWorld();
    ASSERT_NE(world_->comm, nullptr) << world_->error;
    ASSERT_LE(world_->nranks, kMaxRanks) << "the reference is exact only up to " << kMaxRanks << " ranks";
    ASSERT_FALSE(world_->broken) << "an earlier test left this rank's collective sequence out of step";
  }

  // Call after a scenario: a rank that stopped early cannot run more collectives.
  void markBrokenUnless(bool ok) {
    if (!ok) world_->broken = true;
  }

  ProcessWorld* world_ = nullptr;
};

}  // namespace loom::integration
