#include "llama_server_peer.h"

#include "server_process.h"

namespace prefixd::testing {

LlamaServerPeer::LlamaServerPeer(std::vector<std::string> args) : port(pick_free_port()) {
  std::string binary = run_shell("command -v llama-server").output;
  while (!binary.empty() && (binary.back() == '\n' || binary.back() == ' ')) binary.pop_back();
  // One compute thread, as the prefixd it is compared with (server_process.cpp says why).
  args.insert(args.end(), {"--host", "127.0.0.1", "--port", std::to_string(port), "-t", "1", "--no-webui"});
  process = std::make_unique<bench::ServerProcess>(
      bench::ServerLaunch{.binary = binary, .args = args, .log_path = "/dev/null",
                          .strip_env_prefixes = {"PREFIXD_", "LLAMA_ARG_"}},
      port);
  client = std::make_unique<httplib::Client>("127.0.0.1", port);
  client->set_read_timeout(300);
}

}  // namespace prefixd::testing
