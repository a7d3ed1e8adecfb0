// Command-line handling of loomrun: help, aliases, bad options (exit 2) and
// programs that cannot be executed (exit 127).
#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

#include "tests/unit/tools/loomrun/process_runner.h"

namespace loom::launcher::testing {
namespace {

TEST(LoomrunOptions, HelpPrintsUsageAndSucceeds) {
  for (const char* flag : {"-h", "--help"}) {
    ProcessResult r = runLoomrun({flag});
    ASSERT_TRUE(r.finished);
    EXPECT_EQ(r.exitCode, 0) << flag;
    EXPECT_NE(r.out.find("Usage: loomrun -n N"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--kill-timeout"), std::string::npos);
  }
}

struct BadOptionCase {
  std::vector<std::string> args;
  std::string mentioned;  // the option (or problem) the message must name
};

TEST(LoomrunOptions, BadOptionsExitTwoNamingTheOption) {
  const std::vector<BadOptionCase> cases = {
      {{"--bogus", "-n", "2", "true"}, "'--bogus'"},
      {{"-x", "true"}, "'-x'"},
      {{"-n", "0", "true"}, "'-n'"},
      {{"-n", "abc", "true"}, "'-n'"},
      {{"-n", "3x", "true"}, "'-n'"},
      {{"-n"}, "'-n' needs a value"},
      {{"--nproc-per-node=0", "true"}, "'--nproc-per-node'"},
      {{"-n", "2"}, "missing the program"},
      {{"true"}, "-n/--nproc-per-node"},
      {{"-n", "1", "--nnodes", "0", "true"}, "'--nnodes'"},
      {{"-n", "1", "--nnodes", "2", "--node-rank", "2", "--master-port", "5000", "true"},
       "'--node-rank'"},
      {{"-n", "1", "--master-port", "70000", "true"}, "'--master-port'"},
      {{"-n", "1", "--kill-timeout", "-1", "true"}, "'--kill-timeout'"},
      {{"-n", "1", "--kill-timeout", "soon", "true"}, "'--kill-timeout'"},
      {{"-n", "1", "--tag-output=yes", "true"}, "'--tag-output' takes no value"},
      {{"-n", "1", "--master-addr=", "true"}, "'--master-addr'"},
  };
  for (const BadOptionCase& c : cases) {
    ProcessResult r = runLoomrun(c.args);
    ASSERT_TRUE(r.finished);
    EXPECT_EQ(r.exitCode, 2) << c.args[0] << " " << r.err;
    EXPECT_NE(r.err.find(c.mentioned), std::string::npos)
        << "expected '" << c.mentioned << "' in: " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(LoomrunOptions, AliasesInlineValuesAndSeparator) {
  const std::vector<std::vector<std::string>> spellings = {
      {"-n", "2"}, {"-n2"}, {"--nproc-per-node", "2"}, {"--nproc-per-node=2"},
      {"--nproc_per_node", "2"}};
  for (std::vector<std::string> args : spellings) {
    args.insert(args.end(), {"--no-tag-output", "--", "sh", "-c", "echo $WORLD_SIZE"});
    ProcessResult r = runLoomrun(args);
    ASSERT_TRUE(r.finished);
    EXPECT_EQ(r.exitCode, 0) << args[0] << " " << r.err;
    EXPECT_EQ(r.out, "2\n2\n") << args[0];
  }
}

TEST(LoomrunOptions, ArgumentsAfterTheProgramBelongToIt) {
  ProcessResult r = runLoomrun({"-n", "1", "sh", "-c", "echo \"$1 $2 $3\"", "sh", "-n", "5",
                                "--bogus"});
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "-n 5 --bogus\n");
}

TEST(LoomrunOptions, MissingProgramExits127) {
  ProcessResult r = runLoomrun({"-n", "3", "loomrun-test-no-such-program", "arg"});
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 127);
  EXPECT_NE(r.err.find("cannot execute 'loomrun-test-no-such-program'"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
}

TEST(LoomrunOptions, NonExecutableProgramExits127) {
  TempDir dir;
  std::string script = dir.file("not_executable.sh");
  std::ofstream(script) << "#!/bin/sh\necho should-not-run\n";
  ASSERT_EQ(chmod(script.c_str(), 0644), 0);
  ProcessResult r = runLoomrun({"-n", "2", script});
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 127);
  EXPECT_NE(r.err.find("cannot execute '" + script + "'"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("should-not-run"), std::string::npos);
}

}  // namespace
}  // namespace loom::launcher::testing
