// The communicator's side of online tuning (tuner/online_tuner.h): which
// slot a call belongs to, which candidate an exploring call runs, and the
// agreement that ends an exploration.
#include "src/comm/comm.h"
#include "common/format.h"
#include "src/tuner/cost_model.h"

namespace loom {

tuner::OnlineSlot* Communicator::onlineSlotFor(const algo::CollArgs& args, const tuner::ProtoContexts& available) {
  if (!online_) return nullptr;
  const tuner::OnlineKey key{args.type, args.count, args.dtype, args.op, args.root};
  return online_->slotFor(key, tuner::collectiveBytes(args, nranks_),
                          [&] { return tuner_->shortlist(args, available); });
}

Status Communicator::onlineChoice(const algo::CollArgs& args, tuner::OnlineSlot& slot, const WaitContext& wait,
                                  tuner::Choice* choice, bool* exploring, bool* timed) {
  *exploring = *timed = false;
  if (slot.settled()) {
    *choice = slot.winner();
    slot.countSettledCall();
    return Status::ok();
  }
  if (slot.agreementDue()) {
    Status agreed = agreeOnline(args, slot, wait);
    if (!agreed.isOk()) {
      agreed = agreed.withContext(strprintf("online tuning on rank %d: ", rank_));
      recordError(agreed);
      return agreed;
    }
    choiceMemo_.valid = false;  // rebuilt with the winner by the next call
    *choice = slot.winner();
    slot.countSettledCall();
    return Status::ok();
  }
  *choice = slot.candidates()[slot.current()];
  *exploring = true;
  *timed = slot.timed();
  return Status::ok();
}

Status Communicator::agreeOnline(const algo::CollArgs& call, tuner::OnlineSlot& slot, const WaitContext& wait) {
  // Exact integer sums: every rank computes the same argmin.
  std::vector<int64_t> times = slot.summary();
  algo::CollArgs sum;
  sum.type = algo::CollType::kAllReduce;
  sum.sendbuf = times.data();
  sum.recvbuf = times.data();
  sum.count = times.size();
  sum.dtype = DataType::kInt64;
  sum.op = RedOp::kSum;
  LOOM_TRY(runner_.runWithinOperation(sum, wait));
  slot.decide(times, nranks_);
  if (log_.enabled(LogLevel::kInfo, kSubsysTuner)) {
    std::string measured;
    const std::vector<double> weighed = slot.evidence();
    for (size_t i = 0; i < times.size(); ++i)
      measured += strprintf(" %s/%s=%.1f (weighed with earlier checks %.3f)", slot.candidates()[i].algorithm->name,
                            transport::protocolName(slot.candidates()[i].proto),
                            static_cast<double>(times[i]) / nranks_ / 1e3, i < weighed.size() ? weighed[i] : 0.0);
    LOOM_INFO(log_, kSubsysTuner,
              "online: %s %.0f B (%d ranks): %s (decision %d), measured us (median per rank, mean over ranks):%s; "
              "next check in %llu calls",
              algo::collTypeName(call.type), tuner::collectiveBytes(call, nranks_), nranks_,
              strprintf("%s/%s", slot.winner().algorithm->name, transport::protocolName(slot.winner().proto)).c_str(),
              slot.decisions(), measured.c_str(), static_cast<unsigned long long>(slot.period()));
  }
  return Status::ok();
}

}  // namespace loom
