#include "api/server_routes.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "api/auth/access.h"
#include "api/control/cache_report.h"
#include "api/control/cache_scope_report.h"
#include "api/openai/responses.h"
#include "api/scheduler_metrics.h"
#include "api/transport_metrics.h"
#include "metrics/registry.h"

namespace prefixd::api {

http::Response model_answer(const RouteContext& route, const std::string& served_id, const engine::ModelInfo& model,
                            std::int64_t started, const std::string& id) {
  if (std::ranges::find(route.parse.model_names, id) == route.parse.model_names.end()) {
    return error_response(model_not_found(id));
  }
  return json_response(200, dump_json(model_body(served_id, model, started)));
}

http::Response props_answer(const std::string& served_id, const engine::Engine& engine, const std::string& chat_template,
                            std::int32_t slots) {
  const engine::ModelInfo& model = engine.model();
  const nlohmann::ordered_json body = {
      {"default_generation_settings", {{"n_ctx", engine.context_size()}, {"params", {{"n_predict", -1}}}}},
      {"total_slots", slots},
      {"model_alias", served_id},
      {"model_path", model.path},
      {"modalities", {{"vision", engine.vision() != nullptr}, {"audio", false}}},
      {"chat_template", chat_template},
      {"build_info", "prefixd"},
  };
  return json_response(200, dump_json(body));
}

http::Response metrics_answer(const RouteContext& route, const http::Request& req, const scheduler::Scheduler& scheduler,
                              const CacheControl& control, const http::Server& transport, const engine::ModelInfo& model,
                              const std::function<void(metrics::Registry&)>& extra) {
  const auto admin = route.caller(req).and_then([](const Caller& c) { return require_admin(c, "/metrics"); });
  if (!admin) return error_response(admin.error());
  const scheduler::SchedulerStats stats = scheduler.stats();
  const cache::CacheStats cache = scheduler.cache_stats();
  metrics::Registry registry;
  add_scheduler_metrics(registry, stats);
  add_cache_metrics(registry, cache);
  // The model-server protocol's optional cache layout (vLLM's cache_config_info): the hashed block
  // and how many of them the context holds, which a prefix-aware picker sizes its index by.
  const std::int32_t block = scheduler.cache_config().block_size;
  registry.gauge("prefixd_cache_config_info", "The prompt cache's block size in tokens and the context's blocks (labels).", 1,
                 {{"block_size", std::to_string(block)},
                  {"num_gpu_blocks", std::to_string(block > 0 ? stats.kv_cells_total / block : 0)}});
  if (const auto draft = scheduler.draft_cache_stats()) {
    // The draft model's own prompt cache (--model-draft): what /v1/cache/stats shows as `draft`.
    registry.counter("prefixd_draft_cache_hits_total", "Draft model lanes that reused a prefix from its own cache.",
                     static_cast<double>(draft->requests.hits));
    registry.counter("prefixd_draft_cache_tokens_reused_total", "Tokens the draft model's cache gave its lanes.",
                     static_cast<double>(draft->requests.tokens_reused));
    registry.counter("prefixd_draft_cache_prompt_tokens_total", "Tokens the draft model's lanes looked up in its cache.",
                     static_cast<double>(draft->requests.prompt_tokens));
    registry.gauge("prefixd_draft_cache_device_cells", "Cells the draft model's device tier holds.",
                   static_cast<double>(draft->device.cells));
  }
  add_compute_metrics(registry, cache, model);
  add_tenant_metrics(registry, cache, TenantNames(route.keys));
  control.add_metrics(registry);
  add_transport_metrics(registry, transport.stats());
  if (extra) extra(registry);
  return http::Response{.status = 200, .content_type = "text/plain; version=0.0.4; charset=utf-8", .body = registry.text()};
}

std::optional<webui::Site> web_site(const ServerOptions& options) {
  if (!options.webui) return std::nullopt;
  if (options.webui_dir.empty()) return webui::Site::builtin();
  try {
    return webui::Site::from_directory(options.webui_dir);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("--webui-dir: ") + e.what());
  }
}

http::Response web_file(webui::File file) {
  http::Response res{.status = 200, .content_type = std::move(file.content_type), .body = std::move(file.body)};
  res.headers.push_back({"Cache-Control", "no-cache"});
  res.headers.push_back({"X-Content-Type-Options", "nosniff"});
  res.headers.push_back({"Content-Security-Policy",
                         "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                         "connect-src 'self'; frame-ancestors 'none'"});
  return res;
}

}  // namespace prefixd::api
