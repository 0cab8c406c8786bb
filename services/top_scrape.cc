// The scraping half of `gt top` (top.h): Prometheus' text exposition
// format, the discovery answer, and one HTTP GET.
#include "top.h"

#include <chrono>
#include <sstream>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>

#include "gt/endpoint.h"
#include "service_common.h"

namespace gt::services {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// Unescapes a label value of the exposition format (\\, \", \n).
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      ++i;
      out += s[i] == 'n' ? '\n' : s[i];
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::vector<MetricSample> ParseExposition(const std::string& text) {
  std::vector<MetricSample> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    MetricSample s;
    size_t i = line.find_first_of("{ ");
    if (i == std::string::npos || i == 0) continue;
    s.name = line.substr(0, i);
    bool ok = true;
    if (line[i] == '{') {
      ++i;
      while (ok && i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          ok = false;
          break;
        }
        std::string key = line.substr(i, eq - i);
        size_t j = eq + 2;
        while (j < line.size() && line[j] != '"') j += line[j] == '\\' ? 2 : 1;
        if (j >= line.size()) {
          ok = false;
          break;
        }
        s.labels[key] = Unescape(line.substr(eq + 2, j - eq - 2));
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) ok = false;
      ++i;  // past '}'
    }
    if (!ok) continue;
    std::istringstream value(line.substr(i));
    std::string v;
    value >> v;
    if (v.empty()) continue;
    if (v == "Nan" || v == "NaN") {
      s.value = NAN;
    } else if (v == "+Inf") {
      s.value = INFINITY;
    } else if (v == "-Inf") {
      s.value = -INFINITY;
    } else {
      char* end = nullptr;
      s.value = std::strtod(v.c_str(), &end);
      if (end == v.c_str()) continue;
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<std::string>> ParseDiscoveryTargets(const std::string& json) {
  namespace pt = boost::property_tree;
  pt::ptree root;
  try {
    std::istringstream in(json);
    pt::read_json(in, root);
  } catch (const pt::json_parser_error& e) {
    return InvalidArgument("not JSON: " + std::string(e.what()));
  }
  std::vector<std::string> out;
  for (const auto& [key, group] : root) {
    if (!key.empty()) return InvalidArgument("expected a JSON list of target groups");
    auto targets = group.get_child_optional("targets");
    if (!targets) return InvalidArgument("a target group has no \"targets\"");
    for (const auto& [k, t] : *targets) out.push_back(t.get_value<std::string>());
  }
  return out;
}

Result<std::string> HttpGetBody(const std::string& address, const std::string& path, int timeout_ms) {
  std::optional<HostPort> split = SplitHostPort(address);
  if (!split) return InvalidArgument("'" + address + "' is not host:port");
  const std::string& host = split->host;
  const std::string& port = split->port;
  asio::io_context io;
  tcp::resolver resolver(io);
  boost::system::error_code ec;
  auto endpoints = resolver.resolve(host.empty() ? "127.0.0.1" : host, port, ec);
  if (ec) return Unavailable("cannot resolve " + address + ": " + ec.message());
  tcp::socket socket(io);
  std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + address + "\r\nAccept: */*\r\n\r\n";
  std::string response;
  boost::system::error_code result = asio::error::would_block;
  asio::async_connect(socket, endpoints, [&](const boost::system::error_code& e, const tcp::endpoint&) {
    if (e) {
      result = e;
      return;
    }
    asio::async_write(socket, asio::buffer(request), [&](const boost::system::error_code& e2, size_t) {
      if (e2) {
        result = e2;
        return;
      }
      asio::async_read(socket, asio::dynamic_buffer(response), [&](const boost::system::error_code& e3, size_t) {
        result = e3 == asio::error::eof ? boost::system::error_code() : e3;
      });
    });
  });
  io.run_for(std::chrono::milliseconds(timeout_ms));
  if (result == asio::error::would_block)
    return Unavailable("http://" + address + path + ": no answer within " + std::to_string(timeout_ms) + " ms");
  if (result) return Unavailable("http://" + address + path + ": " + result.message());
  size_t head_end = response.find("\r\n\r\n");
  std::istringstream status_line(response.substr(0, response.find("\r\n")));
  std::string version;
  int code = 0;
  status_line >> version >> code;
  if (head_end == std::string::npos || code != 200)
    return Unavailable("http://" + address + path + ": HTTP status " + std::to_string(code));
  return response.substr(head_end + 4);
}

}  // namespace gt::services
