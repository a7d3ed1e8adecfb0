// A folder of checkpoints of one run, named checkpoint-<step>.ckpt (step
// zero-padded so names sort by step). Rank 0 saves; every rank may load.
//
// save() writes atomically (checkpoint_file.h) and then deletes all but the
// newest `keep` files, so a checkpoint that turns out unreadable (a disk
// error after the write) still leaves an older one to fall back to.
// Temporary files of an interrupted save (".tmp.<pid>") are ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ddp/checkpoint/checkpoint_file.h"

namespace loom::ddp {

struct LoadedCheckpoint {
  std::string path;
  CheckpointState state;
};

class CheckpointDirectory {
 public:
  // `keep` >= 1 (std::invalid_argument otherwise).
  explicit CheckpointDirectory(std::string directory, size_t keep = 2);

  const std::string& directory() const { return directory_; }
  std::string pathForStep(uint64_t step) const;

  // Creates the directory when missing, writes the checkpoint of
  // state.step, prunes old ones. Returns the path written.
  std::string save(const CheckpointState& state);

  // The newest checkpoint that validates, or nullopt when there is none (or
  // no directory). Each newer file that failed validation adds its error
  // message to `skipped` (when given) before the next one is tried.
  std::optional<LoadedCheckpoint> loadLatest(std::vector<std::string>* skipped = nullptr) const;

  // Checkpoint files present, oldest first (by step in the name).
  std::vector<std::string> list() const;

 private:
  std::string directory_;
  size_t keep_;
};

}  // namespace loom::ddp
