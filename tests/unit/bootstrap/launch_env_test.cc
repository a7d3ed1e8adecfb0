// Rank, size and local rank from every launcher's environment, and the errors
// for partial or wrong ones (bootstrap/launch_env.h).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "bootstrap/launch_env.h"

namespace loom::bootstrap {
namespace {

using Env = std::map<std::string, std::string>;

Result<LaunchEnv> read(const Env& env) {
  return readLaunchEnv([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

LaunchEnv readOk(const Env& env) {
  auto r = read(env);
  EXPECT_TRUE(r.isOk()) << r.status().message();
  return r.isOk() ? r.value() : LaunchEnv{};
}

// The error's message, which must name `variable`.
void expectErrorNaming(const Env& env, const std::string& variable) {
  auto r = read(env);
  ASSERT_FALSE(r.isOk()) << "accepted an environment that should name " << variable;
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find(variable), std::string::npos) << r.status().message();
}

TEST(LaunchEnv, NoLauncherIsOneRank) {
  LaunchEnv e = readOk({{"PATH", "/bin"}, {"MASTER_ADDR", "h"}});
  EXPECT_EQ(e.launcher, Launcher::kNone);
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.size, 1);
}

TEST(LaunchEnv, Loomrun) {
  LaunchEnv e = readOk({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                        {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"},
                        {"LOOM_JOB_SECRET", "00112233445566778899aabbccddeeff"}});
  EXPECT_EQ(e.launcher, Launcher::kLoomrun);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.size, 4);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_EQ(e.localSize, 2);
  EXPECT_FALSE(e.singleHost());
  EXPECT_TRUE(e.namesRendezvous());
  EXPECT_EQ(e.masterAddr, "10.0.0.1");
  EXPECT_EQ(e.masterPort, 29500);
}

TEST(LaunchEnv, TorchrunNamesNoRendezvous) {
  LaunchEnv e = readOk({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                        {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"TORCHELASTIC_RUN_ID", "abc"}});
  EXPECT_EQ(e.launcher, Launcher::kTorchrun);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_TRUE(e.singleHost());
  EXPECT_FALSE(e.namesRendezvous());  // MASTER_PORT is torchrun's store: not bound
  EXPECT_NE(e.jobKey.find("abc"), std::string::npos);
  // A different run or port is a different job.
  LaunchEnv other = readOk({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29501"}, {"TORCHELASTIC_RUN_ID", "abc"}});
  EXPECT_NE(other.jobKey, e.jobKey);
}

TEST(LaunchEnv, OpenMpi) {
  LaunchEnv e = readOk({{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                        {"PMIX_RANK", "5"}, {"PMIX_NAMESPACE", "prterun-x-1@1"}});
  EXPECT_EQ(e.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.size, 8);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_EQ(e.localSize, 4);
  EXPECT_NE(e.jobKey.find("prterun-x-1@1"), std::string::npos);
}

TEST(LaunchEnv, MpichHydraAndIntelMpi) {
  LaunchEnv e = readOk({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"MPI_LOCALRANKID", "2"}, {"MPI_LOCALNRANKS", "3"}});
  EXPECT_EQ(e.launcher, Launcher::kPmi);
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.size, 3);
  EXPECT_EQ(e.localRank, 2);
  EXPECT_TRUE(e.singleHost());
}

TEST(LaunchEnv, PmixTakesTheSizeFromSlurm) {
  LaunchEnv e = readOk({{"PMIX_RANK", "1"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_NTASKS", "16"},
                        {"SLURM_LOCALID", "0"}, {"SLURM_STEP_NUM_NODES", "2"}});
  EXPECT_EQ(e.launcher, Launcher::kPmix);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.size, 2);
  EXPECT_EQ(e.localRank, 0);
  EXPECT_FALSE(e.singleHost());
  expectErrorNaming({{"PMIX_RANK", "1"}}, "PMIX_RANK");
}

TEST(LaunchEnv, Slurm) {
  LaunchEnv e = readOk({{"SLURM_PROCID", "3"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_NTASKS", "64"},
                        {"SLURM_LOCALID", "1"}, {"SLURM_STEP_NUM_NODES", "1"}, {"SLURM_JOB_ID", "77"},
                        {"SLURM_STEP_ID", "0"}});
  EXPECT_EQ(e.launcher, Launcher::kSlurm);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.size, 4);  // the step's size, not the allocation's
  EXPECT_EQ(e.localRank, 1);
  EXPECT_TRUE(e.singleHost());
  EXPECT_NE(e.jobKey.find("77.0"), std::string::npos);
}

TEST(LaunchEnv, SlurmBatchScriptOutsideAStepIsNoLauncher) {
  LaunchEnv e = readOk({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "64"}, {"SLURM_JOB_ID", "77"}});
  EXPECT_EQ(e.launcher, Launcher::kNone);
  EXPECT_EQ(e.size, 1);
}

TEST(LaunchEnv, InnermostLauncherWins) {
  // torchrun inside srun: torchrun's ranks.
  LaunchEnv t = readOk({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}});
  EXPECT_EQ(t.launcher, Launcher::kTorchrun);
  EXPECT_EQ(t.size, 2);
  // mpirun inside an allocation: MPI's ranks.
  LaunchEnv m = readOk({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"},
                        {"SLURM_STEP_NUM_TASKS", "1"}});
  EXPECT_EQ(m.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(m.rank, 1);
}

TEST(LaunchEnv, PartialEnvironmentsNameTheMissingVariable) {
  expectErrorNaming({{"RANK", "0"}}, "WORLD_SIZE");
  expectErrorNaming({{"WORLD_SIZE", "2"}}, "RANK");
  expectErrorNaming({{"OMPI_COMM_WORLD_RANK", "0"}}, "OMPI_COMM_WORLD_SIZE");
  expectErrorNaming({{"OMPI_COMM_WORLD_SIZE", "2"}}, "OMPI_COMM_WORLD_RANK");
  expectErrorNaming({{"PMI_RANK", "0"}}, "PMI_SIZE");
  expectErrorNaming({{"PMI_SIZE", "2"}}, "PMI_RANK");
  expectErrorNaming({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}}, "SLURM_STEP_NUM_TASKS");
  // A secret without its port.
  expectErrorNaming({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOOM_JOB_SECRET", "00112233445566778899aabbccddeeff"}},
                    "MASTER_PORT");
}

TEST(LaunchEnv, WrongValuesNameTheVariable) {
  expectErrorNaming({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK");  // rank >= size
  expectErrorNaming({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "RANK");
  expectErrorNaming({{"RANK", "0"}, {"WORLD_SIZE", "two"}}, "WORLD_SIZE");
  expectErrorNaming({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE");
  expectErrorNaming({{"RANK", "1x"}, {"WORLD_SIZE", "2"}}, "RANK");
  expectErrorNaming({{"RANK", "0"}, {"WORLD_SIZE", "99999999999999999999"}}, "WORLD_SIZE");
  expectErrorNaming({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}},
                    "LOCAL_RANK");
  expectErrorNaming({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}}, "LOCAL_WORLD_SIZE");
  expectErrorNaming({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}, "OMPI_COMM_WORLD_RANK");
  expectErrorNaming({{"PMI_RANK", "0"}, {"PMI_SIZE", "x"}}, "PMI_SIZE");
  expectErrorNaming({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "?"}}, "MPI_LOCALRANKID");
  expectErrorNaming({{"SLURM_PROCID", "9"}, {"SLURM_STEP_NUM_TASKS", "4"}}, "SLURM_PROCID");
  expectErrorNaming({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_LOCALID", "4"}}, "SLURM_LOCALID");
  expectErrorNaming({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "70000"},
                     {"LOOM_JOB_SECRET", "00112233445566778899aabbccddeeff"}},
                    "MASTER_PORT");
}

}  // namespace
}  // namespace loom::bootstrap
