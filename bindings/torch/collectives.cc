// LoomBackend's collectives: checks, copies into contiguous buffers where
// Loom needs them, and one Loom call (or group) per c10d operation.
#include <algorithm>
#include <numeric>

#include "bindings/torch/backend_loom.h"
#include "bindings/torch/tensor_args.h"

namespace loom_torch {

using c10d::OpType;

// ---- Reductions and broadcast -------------------------------------------------

c10::intrusive_ptr<c10d::Work> LoomBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  const char* name = "allreduce";
  at::Tensor tensor = singleTensor(tensors, name);
  const loomDataType_t dtype = loomTypeOf(tensor, name);
  const Reduction red = reductionOf(opts.reduceOp, tensor, name);
  at::Tensor buf = reduceBufferOf(tensor, red);
  auto op = newOp(name, tensor.device());
  op->keepAlive = {buf};
  op->outputs = {tensor};
  if (!buf.is_same(tensor)) op->copyOut = [tensor, buf] { tensor.copy_(buf); };
  return launch(OpType::ALLREDUCE, std::move(op), [&](loomStream_t s) {
    return loomAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), dtype, red.op, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                const c10d::AllreduceCoalescedOptions& opts) {
  const char* name = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "loom: ", name, " got no tensors");
  checkSameDevice(tensors, name);
  for (const at::Tensor& t : tensors)
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(), "loom: ", name, " takes tensors of one dtype, got ",
                tensors[0].scalar_type(), " and ", t.scalar_type());
  const loomDataType_t dtype = loomTypeOf(tensors[0], name);
  const Reduction red = reductionOf(opts.reduceOp, tensors[0], name);
  // One all-reduce over the tensors back to back: one call's latency instead of n.
  at::Tensor flat = flatten(tensors);
  premultiply(red, flat);
  auto op = newOp(name, tensors[0].device());
  op->keepAlive = {flat};
  op->outputs = tensors;
  op->copyOut = [flat, outs = tensors] { scatterInto(flat, outs); };
  return launch(OpType::ALLREDUCE_COALESCED, std::move(op), [&](loomStream_t s) {
    return loomAllReduce(flat.data_ptr(), flat.data_ptr(), flat.numel(), dtype, red.op, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const char* name = "reduce";
  at::Tensor tensor = singleTensor(tensors, name);
  TORCH_CHECK(opts.rootTensor == 0, "loom: ", name, " takes one tensor per process, rootTensor must be 0");
  const loomDataType_t dtype = loomTypeOf(tensor, name);
  const Reduction red = reductionOf(opts.reduceOp, tensor, name);
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor buf = reduceBufferOf(tensor, red);
  auto op = newOp(name, tensor.device());
  op->keepAlive = {buf};
  op->outputs = {tensor};
  if (!buf.is_same(tensor) && root == rank_) op->copyOut = [tensor, buf] { tensor.copy_(buf); };
  return launch(OpType::REDUCE, std::move(op), [&](loomStream_t s) {
    return loomReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), dtype, red.op, root, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  const char* name = "broadcast";
  at::Tensor tensor = singleTensor(tensors, name);
  TORCH_CHECK(opts.rootTensor == 0, "loom: ", name, " takes one tensor per process, rootTensor must be 0");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor buf = contiguousOf(tensor);
  auto op = newOp(name, tensor.device());
  op->keepAlive = {buf};
  op->outputs = {tensor};
  if (!buf.is_same(tensor) && root != rank_) op->copyOut = [tensor, buf] { tensor.copy_(buf); };
  return launch(OpType::BROADCAST, std::move(op),
                [&](loomStream_t s) { return loomBcast(buf.data_ptr(), byteCount(buf), loomUint8, root, comm_, s); });
}

// ---- Gathers ----------------------------------------------------------------------

namespace {

// Every tensor of `list` holds `like`'s elements and dtype.
void checkMatching(const std::vector<at::Tensor>& list, const at::Tensor& like, const char* op, const char* what) {
  for (const at::Tensor& t : list) {
    checkDense(t, op);
    TORCH_CHECK(t.device() == like.device(), "loom: ", op, ": ", what, " on ", t.device(), ", input on ",
                like.device());
    TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), "loom: ", op, ": every ", what,
                " must hold ", like.numel(), " elements of ", like.scalar_type(), ", got ", t.numel(), " of ",
                t.scalar_type());
  }
}

void checkBuffers(const at::Tensor& out, const at::Tensor& in, int64_t outPerIn, const char* op) {
  checkDense(in, op);
  checkDense(out, op);
  TORCH_CHECK(out.device() == in.device(), "loom: ", op, ": output on ", out.device(), ", input on ", in.device());
  TORCH_CHECK(out.scalar_type() == in.scalar_type(), "loom: ", op, ": output dtype ", out.scalar_type(),
              " differs from input dtype ", in.scalar_type());
  // outPerIn: output = outPerIn x input (gathers), -outPerIn x output = input (reduce-scatters), 0: unchecked.
  if (outPerIn > 0) {
    TORCH_CHECK(out.numel() == outPerIn * in.numel(), "loom: ", op, ": output has ", out.numel(),
                " elements, expected ", outPerIn, " x ", in.numel());
  } else if (outPerIn < 0) {
    TORCH_CHECK(in.numel() == -outPerIn * out.numel(), "loom: ", op, ": input has ", in.numel(),
                " elements, expected ", -outPerIn, " x ", out.numel());
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> LoomBackend::allgather(std::vector<std::vector<at::Tensor>>& outputTensors,
                                                      std::vector<at::Tensor>& inputTensors,
                                                      const c10d::AllgatherOptions& opts) {
  const char* name = "allgather";
  at::Tensor input = singleTensor(inputTensors, name);
  TORCH_CHECK(outputTensors.size() == 1, "loom: ", name, " takes one output list per process, got ",
              outputTensors.size());
  const std::vector<at::Tensor>& outs = outputTensors[0];
  TORCH_CHECK(static_cast<int>(outs.size()) == size_, "loom: ", name, " needs ", size_, " output tensors, got ",
              outs.size());
  checkMatching(outs, input, name, "output tensor");
  at::Tensor in = contiguousOf(input);
  at::Tensor flat = at::empty({size_ * input.numel()}, input.options());
  auto op = newOp(name, input.device());
  op->keepAlive = {in, flat};
  op->outputs = outs;
  op->copyOut = [flat, outs] { scatterInto(flat, outs); };
  return launch(OpType::ALLGATHER, std::move(op), [&](loomStream_t s) {
    return loomAllGather(in.data_ptr(), flat.data_ptr(), byteCount(in), loomUint8, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::_allgather_base(at::Tensor& outputBuffer, at::Tensor& inputBuffer,
                                                            const c10d::AllgatherOptions& opts) {
  const char* name = "_allgather_base";
  checkBuffers(outputBuffer, inputBuffer, size_, name);
  at::Tensor in = contiguousOf(inputBuffer);
  at::Tensor out = contiguousOf(outputBuffer);
  auto op = newOp(name, inputBuffer.device());
  op->keepAlive = {in, out};
  op->outputs = {outputBuffer};
  if (!out.is_same(outputBuffer)) op->copyOut = [outputBuffer, out] { outputBuffer.copy_(out); };
  return launch(OpType::_ALLGATHER_BASE, std::move(op), [&](loomStream_t s) {
    return loomAllGather(in.data_ptr(), out.data_ptr(), byteCount(in), loomUint8, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputTensorLists,
                                                                std::vector<at::Tensor>& inputTensors,
                                                                const c10d::AllgatherOptions& opts) {
  const char* name = "allgather_coalesced";
  TORCH_CHECK(!inputTensors.empty(), "loom: ", name, " got no tensors");
  checkSameDevice(inputTensors, name);
  TORCH_CHECK(static_cast<int>(outputTensorLists.size()) == size_, "loom: ", name, " needs ", size_,
              " output lists, got ", outputTensorLists.size());
  for (const auto& list : outputTensorLists) {
    TORCH_CHECK(list.size() == inputTensors.size(), "loom: ", name, ": every output list must hold ",
                inputTensors.size(), " tensors, got ", list.size());
    for (size_t i = 0; i < list.size(); ++i) checkMatching({list[i]}, inputTensors[i], name, "output tensor");
  }
  // Each rank's inputs as bytes back to back, gathered once.
  std::vector<at::Tensor> bytes;
  for (const at::Tensor& t : inputTensors) bytes.push_back(t.contiguous().reshape({-1}).view(at::kByte));
  at::Tensor in = at::cat(bytes);
  at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
  auto op = newOp(name, inputTensors[0].device());
  op->keepAlive = {in, flat};
  for (const auto& list : outputTensorLists) op->outputs.insert(op->outputs.end(), list.begin(), list.end());
  op->copyOut = [flat, lists = outputTensorLists, perRank = in.numel()] {
    for (size_t r = 0; r < lists.size(); ++r) {
      int64_t offset = static_cast<int64_t>(r) * perRank;
      for (const at::Tensor& t : lists[r]) {
        const int64_t n = t.numel() * t.element_size();
        t.copy_(flat.narrow(0, offset, n).view(t.scalar_type()).view(t.sizes()));
        offset += n;
      }
    }
  };
  return launch(OpType::ALLGATHER_COALESCED, std::move(op), [&](loomStream_t s) {
    return loomAllGather(in.data_ptr(), flat.data_ptr(), byteCount(in), loomUint8, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                            std::vector<at::Tensor>& inputs,
                                                                            const c10d::AllgatherOptions& opts) {
  const char* name = "allgather_into_tensor_coalesced";
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "loom: ", name, " needs as many outputs as inputs (",
              inputs.size(), "), got ", outputs.size());
  std::vector<at::Tensor> ins, outs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkBuffers(outputs[i], inputs[i], size_, name);
    ins.push_back(contiguousOf(inputs[i]));
    outs.push_back(contiguousOf(outputs[i]));
  }
  // One Loom group: the all-gathers progress together.
  auto op = newOp(name, inputs[0].device());
  op->keepAlive = ins;
  op->keepAlive.insert(op->keepAlive.end(), outs.begin(), outs.end());
  op->outputs = outputs;
  op->copyOut = [outputs, outs] {
    for (size_t i = 0; i < outs.size(); ++i)
      if (!outs[i].is_same(outputs[i])) outputs[i].copy_(outs[i]);
  };
  return launch(OpType::COALESCED, std::move(op), [&](loomStream_t s) {
    loomResult_t first = loomGroupStart();
    for (size_t i = 0; i < ins.size() && first == loomSuccess; ++i)
      first = loomAllGather(ins[i].data_ptr(), outs[i].data_ptr(), byteCount(ins[i]), loomUint8, comm_, s);
    loomResult_t end = loomGroupEnd();
    return first != loomSuccess ? first : end;
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::gather(std::vector<std::vector<at::Tensor>>& outputTensors,
                                                   std::vector<at::Tensor>& inputTensors,
                                                   const c10d::GatherOptions& opts) {
  const char* name = "gather";
  at::Tensor input = singleTensor(inputTensors, name);
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "loom: ", name, ": root ", root, " is not a rank of this group of ", size_);
  at::Tensor in = contiguousOf(input);
  auto op = newOp(name, input.device());
  std::vector<Transfer> transfers;
  if (rank_ == root) {
    TORCH_CHECK(outputTensors.size() == 1 && static_cast<int>(outputTensors[0].size()) == size_, "loom: ", name,
                ": the root needs one list of ", size_, " output tensors");
    const std::vector<at::Tensor>& outs = outputTensors[0];
    checkMatching(outs, input, name, "output tensor");
    at::Tensor flat = at::empty({size_ * input.numel()}, input.options());
    const size_t bytes = byteCount(in);
    auto* base = static_cast<char*>(flat.data_ptr());
    for (int r = 0; r < size_; ++r)
      if (r != rank_) transfers.push_back({false, base + r * bytes, bytes, r});
    // The root's own slot is copied before the group, in stream order.
    flat.narrow(0, rank_ * input.numel(), input.numel()).copy_(in.reshape({-1}));
    op->keepAlive = {in, flat};
    op->outputs = outs;
    op->copyOut = [flat, outs] { scatterInto(flat, outs); };
  } else {
    TORCH_CHECK(outputTensors.empty() || (outputTensors.size() == 1 && outputTensors[0].empty()), "loom: ", name,
                ": only the root (rank ", root, ") takes output tensors");
    transfers.push_back({true, in.data_ptr(), byteCount(in), root});
    op->keepAlive = {in};
  }
  return launchTransfers(OpType::GATHER, std::move(op), std::move(transfers));
}

// ---- Scatters -----------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> LoomBackend::scatter(std::vector<at::Tensor>& outputTensors,
                                                    std::vector<std::vector<at::Tensor>>& inputTensors,
                                                    const c10d::ScatterOptions& opts) {
  const char* name = "scatter";
  at::Tensor output = singleTensor(outputTensors, name);
  const int root = static_cast<int>(opts.rootRank);
  TORCH_CHECK(root >= 0 && root < size_, "loom: ", name, ": root ", root, " is not a rank of this group of ", size_);
  at::Tensor out = contiguousOf(output);
  auto op = newOp(name, output.device());
  op->outputs = {output};
  if (!out.is_same(output)) op->copyOut = [output, out] { output.copy_(out); };
  std::vector<Transfer> transfers;
  if (rank_ == root) {
    TORCH_CHECK(inputTensors.size() == 1 && static_cast<int>(inputTensors[0].size()) == size_, "loom: ", name,
                ": the root needs one list of ", size_, " input tensors");
    const std::vector<at::Tensor>& ins = inputTensors[0];
    checkMatching(ins, output, name, "input tensor");
    at::Tensor flat = flatten(ins);
    const size_t bytes = byteCount(out);
    auto* base = static_cast<char*>(flat.data_ptr());
    for (int r = 0; r < size_; ++r)
      if (r != rank_) transfers.push_back({true, base + r * bytes, bytes, r});
    out.view({-1}).copy_(flat.narrow(0, rank_ * output.numel(), output.numel()));
    op->keepAlive = {flat, out};
  } else {
    TORCH_CHECK(inputTensors.empty() || (inputTensors.size() == 1 && inputTensors[0].empty()), "loom: ", name,
                ": only the root (rank ", root, ") takes input tensors");
    transfers.push_back({false, out.data_ptr(), byteCount(out), root});
    op->keepAlive = {out};
  }
  return launchTransfers(OpType::SCATTER, std::move(op), std::move(transfers));
}

c10::intrusive_ptr<c10d::Work> LoomBackend::reduce_scatter(std::vector<at::Tensor>& outputTensors,
                                                           std::vector<std::vector<at::Tensor>>& inputTensors,
                                                           const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter";
  at::Tensor output = singleTensor(outputTensors, name);
  TORCH_CHECK(inputTensors.size() == 1, "loom: ", name, " takes one input list per process, got ",
              inputTensors.size());
  const std::vector<at::Tensor>& ins = inputTensors[0];
  TORCH_CHECK(static_cast<int>(ins.size()) == size_, "loom: ", name, " needs ", size_, " input tensors, got ",
              ins.size());
  checkMatching(ins, output, name, "input tensor");
  const loomDataType_t dtype = loomTypeOf(output, name);
  const Reduction red = reductionOf(opts.reduceOp, output, name);
  at::Tensor flat = flatten(ins);
  premultiply(red, flat);
  at::Tensor out = contiguousOf(output);
  auto op = newOp(name, output.device());
  op->keepAlive = {flat, out};
  op->outputs = {output};
  if (!out.is_same(output)) op->copyOut = [output, out] { output.copy_(out); };
  return launch(OpType::REDUCE_SCATTER, std::move(op), [&](loomStream_t s) {
    return loomReduceScatter(flat.data_ptr(), out.data_ptr(), out.numel(), dtype, red.op, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::_reduce_scatter_base(at::Tensor& outputBuffer, at::Tensor& inputBuffer,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const char* name = "_reduce_scatter_base";
  checkBuffers(outputBuffer, inputBuffer, -size_, name);
  const loomDataType_t dtype = loomTypeOf(outputBuffer, name);
  const Reduction red = reductionOf(opts.reduceOp, outputBuffer, name);
  at::Tensor in = reduceBufferOf(inputBuffer, red);
  at::Tensor out = contiguousOf(outputBuffer);
  auto op = newOp(name, outputBuffer.device());
  op->keepAlive = {in, out};
  op->outputs = {outputBuffer};
  if (!out.is_same(outputBuffer)) op->copyOut = [outputBuffer, out] { outputBuffer.copy_(out); };
  return launch(OpType::_REDUCE_SCATTER_BASE, std::move(op), [&](loomStream_t s) {
    return loomReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), dtype, red.op, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                            std::vector<at::Tensor>& inputs,
                                                                            const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "loom: ", name, " needs as many outputs as inputs (",
              inputs.size(), "), got ", outputs.size());
  std::vector<at::Tensor> ins, outs;
  std::vector<loomDataType_t> dtypes;
  std::vector<loomRedOp_t> redOps;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkBuffers(outputs[i], inputs[i], -size_, name);
    dtypes.push_back(loomTypeOf(outputs[i], name));
    const Reduction red = reductionOf(opts.reduceOp, outputs[i], name);
    redOps.push_back(red.op);
    ins.push_back(reduceBufferOf(inputs[i], red));
    outs.push_back(contiguousOf(outputs[i]));
  }
  auto op = newOp(name, inputs[0].device());
  op->keepAlive = ins;
  op->keepAlive.insert(op->keepAlive.end(), outs.begin(), outs.end());
  op->outputs = outputs;
  op->copyOut = [outputs, outs] {
    for (size_t i = 0; i < outs.size(); ++i)
      if (!outs[i].is_same(outputs[i])) outputs[i].copy_(outs[i]);
  };
  return launch(OpType::COALESCED, std::move(op), [&](loomStream_t s) {
    loomResult_t first = loomGroupStart();
    for (size_t i = 0; i < ins.size() && first == loomSuccess; ++i)
      first = loomReduceScatter(ins[i].data_ptr(), outs[i].data_ptr(), outs[i].numel(), dtypes[i], redOps[i], comm_, s);
    loomResult_t end = loomGroupEnd();
    return first != loomSuccess ? first : end;
  });
}

// ---- All to all -------------------------------------------------------------------------

namespace {

// Rows (dim 0) per peer: the given split sizes, or an equal share.
std::vector<int64_t> rowsPerPeer(const std::vector<int64_t>& splits, const at::Tensor& t, int nranks,
                                 const char* what) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (splits.empty()) {
    TORCH_CHECK(rows % nranks == 0, "loom: alltoall_base: ", what, " has ", rows,
                " rows, not divisible by the world size ", nranks);
    return std::vector<int64_t>(static_cast<size_t>(nranks), rows / nranks);
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == nranks, "loom: alltoall_base: ", what, " split sizes have ",
              splits.size(), " entries, expected ", nranks);
  TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows, "loom: alltoall_base: ", what,
              " split sizes do not add up to its ", rows, " rows");
  return splits;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> LoomBackend::alltoall_base(at::Tensor& outputBuffer, at::Tensor& inputBuffer,
                                                          std::vector<int64_t>& outputSplitSizes,
                                                          std::vector<int64_t>& inputSplitSizes,
                                                          const c10d::AllToAllOptions& opts) {
  const char* name = "alltoall_base";
  checkBuffers(outputBuffer, inputBuffer, 0, name);
  const std::vector<int64_t> sendRows = rowsPerPeer(inputSplitSizes, inputBuffer, size_, "input");
  const std::vector<int64_t> recvRows = rowsPerPeer(outputSplitSizes, outputBuffer, size_, "output");
  const int64_t inRowElems = inputBuffer.numel() / std::max<int64_t>(1, inputBuffer.dim() ? inputBuffer.size(0) : 1);
  const int64_t outRowElems =
      outputBuffer.numel() / std::max<int64_t>(1, outputBuffer.dim() ? outputBuffer.size(0) : 1);
  at::Tensor in = contiguousOf(inputBuffer);
  at::Tensor out = contiguousOf(outputBuffer);
  auto op = newOp(name, inputBuffer.device());
  op->keepAlive = {in, out};
  op->outputs = {outputBuffer};
  if (!out.is_same(outputBuffer)) op->copyOut = [outputBuffer, out] { outputBuffer.copy_(out); };

  const bool equal = std::all_of(sendRows.begin(), sendRows.end(), [&](int64_t r) { return r == sendRows[0]; }) &&
                     sendRows == recvRows && inRowElems == outRowElems;
  if (equal) {
    const size_t bytes = static_cast<size_t>(sendRows[0] * inRowElems) * in.element_size();
    return launch(OpType::ALLTOALL_BASE, std::move(op), [&](loomStream_t s) {
      return loomAllToAll(in.data_ptr(), out.data_ptr(), bytes, loomUint8, comm_, s);
    });
  }
  // Uneven splits: one fused group of sends and recvs, as Loom's own all-to-all.
  const size_t elemBytes = static_cast<size_t>(in.element_size());
  std::vector<Transfer> transfers;
  auto* send = static_cast<char*>(in.data_ptr());
  auto* recv = static_cast<char*>(out.data_ptr());
  for (int peer = 0; peer < size_; ++peer) {
    const size_t sendBytes = static_cast<size_t>(sendRows[peer] * inRowElems) * elemBytes;
    const size_t recvBytes = static_cast<size_t>(recvRows[peer] * outRowElems) * elemBytes;
    transfers.push_back({true, send, sendBytes, peer});
    transfers.push_back({false, recv, recvBytes, peer});
    send += sendBytes;
    recv += recvBytes;
  }
  return launchTransfers(OpType::ALLTOALL_BASE, std::move(op), std::move(transfers));
}

c10::intrusive_ptr<c10d::Work> LoomBackend::alltoall(std::vector<at::Tensor>& outputTensors,
                                                     std::vector<at::Tensor>& inputTensors,
                                                     const c10d::AllToAllOptions& opts) {
  const char* name = "alltoall";
  TORCH_CHECK(static_cast<int>(inputTensors.size()) == size_ && static_cast<int>(outputTensors.size()) == size_,
              "loom: ", name, " needs ", size_, " input and output tensors, got ", inputTensors.size(), " and ",
              outputTensors.size());
  checkSameDevice(inputTensors, name);
  checkSameDevice(outputTensors, name);
  TORCH_CHECK(inputTensors[0].device() == outputTensors[0].device(), "loom: ", name, ": outputs on ",
              outputTensors[0].device(), ", inputs on ", inputTensors[0].device());
  std::vector<at::Tensor> ins, outs;
  std::vector<Transfer> transfers;
  for (int peer = 0; peer < size_; ++peer) {
    TORCH_CHECK(inputTensors[peer].scalar_type() == outputTensors[peer].scalar_type(), "loom: ", name,
                ": input and output ", peer, " differ in dtype");
    ins.push_back(contiguousOf(inputTensors[peer]));
    outs.push_back(contiguousOf(outputTensors[peer]));
    transfers.push_back({true, ins.back().data_ptr(), byteCount(ins.back()), peer});
    transfers.push_back({false, outs.back().data_ptr(), byteCount(outs.back()), peer});
  }
  auto op = newOp(name, inputTensors[0].device());
  op->keepAlive = ins;
  op->keepAlive.insert(op->keepAlive.end(), outs.begin(), outs.end());
  op->outputs = outputTensors;
  op->copyOut = [outputTensors, outs] {
    for (size_t i = 0; i < outs.size(); ++i)
      if (!outs[i].is_same(outputTensors[i])) outputTensors[i].copy_(outs[i]);
  };
  return launchTransfers(OpType::ALLTOALL, std::move(op), std::move(transfers));
}

}  // namespace loom_torch
