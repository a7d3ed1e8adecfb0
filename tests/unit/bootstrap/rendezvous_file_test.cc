// The rendezvous file of launchers that name no Loom rendezvous
// (bootstrap/rendezvous_file.h): where it goes, that it is private, and that
// a reader refuses one that others could have written or read.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "bootstrap/rendezvous_file.h"

namespace loom::bootstrap {
namespace {

std::string makeTempDir() {
  char tmpl[] = "/tmp/loom_rdv_test.XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  return d ? d : "";
}

LaunchEnv place(int size, int localSize, const std::string& key, bool unique = true) {
  LaunchEnv e;
  e.jobKeyUnique = unique;
  e.launcher = Launcher::kSlurm;
  e.size = size;
  e.localSize = localSize;
  e.jobKey = key;
  return e;
}

TEST(RendezvousFile, OneHostUsesTheRuntimeDir) {
  auto p = rendezvousFilePath(place(2, 2, "slurm:7.0"), "/run/user/1000", "/home/u", 1000, 4242);
  ASSERT_TRUE(p.isOk()) << p.status().message();
  EXPECT_EQ(p.value().rfind("/run/user/1000/loom/", 0), 0u) << p.value();
  EXPECT_EQ(p.value().find("4242"), std::string::npos) << "a launcher's job id needs no parent pid";
  // Without a job id (Hydra), the common parent names the job.
  auto hydra = rendezvousFilePath(place(2, 2, "pmi:", false), "/run/user/1000", "/home/u", 1000, 4242);
  ASSERT_TRUE(hydra.isOk());
  EXPECT_EQ(hydra.value().substr(hydra.value().size() - 5), "-4242");
  auto noRuntime = rendezvousFilePath(place(2, 2, "slurm:7.0"), "", "/home/u", 1000, 4242);
  ASSERT_TRUE(noRuntime.isOk());
  EXPECT_EQ(noRuntime.value().rfind("/tmp/loom-1000/", 0), 0u) << noRuntime.value();
  // Another job (key) or another launcher agent (parent) is another file.
  EXPECT_NE(rendezvousFilePath(place(2, 2, "slurm:8.0"), "/r", "", 1, 9).value(),
            rendezvousFilePath(place(2, 2, "slurm:7.0"), "/r", "", 1, 9).value());
  EXPECT_NE(rendezvousFilePath(place(2, 2, "pmi:", false), "/r", "", 1, 9).value(),
            rendezvousFilePath(place(2, 2, "pmi:", false), "/r", "", 1, 10).value());
}

TEST(RendezvousFile, SeveralHostsUseTheHomeDirectory) {
  auto p = rendezvousFilePath(place(4, 2, "slurm:7.0"), "/run/user/1000", "/home/u", 1000, 4242);
  ASSERT_TRUE(p.isOk());
  EXPECT_EQ(p.value().rfind("/home/u/.loom/rendezvous/", 0), 0u) << p.value();
  EXPECT_EQ(p.value().find("4242"), std::string::npos);  // parents differ between hosts
  auto noHome = rendezvousFilePath(place(4, 2, "slurm:7.0"), "", "", 1000, 1);
  ASSERT_FALSE(noHome.isOk());
  EXPECT_NE(noHome.status().message().find("HOME"), std::string::npos);
  auto noJobId = rendezvousFilePath(place(4, 2, "pmi:", false), "", "/home/u", 1000, 1);
  ASSERT_FALSE(noJobId.isOk());
  EXPECT_NE(noJobId.status().message().find("LOOM_JOB_SECRET"), std::string::npos);
}

TEST(RendezvousFile, PublishedIdIsReadBackAndPrivate) {
  const std::string dir = makeTempDir();
  ASSERT_FALSE(dir.empty());
  const std::string path = dir + "/loom/job";
  UniqueId id;
  id.rootHost = "127.0.0.1";
  id.rootPort = 40123;
  id.secret = randomSecret();
  // A reader that starts first waits for the file.
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(publishRendezvous(path, id).isOk());
  });
  auto got = awaitRendezvous(path, 10);
  writer.join();
  ASSERT_TRUE(got.isOk()) << got.status().message();
  EXPECT_EQ(got.value().rootHost, id.rootHost);
  EXPECT_EQ(got.value().rootPort, id.rootPort);
  EXPECT_EQ(got.value().secret, id.secret);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir + "/loom").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // A file others can read is refused, as is a directory others can enter.
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto open = awaitRendezvous(path, 1);
  ASSERT_FALSE(open.isOk());
  EXPECT_NE(open.status().message().find("refusing"), std::string::npos) << open.status().message();
  ASSERT_EQ(::chmod((dir + "/loom").c_str(), 0755), 0);
  Status s = publishRendezvous(dir + "/loom/other", id);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("0700"), std::string::npos) << s.message();
  std::system(("rm -rf " + dir).c_str());
}

TEST(RendezvousFile, FileOlderThanTheTimeoutIsIgnored) {
  const std::string dir = makeTempDir();
  const std::string path = dir + "/loom/job";
  UniqueId id;
  id.rootHost = "127.0.0.1";
  id.rootPort = 40124;
  id.secret = randomSecret();
  ASSERT_TRUE(publishRendezvous(path, id).isOk());
  struct timespec old[2] = {{::time(nullptr) - 100, 0}, {::time(nullptr) - 100, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), old, 0), 0);
  auto stale = awaitRendezvous(path, 1);
  ASSERT_FALSE(stale.isOk());
  EXPECT_EQ(stale.status().code(), Code::kTimeout) << stale.status().message();
  auto fresh = awaitRendezvous(path, 300);  // a root may live this long
  ASSERT_TRUE(fresh.isOk()) << fresh.status().message();
  EXPECT_EQ(fresh.value().rootPort, 40124);
  std::system(("rm -rf " + dir).c_str());
}

TEST(RendezvousFile, MissingFileTimesOutNamingIt) {
  const std::string dir = makeTempDir();
  auto r = awaitRendezvous(dir + "/absent", 0.1);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), Code::kTimeout);
  EXPECT_NE(r.status().message().find(dir + "/absent"), std::string::npos);
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace loom::bootstrap
