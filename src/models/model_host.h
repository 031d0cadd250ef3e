// prefixd models — a server of several models (`prefixd serve --models-dir DIR`): an HTTP front
// that runs each model in a `prefixd serve` child of its own and forwards every request to the
// model its `model` field names (a GET's `?model=`), as llama-server's router mode does.
//
// A model loads on its first request (or POST /models/load) and unloads on POST /models/unload,
// after --models-idle-seconds without a request, or when loading another needs the room
// (--models-max models, --models-max-bytes of model files): the least recently used model that is
// serving no request goes first, and one serving requests is never unloaded to make room. Each
// child is a whole server: its own prompt cache, disk directory, slots and metrics, so one
// model's load or work never stalls another's requests (they share only the machine's cores).
// GET /v1/models lists every model with its state; GET /metrics adds each loaded model's metrics,
// labelled model="ID", to the front's own.
// Must not know: what a request means beyond its `model` field.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/server.h"
#include "models/model_catalog.h"

namespace prefixd::models {

struct HostOptions {
  std::vector<CatalogModel> models;
  http::ServerOptions http;
  std::int32_t max_loaded = 4;        // --models-max: models loaded (or loading) at once; 0: no limit
  std::uint64_t max_bytes = 0;        // --models-max-bytes: their files' bytes at once; 0: no limit
  std::chrono::seconds idle_unload{0};  // --models-idle-seconds: unload after this long unused; 0: never
  bool autoload = true;               // --no-models-autoload: a request for an unloaded model is a 503
  std::chrono::seconds load_timeout{600};  // a child that is not healthy by then failed to load
  // The child's command line for `model` listening on 127.0.0.1:`port`.
  std::function<std::vector<std::string>(const CatalogModel& model, int port)> child_argv;
  // Whether a request may go on: nullopt when it may, else the refusal (status, JSON body). Asked
  // of every request but /health before anything else (a request for an unloaded model loads it,
  // which may unload another: a caller without a key must not); `admin_for` names what needs an
  // admin key (loading and unloading models, /metrics), empty when any key will do. Empty
  // function: no keys, anyone may.
  std::function<std::optional<std::pair<int, std::string>>(const http::Request&, std::string_view admin_for)> authorize;
};

class ModelHost {
 public:
  explicit ModelHost(HostOptions options);
  ~ModelHost();  // stops every child
  ModelHost(const ModelHost&) = delete;
  ModelHost& operator=(const ModelHost&) = delete;

  // Binds and serves until shutdown(); false (logged) when binding fails.
  bool run();
  // Thread-safe: stops accepting, lets requests in flight finish for up to `grace`.
  void shutdown(std::chrono::milliseconds grace);
  int bound_port() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// `text` (Prometheus exposition) with `label` (name="value") first in every sample's labels; HELP
// and TYPE lines of a family already in `seen` are dropped (the families of several models' texts
// are announced once).
std::string label_metrics(std::string_view text, std::string_view label, std::vector<std::string>& seen);

}  // namespace prefixd::models
