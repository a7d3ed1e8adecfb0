// Which RDMA devices and ports the verbs transport may use (LOOM_IB_HCA,
// which Loom's libnccl.so.2 also sets from NCCL_IB_HCA), in NCCL's syntax:
//   "mlx5_0:1,mlx5_1"   use these (a name without a port: any port)
//   "^mlx5_2"           use any device but these
//   "=mlx5_0"           names match exactly; without '=' a name matches every
//                       device it is a prefix of ("mlx5" matches mlx5_0, mlx5_1)
// '^' and '=' may be combined ("^=mlx5_1"). An empty filter allows everything.
// Pure: parsed once, asked per device and port.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace loom::transport::verbs {

class HcaFilter {
 public:
  // An error names LOOM_IB_HCA and the part that does not parse.
  static Result<HcaFilter> parse(const std::string& spec);
  bool allows(const std::string& device, uint8_t port) const;
  bool empty() const { return entries_.empty(); }
  const std::string& spec() const { return spec_; }

 private:
  struct Entry {
    std::string name;
    int port = -1;  // -1: any
  };
  std::string spec_;
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<Entry> entries_;
};

}  // namespace loom::transport::verbs
