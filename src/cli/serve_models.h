// prefixd cli — `prefixd serve --models-dir DIR`: several models behind one address
// (models/model_host.h). Each model runs in a `prefixd serve` child given this command's own flags
// (those that name the front's address, the folder and its limits left out) and its model, its
// projector, its name as --alias, a loopback port and a disk tier folder of its own; with KV
// events, the front's forwarder as its publisher's address and a topic of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "api/auth/tenants.h"
#include "http/server.h"

namespace prefixd::cli {

class ServerSignals;

struct ModelHostFlags {
  std::string dir;                 // --models-dir; empty: one model (--model)
  std::int32_t max_loaded = 4;     // --models-max (llama-server's default); 0: no limit
  std::uint64_t max_bytes = 0;     // --models-max-bytes; 0: no limit
  std::int64_t idle_seconds = 0;   // --models-idle-seconds; 0: never
  bool autoload = true;            // --models-autoload / --no-models-autoload
};

void add_model_host_options(CLI::App& cmd, ModelHostFlags& flags);

struct ModelHostSetup {
  http::ServerOptions http;
  std::shared_ptr<api::KeyStore> keys;  // null: no keys (anyone may load and unload)
  bool cache_disk = true;               // false: --no-cache-disk (the children get it too)
  std::string disk_path;                // --cache-disk-path: each model's folder is one under it
  std::chrono::milliseconds grace{0};
  // --kv-events-endpoint and --kv-events-topic: with an endpoint, the front relays every model's
  // KV events there (events/kv_event_forwarder.h), each model under its own topic (model_topic).
  std::string kv_events_endpoint;
  std::string kv_events_topic;
};

// A model's KV events topic: `topic` with each "{model}" replaced by the model's name; without
// "{model}", the name follows the topic after an '@' (`kv@pod-1` gives `kv@pod-1@NAME`, llm-d's
// form), or is the topic when none is set.
std::string model_topic(const std::string& topic, const std::string& model);

// Serves until a signal stops it; the process's exit status.
int run_model_host(const ModelHostFlags& flags, const ModelHostSetup& setup, ServerSignals& signals);

}  // namespace prefixd::cli
