// prefixd remote — where a remote key-value node listens, parsed from `redis://HOST:PORT`.
#pragma once

#include <expected>
#include <string>
#include <string_view>

namespace prefixd::remote {

struct RemoteEndpoint {
  std::string host;  // a name or an IPv4 address; IPv6 in brackets is not accepted
  int port = 0;      // 1..65535
  bool operator==(const RemoteEndpoint&) const = default;
  // "HOST:PORT", the form CLUSTER SLOTS and MOVED/ASK use: the key of a node in the slot map.
  std::string address() const { return host + ":" + std::to_string(port); }
};

// Parses `redis://HOST:PORT` (a trailing "/" is allowed). Anything else — another scheme, user
// info, a database number, a missing or out-of-range port — is an error message naming the URL.
std::expected<RemoteEndpoint, std::string> parse_remote_url(std::string_view url);

// Parses "HOST:PORT" as it appears in MOVED/ASK replies (the host may be empty: the sender's own).
std::expected<RemoteEndpoint, std::string> parse_node_address(std::string_view address);

}  // namespace prefixd::remote
