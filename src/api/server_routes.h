// prefixd api — the routes about the server itself rather than a model's work: the models it
// serves (GET /v1/models, /v1/models/{id}), its properties (GET /props), its metrics (GET /metrics)
// and the web UI's files.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "api/control/cache_control.h"
#include "api/route_support.h"
#include "api/server.h"
#include "engine/engine.h"
#include "http/server.h"
#include "scheduler/scheduler.h"
#include "webui/site.h"

namespace prefixd::api {

// GET /v1/models/{id}: a 404 unless `id` is one of the names the server answers to.
http::Response model_answer(const RouteContext& route, const std::string& served_id, const engine::ModelInfo& model,
                            std::int64_t started, const std::string& id);

// GET /props, llama-server's description of itself that clients read before they talk to it: the
// context (`default_generation_settings.n_ctx`, all of it, which prefixd pools among the running
// requests), `total_slots` (requests decoded at once), the model's alias and path, its chat
// template and modalities.
http::Response props_answer(const std::string& served_id, const engine::Engine& engine, const std::string& chat_template,
                            std::int32_t slots);

// GET /metrics, for admins: the scheduler's, the cache's (overall and by tenant), the control
// plane's and the transport's families, then `extra`'s (ServerOptions::extra_metrics; may be empty).
http::Response metrics_answer(const RouteContext& route, const http::Request& req, const scheduler::Scheduler& scheduler,
                              const CacheControl& control, const http::Server& transport, const engine::ModelInfo& model,
                              const std::function<void(metrics::Registry&)>& extra);

// The web UI's files, unless --no-webui. Throws std::runtime_error for a --webui-dir it cannot use.
std::optional<webui::Site> web_site(const ServerOptions& options);

// A UI file. The policy keeps the pages to this server: no script, style or connection elsewhere
// (the UI works offline, and nothing a model writes can load code); no-cache, so that a new
// binary's UI is seen at once.
http::Response web_file(webui::File file);

}  // namespace prefixd::api
