// The sharding plugin's rendezvous for the fuzz tree: an address and no
// store. The real one (rendezvous.cc) hosts the rendezvous store (a thread and a socket), which the
// fuzz tree does not build; the dispatcher target's workers run no
// collective, so nothing ever connects to it.
#include "rendezvous.h"

namespace gt::sharding {
namespace {

class NoRendezvous final : public Rendezvous {
 public:
  const std::string& address() const override { return address_; }
  void MarkLost(uint64_t, int) override {}

 private:
  std::string address_ = "127.0.0.1:9/fuzz";
};

}  // namespace

Result<std::unique_ptr<Rendezvous>> StartStore(const std::string&, int64_t) {
  return std::unique_ptr<Rendezvous>(new NoRendezvous());
}

}  // namespace gt::sharding
