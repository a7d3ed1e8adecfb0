// torchrun's everyday flags on loomrun: --standalone, --rdzv-endpoint,
// --rdzv-id, .py programs and -m through python3, --no-python, --log-dir with
// --redirects/--tee, and --nproc-per-node auto.
#include <dirent.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/unit/tools/loomrun/process_runner.h"

namespace loom::launcher::testing {
namespace {

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The directories directly under `dir` (names only).
std::vector<std::string> subdirectories(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  }
  return sorted(names);
}

// python3 from PATH, as loomrun looks it up; the Python tests need it.
bool havePython() {
  ProcessResult r = runLoomrun({"-n", "1", "sh", "-c", "command -v python3"});
  return r.finished && r.exitCode == 0;
}

struct BadOptionCase {
  std::vector<std::string> args;
  std::string mentioned;  // must appear in loomrun's message
};

TEST(LoomrunTorchrunFlags, BadValuesAreUsageErrorsNamingTheOption) {
  const BadOptionCase cases[] = {
      {{"-n", "1", "--rdzv-endpoint", "host:", "true"}, "'--rdzv-endpoint' expects HOST:PORT, got 'host:'"},
      {{"-n", "1", "--rdzv-endpoint", ":29500", "true"}, "got ':29500' (empty host)"},
      {{"-n", "1", "--rdzv-endpoint", "host:port", "true"}, "the port must be 0..65535"},
      {{"-n", "1", "--rdzv_endpoint=host:70000", "true"}, "'--rdzv_endpoint' expects HOST:PORT"},
      {{"-n", "1", "--rdzv-endpoint", "::1:29500", "true"}, "IPv6 address needs [brackets]"},
      {{"-n", "1", "--rdzv-endpoint", "[::1:29500", "true"}, "no ']'"},
      {{"-n", "1", "--rdzv-endpoint", "[::1]29500", "true"}, "expected ':' after ']'"},
      {{"-n", "1", "--rdzv-endpoint"}, "'--rdzv-endpoint' needs a value"},
      {{"-n", "1", "--rdzv-id=", "true"}, "'--rdzv-id' needs a non-empty id"},
      {{"-n", "1", "--rdzv-backend", "etcd", "true"}, "'--rdzv-backend' supports c10d or static"},
      {{"-n", "1", "--standalone", "--nnodes", "2", "true"}, "'--standalone'"},
      {{"-n", "1", "--standalone", "--master-port", "5000", "true"}, "'--standalone'"},
      {{"-n", "1", "--standalone", "--rdzv-endpoint", "h:1", "true"}, "'--standalone'"},
      {{"-n", "1", "--nnodes", "2", "--rdzv-backend", "c10d", "true"}, "--rdzv-endpoint HOST:PORT"},
      {{"-n", "1", "--standalone=1", "true"}, "'--standalone' takes no value"},
      {{"-n", "1", "-mfoo", "true"}, "'-m' takes no value"},
      {{"-n", "1", "--no-python=yes", "true"}, "'--no-python' takes no value"},
      {{"-n", "1", "--log-dir=", "true"}, "'--log-dir' needs a directory"},
      {{"-n", "1", "--log-dir", "/tmp", "--redirects", "4", "true"}, "'--redirects' expects 0 (none)"},
      {{"-n", "1", "--log-dir", "/tmp", "--tee", "both", "true"}, "'--tee' expects 0 (none)"},
      {{"-n", "1", "--log-dir", "/tmp", "-r", "0:5", "true"}, "'-r' expects 0 (none)"},
      {{"-n", "1", "--log-dir", "/tmp", "-t", "x:1", "true"}, "'-t' expects an integer, got 'x'"},
      {{"-n", "1", "--log-dir", "/tmp", "--tee", "0:1,1", "true"}, "'1' is not LOCAL_RANK:VALUE"},
      {{"-n", "1", "--tee", "3", "true"}, "under --log-dir DIR, which is missing"},
      {{"-n", "1", "--redirects", "0:1", "true"}, "under --log-dir DIR, which is missing"},
      {{"--nproc-per-node", "many", "true"}, "'--nproc-per-node' expects an integer, got 'many'"},
      {{"-n", "1", "-m", "--no-python", "true"}, "'-m/--module' and '--no-python' exclude each other"},
      {{"-n", "1", "--no-python", "--module", "true"}, "'-m/--module' and '--no-python' exclude each other"},
      {{"-n", "1", "--nnodes", "2", "--rdzv-endpoint", "h:0", "true"}, "is required when --nnodes > 1"},
      {{"-n", "2", "--local-ranks-filter", "0,,1", "true"}, "'--local-ranks-filter' expects an integer, got ''"},
      {{"-n", "2", "--local_ranks_filter=-1", "true"}, "'--local_ranks_filter' value -1 out of range"},
  };
  for (const BadOptionCase& c : cases) {
    ProcessResult r = runLoomrun(c.args);
    ASSERT_TRUE(r.finished);
    std::string shown;
    for (const std::string& a : c.args) shown += a + " ";
    EXPECT_EQ(r.exitCode, 2) << shown << r.err;
    EXPECT_NE(r.err.find(c.mentioned), std::string::npos)
        << shown << ": expected '" << c.mentioned << "' in: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(LoomrunTorchrunFlags, HelpListsTheTorchrunFlags) {
  ProcessResult r = runLoomrun({"--help"});
  ASSERT_TRUE(r.finished);
  for (const char* flag : {"--standalone", "--rdzv-endpoint", "--rdzv-id", "--module", "--no-python",
                           "--log-dir", "--redirects", "--tee", "auto", "--prefix-output",
                           "--local-ranks-filter"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

// Prints "MASTER_ADDR MASTER_PORT RANK WORLD_SIZE" of rank 0 for `args`.
std::string rendezvousOf(std::vector<std::string> args, const EnvChanges& env = {}) {
  args.insert(args.end(), {"sh", "-c", "echo $MASTER_ADDR $MASTER_PORT $RANK $WORLD_SIZE"});
  ProcessResult r = runLoomrun(args, env);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  return r.out;
}

TEST(LoomrunTorchrunFlags, RdzvEndpointIsMasterAddrAndPort) {
  EXPECT_EQ(rendezvousOf({"-n", "1", "--rdzv-endpoint", "127.0.0.1:29555"}), "127.0.0.1 29555 0 1\n");
  EXPECT_EQ(rendezvousOf({"-n", "1", "--rdzv_endpoint=[::1]:29556"}), "::1 29556 0 1\n");
  // A host alone takes torchrun's default port.
  EXPECT_EQ(rendezvousOf({"-n", "1", "--rdzv-endpoint", "localhost"}), "localhost 29400 0 1\n");
  // One node of two: the endpoint is where node 0 serves; nothing is bound here.
  EXPECT_EQ(rendezvousOf({"-n", "1", "--nnodes", "2", "--node_rank", "1", "--rdzv-backend=c10d",
                          "--rdzv-endpoint", "node0.example:1234"},
                         {{"LOOM_JOB_SECRET", std::string(32, 'a')}}),
            "node0.example 1234 1 2\n");
}

TEST(LoomrunTorchrunFlags, RdzvEndpointPortZeroPicksAFreePort) {
  std::istringstream fields(rendezvousOf({"-n", "1", "--rdzv-endpoint", "127.0.0.1:0"}));
  std::string addr;
  int port = 0;
  fields >> addr >> port;
  EXPECT_EQ(addr, "127.0.0.1");
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
}

TEST(LoomrunTorchrunFlags, RdzvIdIsTheRunIdAndWinsOverTheEnvironment) {
  const std::vector<std::string> print = {"sh", "-c", "echo $TORCHELASTIC_RUN_ID"};
  std::vector<std::string> args = {"-n", "2", "--rdzv-id", "job42"};
  args.insert(args.end(), print.begin(), print.end());
  ProcessResult r = runLoomrun(args, {{"TORCHELASTIC_RUN_ID", "inherited"}});
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "job42\njob42\n");
}

TEST(LoomrunTorchrunFlags, StandaloneRunsAPythonScriptWithTheWorkerEnvironment) {
  if (!havePython()) GTEST_SKIP() << "python3 is not on PATH";
  TempDir dir;
  std::string script = dir.file("train.py");  // not executable: python3 runs it
  std::ofstream(script) << "import os\n"
                           "e = os.environ\n"
                           "print(e['RANK'], e['WORLD_SIZE'], e['LOCAL_RANK'], e['MASTER_ADDR'],\n"
                           "      e['MASTER_PORT'], e['TORCHELASTIC_RUN_ID'])\n";
  ProcessResult r = runLoomrun({"--standalone", "--nproc-per-node", "2", script});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::vector<std::string> lines = sorted(splitLines(r.out));
  ASSERT_EQ(lines.size(), 2u) << r.out;
  std::set<std::string> sharedParts;
  for (int rank = 0; rank < 2; ++rank) {
    std::istringstream fields(lines[static_cast<size_t>(rank)]);
    std::string globalRank, world, local, addr, port, runId;
    fields >> globalRank >> world >> local >> addr >> port >> runId;
    EXPECT_EQ(globalRank, std::to_string(rank)) << r.out;
    EXPECT_EQ(world, "2");
    EXPECT_EQ(local, std::to_string(rank));
    EXPECT_EQ(addr, "127.0.0.1");
    EXPECT_GT(std::atoi(port.c_str()), 0) << r.out;
    EXPECT_NE(runId, "none") << "--standalone draws a run id";
    EXPECT_FALSE(runId.empty());
    sharedParts.insert(port + " " + runId);
  }
  EXPECT_EQ(sharedParts.size(), 1u) << "both ranks must see the same port and run id:\n" << r.out;
}

TEST(LoomrunTorchrunFlags, ModuleRunsWithPythonDashM) {
  if (!havePython()) GTEST_SKIP() << "python3 is not on PATH";
  TempDir dir;
  ASSERT_EQ(mkdir(dir.file("pkg").c_str(), 0755), 0);
  std::ofstream(dir.file("pkg/__init__.py")) << "";
  std::ofstream(dir.file("pkg/hello.py")) << "import os, sys\n"
                                             "print('module', __name__, os.environ['RANK'], sys.argv[1:])\n";
  ProcessResult r = runLoomrun({"-n", "2", "-m", "pkg.hello", "-n", "x"}, {{"PYTHONPATH", dir.path()}});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(sorted(splitLines(r.out)), (std::vector<std::string>{"module __main__ 0 ['-n', 'x']",
                                                                  "module __main__ 1 ['-n', 'x']"}))
      << r.out;
}

TEST(LoomrunTorchrunFlags, NoPythonExecutesADotPyProgramItself) {
  TempDir dir;
  // A shell script named .py: python3 would fail on it, exec runs it.
  std::string script = dir.file("tool.py");
  std::ofstream(script) << "#!/bin/sh\necho shell $RANK\n";
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  ProcessResult r = runLoomrun({"-n", "2", "--no_python", script});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(sorted(splitLines(r.out)), (std::vector<std::string>{"shell 0", "shell 1"}));
  if (!havePython()) return;
  ProcessResult viaPython = runLoomrun({"-n", "1", script});
  ASSERT_TRUE(viaPython.finished);
  EXPECT_NE(viaPython.exitCode, 0) << "python3 should reject a shell script: " << viaPython.out;
  EXPECT_NE(viaPython.exitCode, 127) << "python3 was started, so this is not 'cannot execute'";
}

// $PYTHON_EXEC (torchrun's variable) replaces python3; a stand-in
// interpreter shows the exact command line each rank gets.
TEST(LoomrunTorchrunFlags, PythonExecNamesTheInterpreter) {
  TempDir dir;
  std::string fake = dir.file("fakepython");
  std::ofstream(fake) << "#!/bin/sh\necho \"$RANK: $*\"\n";
  ASSERT_EQ(chmod(fake.c_str(), 0755), 0);
  ProcessResult script = runLoomrun({"-n", "2", "train.py", "--lr", "1"}, {{"PYTHON_EXEC", fake}});
  ASSERT_TRUE(script.finished);
  ASSERT_EQ(script.exitCode, 0) << script.err;
  EXPECT_EQ(sorted(splitLines(script.out)), (std::vector<std::string>{"0: -u train.py --lr 1", "1: -u train.py --lr 1"}));
  ProcessResult module = runLoomrun({"-n", "1", "--module", "pkg.main", "x"}, {{"PYTHON_EXEC", fake}});
  ASSERT_TRUE(module.finished);
  ASSERT_EQ(module.exitCode, 0) << module.err;
  EXPECT_EQ(module.out, "0: -u -m pkg.main x\n");
  // Not a .py file: executed itself, no interpreter.
  ProcessResult plain = runLoomrun({"-n", "1", "sh", "-c", "echo plain"}, {{"PYTHON_EXEC", fake}});
  ASSERT_TRUE(plain.finished);
  EXPECT_EQ(plain.out, "plain\n");
}

// The single run directory under DIR, DIR/<run id>_XXXXXX.
std::string runDirectory(const std::string& dir, const std::string& runId) {
  std::vector<std::string> runs = subdirectories(dir);
  EXPECT_EQ(runs.size(), 1u) << "one run directory under " << dir;
  if (runs.size() != 1) return "";
  EXPECT_EQ(runs[0].rfind(runId + "_", 0), 0u) << runs[0];
  EXPECT_EQ(runs[0].size(), runId.size() + 7) << runs[0];
  return dir + "/" + runs[0];
}

TEST(LoomrunTorchrunFlags, LogDirRedirectsBothAndTeesStdout) {
  TempDir dir;
  std::string logs = dir.file("logs/nested");  // created with its parents
  ProcessResult r = runLoomrun({"-n", "2", "--log-dir", logs, "--redirects", "3", "--tee", "1", "--rdzv-id",
                                "myjob", "sh", "-c", "echo out$RANK; echo err$RANK >&2; printf end$RANK"});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  // --tee 1: stdout on the terminal too; --redirects 3 without tee: stderr in the file only.
  EXPECT_EQ(sorted(splitLines(r.out)), (std::vector<std::string>{"end0", "end1", "out0", "out1"})) << r.out;
  EXPECT_EQ(r.err.find("err"), std::string::npos) << r.err;
  std::string run = runDirectory(logs, "myjob");
  ASSERT_FALSE(run.empty());
  EXPECT_NE(r.err.find("loomrun: rank logs in " + run), std::string::npos) << r.err;
  EXPECT_EQ(subdirectories(run), (std::vector<std::string>{"attempt_0"}));
  EXPECT_EQ(subdirectories(run + "/attempt_0"), (std::vector<std::string>{"0", "1"}));
  for (int rank = 0; rank < 2; ++rank) {
    std::string rankDir = run + "/attempt_0/" + std::to_string(rank);
    std::string id = std::to_string(rank);
    // Byte for byte: no prefix, the unfinished last line stays unfinished.
    EXPECT_EQ(readFile(rankDir + "/stdout.log"), "out" + id + "\nend" + id);
    EXPECT_EQ(readFile(rankDir + "/stderr.log"), "err" + id + "\n");
  }
}

TEST(LoomrunTorchrunFlags, RedirectsPerLocalRankAndOneDirectoryPerAttempt) {
  TempDir dir;
  ProcessResult r = runLoomrun({"-n", "2", "--log-dir", dir.path(), "-r", "0:2", "--max-restarts", "1", "sh", "-c",
                                "echo err$RANK.$LOOM_RESTART_COUNT >&2; [ $LOOM_RESTART_COUNT = 1 ]"});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  // Rank 0's stderr went to its files only; rank 1 kept the terminal (in
  // attempt 1: in attempt 0 it may be stopped before it writes).
  EXPECT_EQ(r.err.find("err0."), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("err1.1\n"), std::string::npos) << r.err;
  std::string run = runDirectory(dir.path(), "none");
  ASSERT_FALSE(run.empty());
  EXPECT_EQ(subdirectories(run), (std::vector<std::string>{"attempt_0", "attempt_1"}));
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string attemptDir = run + "/attempt_" + std::to_string(attempt);
    EXPECT_EQ(subdirectories(attemptDir), (std::vector<std::string>{"0"})) << "rank 1 writes no files";
    EXPECT_EQ(readFile(attemptDir + "/0/stderr.log"), "err0." + std::to_string(attempt) + "\n");
    EXPECT_FALSE(exists(attemptDir + "/0/stdout.log")) << "stdout was not asked for";
  }
}

// Filtered-out ranks keep running (their output is read and dropped) and
// keep writing their log files.
TEST(LoomrunTorchrunFlags, LocalRanksFilterChoosesWhoReachesTheTerminal) {
  TempDir dir;
  ProcessResult r = runLoomrun({"-n", "3", "--local-ranks-filter", "0,2", "--log-dir", dir.path(), "--tee", "1",
                                "sh", "-c", "seq 1 20000 | sed \"s/^/o$RANK./\"; echo e$RANK >&2"});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::vector<std::string> out = splitLines(r.out);
  EXPECT_EQ(out.size(), 40000u);
  EXPECT_EQ(std::count_if(out.begin(), out.end(), [](const std::string& l) { return l.starts_with("o1."); }), 0);
  EXPECT_EQ(std::count(out.begin(), out.end(), "o0.20000"), 1);
  EXPECT_EQ(std::count(out.begin(), out.end(), "o2.20000"), 1);
  std::vector<std::string> err = splitLines(r.err);
  EXPECT_EQ(std::count(err.begin(), err.end(), "e1"), 0) << r.err;
  EXPECT_EQ(std::count(err.begin(), err.end(), "e0"), 1) << r.err;
  EXPECT_EQ(std::count(err.begin(), err.end(), "e2"), 1) << r.err;
  std::string run = runDirectory(dir.path(), "none");
  ASSERT_FALSE(run.empty());
  std::vector<std::string> logged = splitLines(readFile(run + "/attempt_0/1/stdout.log"));
  ASSERT_EQ(logged.size(), 20000u);
  EXPECT_EQ(logged.back(), "o1.20000");
}

// One rank on the terminal: its bytes pass through unchanged, as nccl-tests
// print them (no prefix, no newline added to an unfinished line).
TEST(LoomrunTorchrunFlags, OneRankShownPassesItsBytesThrough) {
  ProcessResult r = runLoomrun({"-n", "3", "--local-ranks-filter", "1", "sh", "-c", "printf \"# a$RANK\\n#b\""});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "# a1\n#b");
}

TEST(LoomrunTorchrunFlags, LogDirWithoutRedirectsOrTeeWritesNothing) {
  TempDir dir;
  ProcessResult r = runLoomrun({"-n", "2", "--log-dir", dir.file("logs"), "sh", "-c", "echo hi"});
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "hi\nhi\n");
  EXPECT_FALSE(exists(dir.file("logs"))) << "no stream was asked for";
}

TEST(LoomrunTorchrunFlags, LogDirThatCannotBeCreatedFailsClearly) {
  TempDir dir;
  std::ofstream(dir.file("file")) << "x";
  ProcessResult r = runLoomrun({"-n", "1", "--log-dir", dir.file("file/logs"), "--tee", "3", "true"});
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("cannot create the log directory '" + dir.file("file/logs") + "'"), std::string::npos)
      << r.err;
}

// What `--nproc-per-node auto` must give: the GPUs when there are any, else
// the CPUs this process may run on.
int nvidiaGpus() {
  int n = 0;
  if (DIR* d = opendir("/proc/driver/nvidia/gpus")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] == '.' ? 0 : 1;
    closedir(d);
  }
  return n;
}

TEST(LoomrunTorchrunFlags, NprocPerNodeAutoAndCpuAreTheCpuCountWithoutGpus) {
  if (nvidiaGpus() > 0) GTEST_SKIP() << "this host has NVIDIA GPUs; auto counts them, not CPUs";
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int cpus = std::min(CPU_COUNT(&set), 1024);
  for (const char* spelling : {"--nproc-per-node", "--nproc_per_node", "-n"}) {
    ProcessResult r = runLoomrun({spelling, spelling[1] == 'n' ? "cpu" : "auto", "sh", "-c", "echo $LOCAL_WORLD_SIZE $WORLD_SIZE"},
                                 {}, Seconds(20));
    ASSERT_TRUE(r.finished);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::vector<std::string> lines = splitLines(r.out);
    EXPECT_EQ(lines.size(), static_cast<size_t>(cpus)) << "one rank per CPU";
    const std::string expected = std::to_string(cpus) + " " + std::to_string(cpus);
    for (const std::string& line : lines) EXPECT_EQ(line, expected);
  }
  ProcessResult gpu = runLoomrun({"-n", "gpu", "true"});
  ASSERT_TRUE(gpu.finished);
  EXPECT_EQ(gpu.exitCode, 2);
  EXPECT_NE(gpu.err.find("'-n' gpu: no NVIDIA GPU is visible"), std::string::npos) << gpu.err;
}

}  // namespace
}  // namespace loom::launcher::testing
