#include "discovery_server.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include "net/peer_address.h"
#include "service_common.h"

namespace gt::services {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// A request that has not arrived whole by then is dropped.
constexpr std::chrono::seconds kRequestTimeout{5};
// Longest request head accepted (request line and headers).
constexpr size_t kMaxRequestBytes = 8192;

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// `address` as it goes into a "host:port" target: IPv4-mapped IPv6 becomes
// IPv4, IPv6 gets brackets. Empty when `text` is not an IP address.
std::string TargetHost(const std::string& text) {
  boost::system::error_code ec;
  asio::ip::address a = asio::ip::make_address(text, ec);
  if (ec) return "";
  if (a.is_v6() && a.to_v6().is_v4_mapped()) a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a.is_v6() ? "[" + a.to_string() + "]" : a.to_string();
}

bool IsLoopback(const std::string& ip) {
  boost::system::error_code ec;
  asio::ip::address a = asio::ip::make_address(ip, ec);
  if (ec) return false;
  if (a.is_v6() && a.to_v6().is_v4_mapped()) a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a.is_loopback();
}

std::string Response(int code, const char* reason, const std::string& type, const std::string& body, bool head) {
  std::string out = "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\nContent-Type: " + type +
                    "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n";
  if (code == 405) out += "Allow: GET, HEAD\r\n";
  out += "\r\n";
  if (!head) out += body;
  return out;
}

// One HTTP exchange: read the request head, answer, close.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, const DiscoveryServer::Source& source)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), request_(kMaxRequestBytes), source_(source) {}

  void Start() {
    auto self = shared_from_this();
    timer_.expires_after(kRequestTimeout);
    timer_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec) self->Close();
    });
    asio::async_read_until(socket_, request_, "\r\n\r\n", [self](const boost::system::error_code& ec, size_t) {
      if (ec) return self->Close();  // timed out, too long, or the peer went away
      self->Answer();
    });
  }

 private:
  void Answer() {
    std::istream in(&request_);
    std::string method, target, version;
    in >> method >> target >> version;
    std::string path = target.substr(0, target.find('?'));
    bool head = method == "HEAD";
    if (method != "GET" && !head) {
      response_ = Response(405, "Method Not Allowed", "text/plain", "only GET and HEAD\n", false);
    } else if (path != "/targets") {
      response_ = Response(404, "Not Found", "text/plain", "not found; service discovery is at /targets\n", head);
    } else {
      boost::system::error_code ec;
      tcp::endpoint local = socket_.local_endpoint(ec);
      std::string local_ip = ec ? "127.0.0.1" : local.address().to_string();
      response_ = Response(200, "OK", "application/json", RenderDiscoveryTargets(source_(), local_ip), head);
    }
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(response_), [self](const boost::system::error_code&, size_t) {
      boost::system::error_code ignored;
      self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
      self->Close();
    });
  }

  void Close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
    timer_.cancel();
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  asio::streambuf request_;
  std::string response_;
  const DiscoveryServer::Source& source_;  // owned by the server, which outlives its io_context's handlers
};

}  // namespace

std::string RenderDiscoveryTargets(const std::vector<DiscoveryTarget>& targets, const std::string& local_ip) {
  std::string out = "[";
  for (const DiscoveryTarget& t : targets) {
    std::optional<HostPort> split = SplitHostPort(t.metrics);
    if (!split || split->port.empty()) continue;
    std::string host = split->host;
    const std::string& port = split->port;
    if (IsWildcardHost(host)) {
      std::string peer = TargetHost(t.peer_ip);
      host = !peer.empty() && !IsLoopback(t.peer_ip) ? peer : TargetHost(local_ip);
      if (host.empty()) host = "127.0.0.1";
    } else if (host.find(':') != std::string::npos) {
      host = "[" + host + "]";  // a bare IPv6 address
    }
    out += std::string(out.size() > 1 ? ",\n " : "\n ") + "{\"targets\": [" + JsonString(host + ":" + port) +
           "], \"labels\": {\"role\": " + JsonString(t.role) + "}}";
  }
  return out + (out.size() > 1 ? "\n]\n" : "]\n");
}

class DiscoveryServer::Impl {
 public:
  explicit Impl(Source source) : source_(std::move(source)), acceptor_(io_) {}

  ~Impl() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  Status Bind(const std::string& address, std::string* bound) {
    std::optional<HostPort> split = SplitHostPort(address);
    if (!split || split->port.empty())
      return InvalidArgument("discovery address '" + address + "' is not host:port");
    std::string host = split->host;
    const std::string& port = split->port;
    // Checked here: the resolver would keep the port's low 16 bits.
    if (!gt::ParsePortNumber(port))
      return InvalidArgument("discovery address '" + address + "': the port must be a number from 0 to 65535, not '" +
                             port + "'");
    if (IsWildcardHost(host)) host = "0.0.0.0";
    boost::system::error_code ec;
    tcp::resolver resolver(io_);
    auto found = resolver.resolve(host, port, tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || found.empty()) return Unavailable("cannot serve discovery on " + address + ": " + ec.message());
    tcp::endpoint endpoint = found.begin()->endpoint();
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Unavailable("cannot serve discovery on " + address + ": " + ec.message());
    tcp::endpoint local = acceptor_.local_endpoint(ec);
    std::string shown = local.address().is_unspecified() ? "127.0.0.1" : TargetHost(local.address().to_string());
    *bound = shown + ":" + std::to_string(local.port());
    return Status::Ok();
  }

  void Run() {
    Accept();
    thread_ = std::thread([this] {
      // A handler that throws (it should not) must not end the process.
      for (;;) {
        try {
          io_.run();
          return;
        } catch (const std::exception& e) {
          std::cerr << "discovery: " << e.what() << "\n";
        }
      }
    });
  }

 private:
  void Accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) std::make_shared<Connection>(std::move(socket), source_)->Start();
      Accept();
    });
  }

  Source source_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
};

DiscoveryServer::DiscoveryServer(std::unique_ptr<Impl> impl, std::string bound)
    : impl_(std::move(impl)), bound_(std::move(bound)) {}

DiscoveryServer::~DiscoveryServer() = default;

Result<std::unique_ptr<DiscoveryServer>> DiscoveryServer::Start(const std::string& address, Source source) {
  auto impl = std::make_unique<Impl>(std::move(source));
  std::string bound;
  if (Status s = impl->Bind(address, &bound); !s.ok()) return s;
  impl->Run();
  return std::unique_ptr<DiscoveryServer>(new DiscoveryServer(std::move(impl), std::move(bound)));
}

}  // namespace gt::services
