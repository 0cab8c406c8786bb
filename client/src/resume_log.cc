#include "resume_log.h"

#include "ir/codec.h"

namespace gt::client_internal {

void ResumeLog::Keep(wire::Envelope&& batch, std::vector<BlobPtr>&& frames) {
  size_t bytes = batch.ByteSizeLong();
  for (const BlobPtr& f : frames) bytes += f->size();
  kept_bytes_ += bytes;
  if (not_resumable_.empty() && kept_bytes_ > limit_bytes_)
    not_resumable_ = "it sent " + std::to_string(kept_bytes_ >> 20) + " MiB since its last sync, more than the " +
                     std::to_string(limit_bytes_ >> 20) + " MiB a client keeps for a dispatcher restart";
  kept_.push_back({std::move(batch), std::move(frames)});
}

void ResumeLog::Freed(TensorId id) {
  auto it = live_.find(id);
  if (it == live_.end()) return;
  freeing_.insert(*it);
  live_.erase(it);
}

void ResumeLog::Failed(uint64_t seq) {
  for (auto& [id, live] : live_)
    if (live.seq == seq) live.seq = kMayBeGone;
}

void ResumeLog::Answered(uint64_t sync_seq, uint64_t sync_id) {
  kept_.clear();
  freeing_.clear();  // every free sent before the sync ran
  kept_bytes_ = 0;
  not_resumable_.clear();
  answered_seq_ = sync_seq;
  answered_sync_ = sync_id;
}

void ResumeLog::Configured(const std::string& signal, std::optional<Instruction> configure) {
  if (configure) configures_[signal] = std::move(*configure);
  else configures_.erase(signal);
}

void ResumeLog::Emitted(const Instruction& inst) {
  if (inst.op == Op::kDefineUnit) units_.push_back(inst);
}

wire::Envelope ResumeLog::MakeResume(uint64_t token, std::vector<BlobPtr>* frames) const {
  wire::Envelope resume;
  resume.set_kind(wire::Envelope::RESUME);
  resume.set_token(token);
  resume.set_seq(answered_seq_);
  resume.set_sync_id(answered_sync_);
  auto add = [&resume](TensorId id, const Live& live, uint64_t seq) {
    wire::ResumeTensor* t = resume.add_live();
    t->set_id(id);
    for (int64_t d : live.meta.shape) t->add_shape(d);
    t->set_dtype(static_cast<uint32_t>(live.meta.dtype));
    t->set_seq(seq);
  };
  for (const auto& [id, live] : live_) add(id, live, live.seq);
  for (const auto& [id, live] : freeing_) add(id, live, kMayBeGone);
  // What the new dispatcher must know before the replay, which it runs
  // through its stages first: the configs in force (a replayed configure
  // that the workers' received seqs cover is dropped with the rest) and every
  // unit defined (the workers kept theirs and accept them again).
  for (const auto& [signal, configure] : configures_) EncodeInstruction(configure, resume.add_instructions(), frames);
  for (const Instruction& unit : units_) EncodeInstruction(unit, resume.add_instructions(), frames);
  return resume;
}

}  // namespace gt::client_internal
