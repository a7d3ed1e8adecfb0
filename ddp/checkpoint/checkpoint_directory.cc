#include "ddp/checkpoint/checkpoint_directory.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <utility>

namespace loom::ddp {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "checkpoint-";
constexpr std::string_view kSuffix = ".ckpt";

// The step in "checkpoint-<digits>.ckpt", or nullopt for any other name
// (including the temporary files of a save in progress).
std::optional<uint64_t> stepOfName(const std::string& name) {
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return std::nullopt;
  std::string digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.empty() || digits.size() > 19) return std::nullopt;
  uint64_t step = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + static_cast<uint64_t>(c - '0');
  }
  return step;
}

}  // namespace

CheckpointDirectory::CheckpointDirectory(std::string directory, size_t keep)
    : directory_(std::move(directory)), keep_(keep) {
  if (keep_ < 1) throw std::invalid_argument("CheckpointDirectory: keep must be >= 1");
  if (directory_.empty()) throw std::invalid_argument("CheckpointDirectory: empty directory name");
}

std::string CheckpointDirectory::pathForStep(uint64_t step) const {
  char name[64];
  std::snprintf(name, sizeof(name), "checkpoint-%012llu.ckpt", static_cast<unsigned long long>(step));
  return (fs::path(directory_) / name).string();
}

std::vector<std::string> CheckpointDirectory::list() const {
  std::vector<std::pair<uint64_t, std::string>> found;
  std::error_code ec;
  fs::directory_iterator it(directory_, ec);
  if (ec) return {};
  for (const fs::directory_entry& entry : it) {
    std::optional<uint64_t> step = stepOfName(entry.path().filename().string());
    if (step && entry.is_regular_file(ec)) found.emplace_back(*step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::string CheckpointDirectory::save(const CheckpointState& state) {
  std::error_code ec;
  fs::create_directories(directory_, ec);
  if (ec) throw std::runtime_error(directory_ + ": cannot create checkpoint directory: " + ec.message());
  std::string path = pathForStep(state.step);
  writeCheckpointFile(path, state);
  std::vector<std::string> all = list();
  for (size_t i = 0; i + keep_ < all.size(); ++i) fs::remove(all[i], ec);  // best effort
  return path;
}

std::optional<LoadedCheckpoint> CheckpointDirectory::loadLatest(std::vector<std::string>* skipped) const {
  std::vector<std::string> all = list();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      CheckpointState state = readCheckpointFile(*it);
      std::optional<uint64_t> named = stepOfName(fs::path(*it).filename().string());
      if (named != state.step) {
        throw std::runtime_error(*it + ": holds step " + std::to_string(state.step) +
                                 " but is named for step " + std::to_string(named.value_or(0)));
      }
      return LoadedCheckpoint{*it, std::move(state)};
    } catch (const std::runtime_error& e) {
      if (skipped != nullptr) skipped->push_back(e.what());
    }
  }
  return std::nullopt;
}

}  // namespace loom::ddp
