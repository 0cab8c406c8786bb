#include "dispatcher/client_table.h"

#include <cstring>

#include "gt/op_attrs.h"

namespace gt {
namespace {

// A 64-bit hash of a unit template's bytes (splitmix64 finalizer per word).
uint64_t ContentKey(const Blob& bytes) {
  auto mix = [](uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(bytes.size() ^ 0x6a09e667f3bcc909ull);
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    h = mix(h ^ word);
  }
  uint64_t tail = 0;
  if (i < bytes.size()) std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  return mix(h ^ tail ^ 0x9e3779b97f4a7c15ull);
}

}  // namespace

ClientState& ClientTable::ForRoute(const std::string& route, uint64_t token, bool* created) {
  if (auto it = by_route_.find(route); it != by_route_.end()) {
    ClientState& c = clients_[it->second];
    c.last_seen = Clock::now();
    *created = false;
    return c;
  }
  const ClientId id = TakeFreeId();
  ClientState& c = clients_[id];
  c.id = id;
  c.route = route;
  c.token = token;
  c.last_seen = Clock::now();
  by_route_[route] = id;
  closed_.erase(route);  // a new session on it
  if (token != 0) by_token_[token] = id;
  *created = true;
  return c;
}

ClientId ClientTable::TakeFreeId() {
  while (next_id_ == 0 || clients_.count(next_id_)) ++next_id_;
  return next_id_++;
}

ClientState& ClientTable::Adopt(ClientId id, const std::string& route, uint64_t token) {
  if (id == 0) id = TakeFreeId();
  ReserveThrough(id);
  ClientState& c = clients_[id];
  c.id = id;
  c.route = route;
  c.token = token;
  c.last_seen = Clock::now();
  by_route_[route] = id;
  closed_.erase(route);
  if (token != 0) by_token_[token] = id;
  return c;
}

void ClientTable::Rebind(ClientId id, const std::string& route) {
  ClientState& c = clients_.at(id);
  by_route_.erase(c.route);
  c.route = route;
  c.last_seen = Clock::now();
  by_route_[route] = id;
  closed_.erase(route);
}

ClientState* ClientTable::Find(ClientId id) {
  auto it = clients_.find(id);
  return it == clients_.end() ? nullptr : &it->second;
}

ClientState* ClientTable::FindByRoute(const std::string& route) {
  auto it = by_route_.find(route);
  return it == by_route_.end() ? nullptr : Find(it->second);
}

ClientState* ClientTable::FindByToken(uint64_t token) {
  auto it = by_token_.find(token);
  return it == by_token_.end() ? nullptr : Find(it->second);
}

void ClientTable::Erase(ClientId id) {
  auto it = clients_.find(id);
  if (it == clients_.end()) return;
  by_route_.erase(it->second.route);
  if (it->second.token) by_token_.erase(it->second.token);
  clients_.erase(it);
}

void ClientTable::Close(ClientId id, const std::string& why) {
  ClientState* c = Find(id);
  if (!c) return;
  const uint64_t number = ++closures_;
  closed_[c->route] = {why, number};
  closed_order_.emplace_back(c->route, number);
  if (closed_order_.size() > kRememberedClosures) {
    const auto& [route, oldest] = closed_order_.front();
    auto it = closed_.find(route);
    if (it != closed_.end() && it->second.second == oldest) closed_.erase(it);
    closed_order_.pop_front();
  }
  Erase(id);
}

std::optional<std::string> ClientTable::ClosedWhy(const std::string& route) const {
  auto it = closed_.find(route);
  if (it == closed_.end()) return std::nullopt;
  return it->second.first;
}

size_t ClientTable::SessionsOf(const std::string& key) const {
  size_t n = 0;
  for (const auto& [id, c] : clients_) n += !key.empty() && c.key == key;
  return n;
}

std::vector<ClientId> ClientTable::Silent(Clock::time_point now, Clock::duration timeout) const {
  std::vector<ClientId> silent;
  for (const auto& [id, c] : clients_)
    if (c.token != 0 && now - c.last_seen > timeout) silent.push_back(id);
  return silent;
}

void ClientTable::KeyUnitByContent(ClientState& c, Instruction& inst) {
  if (inst.op == Op::kRunUnit) {
    if (auto it = c.unit_keys.find(UnitKey(inst)); it != c.unit_keys.end()) SetUnitKey(inst, it->second);
    return;  // else the router finds no such unit of this client's
  }
  if (!inst.payload) return;  // refused by the router
  const uint64_t content = ContentKey(*inst.payload);
  c.unit_keys[UnitKey(inst)] = content;
  SetUnitKey(inst, content);
}

}  // namespace gt
