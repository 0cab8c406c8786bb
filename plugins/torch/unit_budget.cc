#include "unit_budget.h"

#include <algorithm>
#include <cstdio>

namespace gt::torch_backend {
namespace {

std::string Mib(uint64_t bytes) {
  char text[48];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

std::optional<std::string> UnitBudget::Refusal(uint64_t template_bytes, uint64_t compiled_bytes) const {
  if (limit_ == 0) return std::nullopt;
  const uint64_t needed = templates_ + template_bytes + compiled_bytes;
  if (needed <= limit_) return std::nullopt;
  return "the worker's compiled units would hold " + Mib(needed) + " (this unit " +
         Mib(template_bytes + compiled_bytes) + ", the other units' templates " + Mib(templates_) +
         "), over its limit of " + Mib(limit_) + " (torch backend option unit_cache_mib)";
}

void UnitBudget::Add(uint64_t key, ClientId client, uint64_t template_bytes) {
  Entry& e = units_[key];
  e.template_bytes = template_bytes;
  e.definers = {client};
  e.recent = recent_.insert(recent_.end(), key);
  held_ += template_bytes;
  templates_ += template_bytes;
  charged_[client] += template_bytes;
}

void UnitBudget::AddDefiner(uint64_t key, ClientId client) {
  auto it = units_.find(key);
  if (it == units_.end()) return;
  std::vector<ClientId>& definers = it->second.definers;
  if (std::find(definers.begin(), definers.end(), client) == definers.end()) definers.push_back(client);
}

void UnitBudget::SetCompiled(uint64_t key, uint64_t bytes) {
  auto it = units_.find(key);
  if (it == units_.end()) return;
  Entry& e = it->second;
  held_ = held_ - e.compiled_bytes + bytes;
  charged_[e.definers.front()] += bytes - e.compiled_bytes;  // wraps back when smaller: unsigned arithmetic
  e.compiled_bytes = bytes;
  Touch(key);
}

void UnitBudget::Touch(uint64_t key) {
  auto it = units_.find(key);
  if (it == units_.end()) return;
  recent_.splice(recent_.end(), recent_, it->second.recent);
}

std::vector<uint64_t> UnitBudget::Evict(uint64_t room, std::optional<uint64_t> keep) {
  std::vector<uint64_t> evicted;
  if (limit_ == 0) return evicted;
  for (auto it = recent_.begin(); it != recent_.end() && held_ + room > limit_; ++it) {
    Entry& e = units_.at(*it);
    if (e.compiled_bytes == 0 || (keep && *it == *keep)) continue;
    held_ -= e.compiled_bytes;
    charged_[e.definers.front()] -= e.compiled_bytes;
    e.compiled_bytes = 0;
    evicted.push_back(*it);
  }
  return evicted;
}

std::vector<uint64_t> UnitBudget::DropClient(ClientId client) {
  std::vector<uint64_t> forgotten;
  for (auto it = units_.begin(); it != units_.end();) {
    Entry& e = it->second;
    auto at = std::find(e.definers.begin(), e.definers.end(), client);
    if (at == e.definers.end()) {
      ++it;
      continue;
    }
    const bool was_charged = at == e.definers.begin();
    e.definers.erase(at);
    const uint64_t bytes = e.template_bytes + e.compiled_bytes;
    if (!e.definers.empty()) {
      if (was_charged) charged_[e.definers.front()] += bytes;  // the next definer pays from now on
      ++it;
      continue;
    }
    held_ -= bytes;
    templates_ -= e.template_bytes;
    recent_.erase(e.recent);
    forgotten.push_back(it->first);
    it = units_.erase(it);
  }
  charged_.erase(client);
  return forgotten;
}

uint64_t UnitBudget::ChargedTo(ClientId client) const {
  auto it = charged_.find(client);
  return it == charged_.end() ? 0 : it->second;
}

}  // namespace gt::torch_backend
