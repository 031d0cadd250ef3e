// prefixd events — one KV event address for several publishers: a server of several models
// (`serve --models-dir`) runs a server per model, each with its own publisher, and a subscriber
// such as llm-d's follows one address per pod and tells the models apart by topic (`kv@POD@MODEL`).
//
// The forwarder binds an XSUB socket on a loopback port that every model's publisher connects to,
// and an XPUB socket at the public address (bound or connected as a publisher's would be), and
// relays every message between them whole (topic, sequence number, payload) on its own thread.
// Subscriptions travel the other way, so a publisher sends only what someone subscribed to.
// Sequence numbers stay each publisher's own: a subscriber keeps one sequence per topic.
#pragma once

#include <expected>
#include <memory>
#include <string>
#include <thread>

namespace prefixd::events {

class KvEventForwarder {
 public:
  // Binds both sockets and starts relaying; an error names the address that failed.
  static std::expected<std::unique_ptr<KvEventForwarder>, std::string> start(const std::string& public_endpoint,
                                                                            int high_water_mark = 100000);
  ~KvEventForwarder();  // stops relaying and joins the thread
  KvEventForwarder(const KvEventForwarder&) = delete;
  KvEventForwarder& operator=(const KvEventForwarder&) = delete;

  // Where publishers connect: tcp://127.0.0.1:PORT.
  const std::string& inner_endpoint() const { return inner_endpoint_; }

 private:
  struct Sockets;
  KvEventForwarder(std::unique_ptr<Sockets> sockets, std::string inner_endpoint);

  std::unique_ptr<Sockets> sockets_;
  std::string inner_endpoint_;
  std::jthread thread_;  // last: it uses the sockets
};

}  // namespace prefixd::events
