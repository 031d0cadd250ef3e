// prefixd integration tests — a plain TCP connection to the server, for what an HTTP client
// library will not do: trickle bytes, pipeline, half-close, reset, hold sockets idle.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace prefixd::testing {

class RawConnection {
 public:
  // Connects to 127.0.0.1:port; connected() is false if that failed.
  explicit RawConnection(int port);
  ~RawConnection();
  RawConnection(RawConnection&& other) noexcept;
  RawConnection& operator=(RawConnection&&) = delete;
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  bool send(std::string_view bytes);
  // Stops sending (the server reads end of input) but keeps reading.
  void shutdown_send();
  // Closes with a reset instead of an orderly close.
  void reset();
  // Reads until the server closes, `limit` passes, or `enough` bytes arrived; returns what came.
  std::string read_for(std::chrono::milliseconds limit, std::size_t enough = std::string::npos);
  // True once the server has closed its side (a read returns end of input) within `limit`.
  bool closed_by_peer_within(std::chrono::milliseconds limit);

 private:
  int fd_ = -1;
};

// The bytes of an HTTP/1.1 POST of a JSON body to `path`; with `close`, the server closes the
// connection after its response (so a read until it closes ends with the response).
std::string json_post_bytes(std::string_view path, std::string_view body, bool close = false);

// Raises this process's open-file limit to its hard limit; returns the limit in effect.
std::size_t raise_test_open_file_limit();

}  // namespace prefixd::testing
