// llama-server, the peer prefixd is compared with, as a child process for integration tests: on a
// free loopback port with 2 threads and no web UI, prefixd's and llama.cpp's environment variables
// stripped so that neither server's settings leak into it. Tests skip without it on PATH
// (have_program("llama-server")).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <httplib.h>

#include "bench/server_process.h"

namespace prefixd::testing {

struct LlamaServerPeer {
  // `args`: the model and its flags (`-m FILE ...`); the address, threads and --no-webui are added.
  explicit LlamaServerPeer(std::vector<std::string> args);
  int port;
  std::unique_ptr<bench::ServerProcess> process;
  std::unique_ptr<httplib::Client> client;  // read timeout 300 s
};

}  // namespace prefixd::testing
