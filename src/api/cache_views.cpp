#include "api/cache_views.h"

#include <format>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "api/auth/access.h"
#include "api/control/cache_report.h"
#include "api/control/cache_scope_report.h"
#include "api/control/cache_tree_report.h"
#include "api/openai/request_parser.h"
#include "api/openai/responses.h"
#include "api/routing/cache_routing.h"

namespace prefixd::api {

CacheViews::CacheViews(const engine::Engine& engine, scheduler::Scheduler& scheduler, const CacheControl& control,
                       const ChatService& chats, const RouteContext& route, std::int32_t slots,
                       KvEventsAdvert kv_events)
    : engine_(engine),
      scheduler_(scheduler),
      control_(control),
      chats_(chats),
      route_(route),
      slots_(slots),
      server_id_(random_server_id()),
      kv_events_(std::move(kv_events)),
      model_key_(cache::model_key(engine_.model().fingerprint, engine_.model().runtime_signature)) {}

http::Response CacheViews::stats(const http::Request& req) const {
  const auto tenant = route_.viewed_tenant(req);
  if (!tenant) return error_response(tenant.error());
  nlohmann::ordered_json view = cache_view_json(scheduler_.cache_stats(), engine_.model(), *tenant, TenantNames(route_.keys));
  // The control plane's keys of the tenant viewed (an admin viewing every tenant: its own).
  const std::string key_tenant = tenant->value_or(route_.caller(req).value_or(Caller{}).tenant);
  view["keys"] = control_.key_count(key_tenant);
  view["meta_by_key"] = control_.meta_by_key(key_tenant);
  view["key_list"] = control_.key_list(key_tenant);
  const scheduler::SchedulerStats stats = scheduler_.stats();
  // Server-wide, so only in the whole cache's view: the prefill time the cache saved.
  if (!*tenant) view["seconds_saved"] = stats.prefill_seconds_saved;
  // The draft model's own prompt cache (--model-draft), server-wide: its prefixes are the
  // target's, read by another model.
  if (const auto draft = scheduler_.draft_cache_stats(); draft && !*tenant) {
    view["draft"] = {{"hits", draft->requests.hits},
                     {"misses", draft->requests.misses},
                     {"tokens_reused", draft->requests.tokens_reused},
                     {"prompt_tokens", draft->requests.prompt_tokens},
                     {"device_entries", draft->device.entries},
                     {"device_cells", draft->device.cells},
                     {"host_entries", draft->host.entries},
                     {"host_bytes", draft->host.bytes},
                     {"disk_files", draft->disk.files},
                     {"disk_bytes", draft->disk.bytes},
                     {"disk_queue_bytes", draft->disk.queue_bytes},
                     {"disk_hits", draft->disk.hits}};
  }
  if (engine_.vision() != nullptr) {
    view["images"] = {{"total", stats.images_total},
                      {"cached", stats.images_cached_total},
                      {"encoded", stats.images_encoded_total},
                      {"embedding_hits", stats.image_embedding_hits_total},
                      {"embeddings", stats.image_embeddings},
                      {"embedding_bytes", stats.image_embedding_bytes},
                      {"embedding_capacity_bytes", stats.image_embedding_capacity_bytes}};
  }
  return json_response(200, view.dump());
}

http::Response CacheViews::reset(const http::Request& req) {
  const auto tenant = reset_tenant(req);
  if (!tenant) return error_response(tenant.error());
  const cache::ResetReport report =
      scheduler_.reset_cache(*tenant ? std::optional(tenant_scope(**tenant)) : std::nullopt);
  spdlog::info("cache reset ({}): freed {} entries, {} bytes", tenant->value_or("every tenant"), report.entries,
               report.bytes);
  return json_response(200, cache_reset_json(report).dump());
}

http::Response CacheViews::summary(const http::Request& req) {
  const auto admin = route_.caller(req).and_then([](const Caller& c) { return require_admin(c, "/v1/cache/summary"); });
  if (!admin) return error_response(admin.error());
  const auto since = parse_since(req.query_param("since"));
  if (!since) return error_response(since.error());
  const std::string tiers = req.query_param("tiers");
  if (!tiers.empty() && tiers != "true" && tiers != "false" && tiers != "1" && tiers != "0") {
    return error_response(invalid_param("tiers", "tiers must be true or false"));
  }
  const bool by_medium = tiers == "true" || tiers == "1";
  const std::string blocks = req.query_param("blocks");
  if (!blocks.empty() && blocks != "true" && blocks != "false" && blocks != "1" && blocks != "0") {
    return error_response(invalid_param("blocks", "blocks must be true or false"));
  }
  const auto header = [&] {
    const scheduler::SchedulerStats stats = scheduler_.stats();
    const cache::CacheConfig& config = scheduler_.cache_config();
    return SummaryHeader{.server_id = server_id_, .block_size = config.block_size,
                         .hash = cache::hash_algorithm_name(config.hash), .running = stats.running,
                         .queued = stats.queued, .slots = slots_, .kv_events = kv_events_};
  };
  if (blocks == "false" || blocks == "0") {
    if (by_medium || since->has_value()) {
      return error_response(invalid_param("blocks", "blocks=false takes neither tiers nor since"));
    }
    return json_response(200, dump_json(cache_load_json(header())));
  }
  std::optional<cache::ScopeId> scope;
  if (const std::string tenant = req.query_param("tenant"); !tenant.empty()) {
    if (!by_medium) return error_response(invalid_param("tenant", "tenant needs tiers=true (the blocks list every tenant's)"));
    if (!valid_tenant_id(tenant)) return error_response(invalid_param("tenant", "'" + tenant + "' is not a tenant id"));
    scope = tenant_scope(tenant);
  }
  cache::CacheSummary summary;
  if (!scheduler_.ask_cache([&](cache::CacheAdmin& cache) { summary = cache.summary(*since, by_medium, scope); })) {
    return error_response(server_shutting_down());
  }
  return json_response(200, dump_json(cache_summary_json(header(), summary)));
}

http::Response CacheViews::tree(const http::Request& req) {
  const auto tenant = route_.viewed_tenant(req);
  if (!tenant) return error_response(tenant.error());
  cache::TreeQuery query;
  if (*tenant) query.scope = tenant_scope(**tenant);
  const auto limit = parse_tree_limit(req.query_param("limit"));
  if (!limit) return error_response(limit.error());
  if (*limit) query.node_limit = **limit;
  cache::CacheTree tree;
  if (!scheduler_.ask_cache([&](cache::CacheAdmin& cache) { tree = cache.tree(query); })) {
    return error_response(server_shutting_down());
  }
  return json_response(200, dump_json(cache_tree_json(tree, engine_.vocab(), TenantNames(route_.keys))));
}

http::Response CacheViews::chain(const http::Request& req) {
  const auto query = parse_chain_query(req.body, route_.parse.max_json_nodes);
  if (!query) return error_response(query.error());
  const auto caller = route_.caller(req);
  if (!caller) return error_response(caller.error());
  const PromptBuilder& prompts = chats_.prompts();
  std::expected<scheduler::GenerationRequest, ApiError> generation = std::unexpected(ApiError{});
  if (query->endpoint == Endpoint::chat) {
    if (auto refused = prompts.refuse_oversized_chat(query->request_body, chats_.max_prompt_tokens())) {
      return error_response(*refused);
    }
    auto parsed = parse_chat_request(query->request_body, route_.parse);
    if (!parsed) return error_response(parsed.error());
    generation = chats_.prompt_of(*parsed, caller->tenant);
  } else {
    if (auto refused = prompts.refuse_oversized_completion(query->request_body, chats_.max_prompt_tokens())) {
      return error_response(*refused);
    }
    auto parsed = parse_completion_request(query->request_body, route_.parse);
    if (!parsed) return error_response(parsed.error());
    generation = chats_.prompt_of(*parsed, caller->tenant);
  }
  if (!generation) return error_response(generation.error());
  std::vector<cache::Digest> blocks;
  if (generation->cache.enabled) {
    const cache::RequestKey key = scheduler::cache_key(generation->cache);
    if (!scheduler_.ask_cache([&](cache::CacheAdmin& cache) { blocks = cache.chain_of(key, generation->prompt); })) {
      return error_response(server_shutting_down());
    }
  }
  return json_response(200, dump_json(cache_chain_json(model_key_, scheduler_.cache_config().block_size,
                                                        generation->prompt.size(), blocks)));
}

std::expected<std::optional<std::string>, ApiError> CacheViews::reset_tenant(const http::Request& req) const {
  auto body = parse_json_object(req.body.empty() ? std::string_view("{}") : std::string_view(req.body),
                                route_.parse.max_json_nodes);
  if (!body) return std::unexpected(body.error());
  std::string requested = req.query_param("tenant");
  for (const auto& [field, value] : body->items()) {
    if (field != "tenant") {
      return std::unexpected(invalid_param(field, std::format("'{}' is not a field of a reset; it takes only 'tenant'", field)));
    }
    if (!value.is_string()) return std::unexpected(invalid_param("tenant", "'tenant' must be a string"));
    if (!requested.empty() && requested != value.get_ref<const std::string&>()) {
      return std::unexpected(invalid_param("tenant", "the body and ?tenant= name different tenants"));
    }
    requested = value.get<std::string>();
  }
  return route_.caller(req).and_then([&](const Caller& c) { return view_tenant(c, requested); });
}

}  // namespace prefixd::api
