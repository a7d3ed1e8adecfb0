// Command-line handling of loomrun: help, aliases, bad options (exit 2) and
// programs that cannot be executed (exit 127).
#include <sys/stat.h>

#include <fstream>

#include <gtest/gtest.h>

#include "common/config.h"
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

// --version is loomrun's only before the program; after it, the program's.
TEST(LoomrunOptions, VersionIsLoomrunsBeforeTheProgramOnly) {
  ProcessResult own = runLoomrun({"--version"});
  ASSERT_TRUE(own.finished);
  EXPECT_EQ(own.exitCode, 0) << own.err;
  EXPECT_EQ(own.out.rfind("loomrun (Loom) ", 0), 0u) << own.out;
  ProcessResult passed = runLoomrun({"-n", "1", "sh", "-c", "echo \"$0\"", "--version"});
  ASSERT_TRUE(passed.finished);
  EXPECT_EQ(passed.exitCode, 0) << passed.err;
  EXPECT_EQ(passed.out, "--version\n");
  ProcessResult valued = runLoomrun({"--version=1"});
  ASSERT_TRUE(valued.finished);
  EXPECT_EQ(valued.exitCode, 2);
  EXPECT_NE(valued.err.find("'--version' takes no value"), std::string::npos) << valued.err;
}

// Counts the lines of `text` that start with `prefix`.
size_t linesStartingWith(const std::string& text, const std::string& prefix) {
  size_t n = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    n += text.compare(pos, prefix.size(), prefix) == 0 ? 1 : 0;
    pos = end + 1;
  }
  return n;
}

TEST(LoomrunOptions, HelpEnvListsEveryVariableOnceAligned) {
  ProcessResult r = runLoomrun({"--help-env"});
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  size_t column = std::string::npos;
  for (const KnobDoc& k : configKnobs()) {
    EXPECT_EQ(linesStartingWith(r.out, std::string("  ") + k.env + " "), 1u) << k.env << " in:\n" << r.out;
    const size_t line = r.out.find(std::string("\n  ") + k.env + " ");
    if (line == std::string::npos) continue;
    const size_t lineEnd = r.out.find('\n', line + 1);
    const size_t at = r.out.find("default: ", line);
    ASSERT_LT(at, lineEnd) << k.env << ": no default on its first line";
    if (column == std::string::npos) column = at - line;
    EXPECT_EQ(at - line, column) << k.env << ": defaults not aligned";
  }
  // Sections from the table, and a few entries checked against what the library does.
  EXPECT_NE(r.out.find("\nWaits and timeouts\n  LOOM_TIMEOUT"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("LOOM_TIMEOUT                  default: 300\n"), std::string::npos);
  EXPECT_NE(r.out.find("\nSet by the launcher (loomrun, torchrun, mpirun, srun) for each rank\n"), std::string::npos);
  for (size_t pos = 0; (pos = r.out.find('\n', pos)) != std::string::npos; ++pos) {
    const size_t end = r.out.find('\n', pos + 1);
    if (end != std::string::npos) {
      EXPECT_LE(end - pos - 1, 79u) << r.out.substr(pos + 1, end - pos - 1);
    }
  }
}

TEST(LoomrunOptions, HelpEnvMarkdownIsOneTableRowPerVariable) {
  ProcessResult r = runLoomrun({"--help-env=markdown"});
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out.rfind("# Environment variables\n", 0), 0u) << r.out.substr(0, 200);
  for (const KnobDoc& k : configKnobs()) {
    EXPECT_EQ(linesStartingWith(r.out, std::string("| `") + k.env + "` | "), 1u) << k.env;
  }
  EXPECT_NE(r.out.find("| `LOOM_DUMP_DIR` | /tmp | directory of flight-recorder dumps: loom-flight-&lt;host&gt;"),
            std::string::npos)
      << "angle brackets must not become HTML tags";
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
      {{"--help-env=xml"}, "'--help-env' expects text or markdown, got 'xml'"},
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
