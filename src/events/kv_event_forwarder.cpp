#include "events/kv_event_forwarder.h"

#include <format>

#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "events/kv_event_publisher.h"

namespace prefixd::events {
namespace {

// The control socket's address: one per forwarder (several may run in a process's tests).
std::string control_address(const void* forwarder) { return std::format("inproc://kv-event-forwarder-{}", forwarder); }

}  // namespace

struct KvEventForwarder::Sockets {
  zmq::context_t context{1};
  zmq::socket_t inner{context, zmq::socket_type::xsub};
  zmq::socket_t outer{context, zmq::socket_type::xpub};
  zmq::socket_t control{context, zmq::socket_type::pair};    // the proxy's end
  zmq::socket_t stopper{context, zmq::socket_type::pair};    // the destructor's end
};

std::expected<std::unique_ptr<KvEventForwarder>, std::string> KvEventForwarder::start(const std::string& public_endpoint,
                                                                                     int high_water_mark) {
  auto sockets = std::make_unique<Sockets>();
  std::string inner;
  try {
    sockets->inner.set(zmq::sockopt::rcvhwm, high_water_mark);
    sockets->inner.set(zmq::sockopt::linger, 0);
    sockets->inner.bind("tcp://127.0.0.1:*");
    inner = sockets->inner.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return std::unexpected(std::format("KV events: no loopback port for the models' publishers: {}", e.what()));
  }
  try {
    sockets->outer.set(zmq::sockopt::sndhwm, high_water_mark);
    sockets->outer.set(zmq::sockopt::linger, 1000);
    if (endpoint_binds(public_endpoint)) {
      sockets->outer.bind(public_endpoint);
    } else {
      sockets->outer.connect(public_endpoint);
    }
  } catch (const zmq::error_t& e) {
    return std::unexpected(std::format("--kv-events-endpoint {}: {}", public_endpoint, e.what()));
  }
  const std::string control = control_address(sockets.get());
  sockets->control.bind(control);
  sockets->stopper.connect(control);
  return std::unique_ptr<KvEventForwarder>(new KvEventForwarder(std::move(sockets), std::move(inner)));
}

KvEventForwarder::KvEventForwarder(std::unique_ptr<Sockets> sockets, std::string inner_endpoint)
    : sockets_(std::move(sockets)), inner_endpoint_(std::move(inner_endpoint)), thread_([this] {
        try {
          zmq::proxy_steerable(sockets_->inner, sockets_->outer, zmq::socket_ref(), sockets_->control);
        } catch (const zmq::error_t& e) {
          if (e.num() != ETERM) spdlog::error("KV events: the models' forwarder stopped: {}", e.what());
        }
      }) {}

KvEventForwarder::~KvEventForwarder() {
  try {
    sockets_->stopper.send(zmq::str_buffer("TERMINATE"), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    spdlog::warn("KV events: stopping the models' forwarder: {}", e.what());
  }
  thread_.join();
}

}  // namespace prefixd::events
