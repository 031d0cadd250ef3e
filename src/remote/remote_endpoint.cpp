#include "remote/remote_endpoint.h"

#include <charconv>

namespace prefixd::remote {
namespace {

std::expected<int, std::string> parse_port(std::string_view text) {
  int port = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, port);
  if (text.empty() || ec != std::errc{} || ptr != end || port < 1 || port > 65535) {
    return std::unexpected("port must be a number from 1 to 65535, got '" + std::string(text) + "'");
  }
  return port;
}

bool valid_host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_';
}

}  // namespace

std::expected<RemoteEndpoint, std::string> parse_node_address(std::string_view address) {
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return std::unexpected("node address '" + std::string(address) + "' has no ':PORT'");
  }
  const auto host = address.substr(0, colon);
  for (char c : host) {
    if (!valid_host_char(c)) {
      return std::unexpected("node address '" + std::string(address) + "' has an invalid host");
    }
  }
  auto port = parse_port(address.substr(colon + 1));
  if (!port) return std::unexpected("node address '" + std::string(address) + "': " + port.error());
  return RemoteEndpoint{std::string(host), *port};
}

std::expected<RemoteEndpoint, std::string> parse_remote_url(std::string_view url) {
  const auto fail = [&](const std::string& why) {
    return std::unexpected("remote URL '" + std::string(url) + "' is invalid: " + why +
                           " (expected redis://HOST:PORT)");
  };
  constexpr std::string_view scheme = "redis://";
  if (!url.starts_with(scheme)) return fail("the scheme must be redis://");
  auto rest = url.substr(scheme.size());
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find('@') != std::string_view::npos) return fail("user info is not supported");
  if (rest.find('/') != std::string_view::npos) return fail("a path or database number is not supported");
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos) return fail("the port is missing");
  if (colon == 0) return fail("the host is missing");
  auto endpoint = parse_node_address(rest);
  if (!endpoint) return fail(endpoint.error());
  return endpoint;
}

}  // namespace prefixd::remote
