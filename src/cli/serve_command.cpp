// `prefixd serve`: load the model, start the scheduler thread and the HTTP server.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <filesystem>
#include <format>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "api/server.h"
#include "cache/block_hash.h"
#include "cache/family.h"
#include "cli/commands.h"
#include "cli/config_option.h"
#include "cli/disk_location.h"
#include "cli/serve_http_options.h"
#include "cli/serve_kv_events.h"
#include "cli/serve_models.h"
#include "cli/memory_return.h"
#include "cli/server_signals.h"
#include "engine/engine.h"
#include "engine/model_fingerprint.h"
#include "hub/hub_model.h"
#include "remote/remote_endpoint.h"
#include "scheduler/scheduler.h"
#include "speculative/vocabulary_match.h"

namespace prefixd::cli {
namespace {

struct ServeOptions {
  ServeOptions() { server.http.workers = 0; }
  std::string model_path;
  std::string hf_repo;   // --hf-repo OWNER/NAME[:QUANT]
  std::string hf_file;   // --hf-file
  std::string log_level = "info";
  engine::ContextOptions context;
  scheduler::SchedulerOptions scheduler;
  api::ServerOptions server;
  HttpFlags http;
  KvEventFlags kv_events;
  bool cache_disk = true;              // --no-cache-disk: false
  std::uint64_t disk_max_bytes = 0;    // --cache-disk-max-bytes; 0: from the free space
  bool no_cache_prompt = false;
  bool cache_enabled = true;
  std::string apc_hash = "blake3";
  std::uint64_t cache_capacity_bytes = 0;  // 0: derived at startup
  std::int64_t cache_ttl_seconds = 3600;
  std::int32_t device_cells = -1;          // -1: the cache's default for the backend
  std::int64_t retain_tokens = -1;         // -1: the context size
  std::string compaction = "auto";
  std::string prefill_packing = "auto";
  std::string spec_type = "auto";  // auto: model with --model-draft, else none
  std::string draft_when = "paying";
  std::string draft_model_path;    // --model-draft
  std::int32_t draft_gpu_layers = -1;  // --gpu-layers-draft; -1: as --gpu-layers
  std::string swa_full = "auto";
  bool kv_unified = true;       // --kv-unified / --no-kv-unified
  bool kv_unified_set = false;  // given by a flag, the environment or the config file
  bool holders_set = false;     // --prompt-cache-holders given (likewise)
  std::string fingerprint_cache;  // empty: default_fingerprint_cache_path; "off": none
  std::string chat_template_file;  // --chat-template-file; empty: the model's template
  std::string api_keys_path;      // --api-keys
  std::string cache_isolation = "tenant";
  std::string shared_prefix_path;  // --cache-shared-prefix-file
  std::int64_t seed = -1;          // --seed; -1: a random seed per request
  std::string pooling = "model";   // --pooling; model: the model's own
  bool reranking = false;          // --reranking: embeddings pooled by the model's classifier head
  ModelHostFlags models;                 // --models-dir and its limits (serve_models.h)
  std::vector<std::string> lora;         // --lora FILE[,FILE...]: adapters at scale 1
  std::vector<std::string> lora_scaled;  // --lora-scaled FILE:SCALE[,...]
  bool lora_init_without_apply = false;  // every adapter starts at scale 0
};

// --lora and --lora-scaled: the adapters' paths into the context options and their starting
// scales into the server's, ids in that order (every --lora, then every --lora-scaled).
void resolve_lora(ServeOptions& o) {
  std::vector<float> scales;
  for (const std::string& path : o.lora) {
    if (path.empty()) throw std::runtime_error("--lora: an empty file name");
    o.context.lora_paths.push_back(path);
    scales.push_back(1.0f);
  }
  for (const std::string& item : o.lora_scaled) {
    const std::size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) {
      throw std::runtime_error(std::format("--lora-scaled '{}': expected FILE:SCALE", item));
    }
    const std::string scale_text = item.substr(colon + 1);
    float scale = 0;
    const auto [end, ec] = std::from_chars(scale_text.data(), scale_text.data() + scale_text.size(), scale);
    if (ec != std::errc() || end != scale_text.data() + scale_text.size() || !std::isfinite(scale)) {
      throw std::runtime_error(std::format("--lora-scaled '{}': '{}' is not a number", item, scale_text));
    }
    o.context.lora_paths.push_back(item.substr(0, colon));
    scales.push_back(scale);
  }
  if (o.lora_init_without_apply) std::ranges::fill(scales, 0.0f);
  o.server.lora_scales = std::move(scales);
}

std::uint64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 4ull << 30;
}

// The host tier's default budget: a quarter of the memory available at startup, at most 8 GiB.
std::uint64_t default_host_capacity() { return std::min<std::uint64_t>(available_memory_bytes() / 4, 8ull << 30); }

// The draft model: a context as large as the model's, with the same sequences (each running
// request's lane, and the drafter's own cache holders), text only. Its guesses are verified, so it
// needs no --deterministic. Refused unless its token ids spell what the model's do.
std::unique_ptr<engine::Engine> load_draft_model(const ServeOptions& o, const engine::Engine& target) {
  engine::ContextOptions context = o.context;
  context.n_ctx = target.context_size();
  context.mmproj_path.clear();
  context.lora_paths.clear();  // the target's adapters: the drafter's guesses are verified under them
  context.deterministic = false;
  context.kv_layout = engine::KvLayout::pool;  // guesses are verified: no answer rests on the drafter's cells
  if (o.draft_gpu_layers >= 0) context.gpu_layers = o.draft_gpu_layers;
  std::unique_ptr<engine::Engine> drafter;
  try {
    drafter = engine::load_llama_engine(o.draft_model_path, context, "draft");
  } catch (const std::exception& e) {
    throw std::runtime_error(std::format("--model-draft {}: {}", o.draft_model_path, e.what()));
  }
  if (const auto difference = speculative::vocabulary_difference(target.vocab(), drafter->vocab())) {
    throw std::runtime_error(std::format("--model-draft {}: its vocabulary is not the model's: {}", o.draft_model_path,
                                         *difference));
  }
  return drafter;
}

// The model fingerprint cache file --model-fingerprint-cache names; empty when it is off.
std::string resolve_fingerprint_cache(const std::string& flag, const std::string& disk_path) {
  if (flag == "off") return {};
  if (!flag.empty()) return flag;
  return engine::default_fingerprint_cache_path(disk_path.empty() ? std::nullopt
                                                                  : std::optional<std::filesystem::path>(disk_path))
      .string();
}

// The key ring of --api-keys (null without it); a file that does not parse refuses to start.
std::shared_ptr<api::KeyStore> load_keys(const std::string& path, const std::string& single_key) {
  if (path.empty()) return nullptr;
  if (!single_key.empty()) throw std::runtime_error("--api-key and --api-keys are exclusive: put the key in the file");
  auto ring = api::KeyRing::load(path);
  if (!ring) throw std::runtime_error(ring.error());
  spdlog::info("api keys: {} keys of {} tenants from {} (SIGHUP reloads it)", ring->size(), ring->tenants().size(),
               path);
  return std::make_shared<api::KeyStore>(std::move(*ring), path);
}

std::string read_text_file(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string(flag) + ": cannot read " + path);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (text.empty()) throw std::runtime_error(std::string(flag) + ": " + path + " is empty");
  return text;
}

int run_serve(ServeOptions& o) {
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  configure_heap(cores);
  if (o.server.http.workers == 0) {
    // One thread for each request the scheduler may hold, running or queued: each blocks its
    // thread until its response ends, and with fewer threads the requests past them would wait
    // unseen inside the HTTP layer instead of being refused at --max-queued. And one per core for
    // the requests that only compute (tokenize, stats, the refusals) while those all wait. With one
    // heap arena per core a thread costs little: after the same traffic, 8, 72 and 264 threads
    // left the tiny model's server at 35, 40 and 51 MiB.
    o.server.http.workers = std::min(4096, o.context.n_parallel + o.scheduler.max_queued + cores);
  }
  apply_http_flags(o.http, o.server);
  // Every connection is an open file: thousands of idle clients must not exhaust the default 1024.
  const std::size_t open_files = http::raise_open_file_limit();
  if (open_files > 0 && o.server.http.max_connections + 64 > open_files) {
    o.server.http.max_connections = open_files > 128 ? open_files - 64 : 64;
    spdlog::warn("http: at most {} connections (open-file limit {})", o.server.http.max_connections, open_files);
  }
  const bool cache_on = o.cache_enabled && !o.no_cache_prompt;
  o.server.cache_prompt_default = cache_on;
  ServerSignals signals;  // before any thread starts, so all of them inherit the mask
  HeapTrimmer trimmer(kLargeBodyBytes, kMinTrimInterval);  // outlives the server, which calls it
  o.server.request_began = [&trimmer](std::size_t body_bytes) { trimmer.request_began(body_bytes); };
  o.server.request_ended = [&trimmer](std::size_t body_bytes) { trimmer.request_ended(body_bytes); };
  // Configuration errors first: a bad key file must not wait for the model to load.
  o.server.keys = load_keys(o.api_keys_path, o.server.api_key);
  o.server.cache_isolation = *api::parse_cache_isolation(o.cache_isolation);
  check_kv_event_flags(o.kv_events);
  if (!o.shared_prefix_path.empty()) {
    if (o.server.cache_isolation != api::CacheIsolation::session) {
      throw std::runtime_error("--cache-shared-prefix-file needs --cache-isolation session (with tenant isolation "
                               "every prefix is shared within a tenant already)");
    }
    o.server.cache_shared_prefix = read_text_file(o.shared_prefix_path, "--cache-shared-prefix-file");
  }
  for (const std::string& url : o.scheduler.cache.remote_urls) {
    if (auto endpoint = remote::parse_remote_url(url); !endpoint) throw std::runtime_error("--cache-remote: " + endpoint.error());
  }
  // A model named for this server wins over a folder (which a configuration file may give): each
  // model's own server is started so.
  if (!o.models.dir.empty() && (!o.model_path.empty() || !o.hf_repo.empty())) {
    spdlog::info("--models-dir {} is set, and --model or --hf-repo too: serving that one model", o.models.dir);
  } else if (!o.models.dir.empty()) {
    if (!o.kv_events.replay_endpoint.empty()) {
      throw std::runtime_error("--kv-events-replay-endpoint with --models-dir: each model's server numbers its own "
                               "batches, which one replay address cannot serve; subscribe without replay, or run a "
                               "single-model server per model");
    }
    if (!o.cache_disk && !o.scheduler.cache.disk_path.empty()) {
      throw std::runtime_error("--no-cache-disk and --cache-disk-path contradict each other: give one");
    }
    const auto keys = o.server.keys != nullptr ? o.server.keys
                      : o.server.api_key.empty() ? nullptr
                                                 : std::make_shared<api::KeyStore>(api::KeyRing::single(o.server.api_key));
    return run_model_host(o.models,
                          ModelHostSetup{.http = o.server.http,
                                         .keys = keys,
                                         .cache_disk = cache_on && o.cache_disk,
                                         .disk_path = o.scheduler.cache.disk_path,
                                         .grace = std::chrono::milliseconds(static_cast<std::int64_t>(o.http.shutdown_grace_s * 1000)),
                                         .kv_events_endpoint = o.kv_events.endpoint,
                                         .kv_events_topic = o.kv_events.topic},
                          signals);
  }
  if (o.model_path.empty() == o.hf_repo.empty()) {
    throw std::runtime_error(o.model_path.empty() ? "give the model: --model FILE or --hf-repo OWNER/NAME[:QUANT]"
                                                  : "--model and --hf-repo name two models: give one");
  }
  if (!o.hf_file.empty() && o.hf_repo.empty()) throw std::runtime_error("--hf-file needs --hf-repo");
  if (!o.hf_repo.empty()) {
    std::string error;
    auto spec = hub::parse_model_spec(o.hf_repo, error);
    if (!spec) throw std::runtime_error("--hf-repo: " + error);
    spec->file = o.hf_file;
    const hub::FetchedModel got = hub::fetch_model(
        *spec, {.projector = o.context.mmproj_path.empty(),
                .progress = [](const std::string& line) { spdlog::info("hub: {}", line); }});
    o.model_path = got.model.string();
    if (got.mmproj) o.context.mmproj_path = got.mmproj->string();
    spdlog::info("hub: {} at commit {}: {}{} ({} bytes downloaded)", o.hf_repo, got.commit, o.model_path,
                 got.mmproj ? ", projector " + got.mmproj->string() : "", got.downloaded_bytes);
  }
  if (!o.cache_disk && !o.scheduler.cache.disk_path.empty()) {
    throw std::runtime_error("--no-cache-disk and --cache-disk-path contradict each other: give one");
  }
  // The disk tier's directory, locked for as long as this server runs (disk_location.h).
  const std::optional<DiskLocation> disk = choose_disk_location(
      {.enabled = cache_on && o.cache_disk, .path = o.scheduler.cache.disk_path, .max_bytes = o.disk_max_bytes});
  o.scheduler.cache.disk_path = disk ? disk->dir.string() : std::string();
  if (disk) o.scheduler.cache.disk_capacity_bytes = disk->capacity_bytes;
  if (o.server.artifact_dir.empty() && !o.scheduler.cache.disk_path.empty()) {
    o.server.artifact_dir = (std::filesystem::path(o.scheduler.cache.disk_path) / "artifacts").string();
  }
  if (!o.server.slot_save_path.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.server.slot_save_path, ec);
    if (ec) throw std::runtime_error("--slot-save-path: cannot create " + o.server.slot_save_path + ": " + ec.message());
  }
  if (!o.server.artifact_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.server.artifact_dir, ec);
    if (ec) spdlog::warn("artifacts: cannot create {}: {}", o.server.artifact_dir, ec.message());
  }
  cache::CacheConfig& cache = o.scheduler.cache;
  cache.enabled = cache_on;
  cache.hash = cache::parse_hash_algorithm(o.apc_hash);
  cache.ttl = std::chrono::seconds(o.cache_ttl_seconds);
  if (o.retain_tokens >= 0) cache.retain_tokens = o.retain_tokens;
  cache.trace = [] {
    const char* trace = std::getenv("PREFIXD_CACHE_TRACE");
    return trace != nullptr && std::string_view(trace) == "1";
  }();
  if (o.context.deterministic && !o.context.flash_attention) {
    // Without flash attention a row's attention sums its cells in SIMD lanes set by their index in
    // the KV buffer, so no choice of batches makes a cached prompt answer as a cold one.
    throw std::runtime_error("--deterministic needs flash attention: drop --no-flash-attn");
  }
  if (o.scheduler.speculation.draft_min > o.scheduler.speculation.draft_max) {
    throw std::runtime_error(std::format("--draft-min ({}) must not exceed --draft-max ({})",
                                         o.scheduler.speculation.draft_min, o.scheduler.speculation.draft_max));
  }
  if (cache.host_segment_tokens % cache.block_size != 0) {
    throw std::runtime_error("--prompt-cache-host-segment must be a multiple of --apc-block-size");
  }
  cache.host_capacity_bytes = o.cache_capacity_bytes > 0 ? o.cache_capacity_bytes : default_host_capacity();
  o.context.n_holder_seqs = cache_on ? o.scheduler.cache_holders + 1 : 0;
  // A stream per sequence makes each holder a whole context of cells: unless asked, as many
  // holders as requests, as llama-server keeps one prompt per slot.
  if (cache_on && !o.holders_set) o.context.n_holder_seqs_streams = std::min(o.context.n_parallel, o.scheduler.cache_holders) + 1;
  if (!cache_on) o.scheduler.cache_holders = 0;
  // Unset: streams where they make --deterministic exact under concurrency (the engine decides
  // by the model's family), but not with --cache-reuse, which gives exactness up and needs the
  // pool's shared cells.
  o.context.kv_layout = o.kv_unified_set ? (o.kv_unified ? engine::KvLayout::pool : engine::KvLayout::streams)
                        : cache.shift_reuse_min > 0 ? engine::KvLayout::pool
                                                    : engine::KvLayout::automatic;
  o.context.swa_full = o.swa_full == "on" ? engine::SwaFull::on : o.swa_full == "off" ? engine::SwaFull::off
                                                                                       : engine::SwaFull::automatic;
  if (o.reranking) {
    if (o.pooling != "model" && o.pooling != "rank") {
      throw std::runtime_error(std::format("--reranking pools by rank: drop --pooling {}", o.pooling));
    }
    o.context.embeddings = true;
    o.context.pooling = engine::Pooling::rank;
  } else {
    o.context.pooling = *engine::parse_pooling(o.pooling);  // the flag's check took only known names
  }
  resolve_lora(o);
  o.context.fingerprint_cache = resolve_fingerprint_cache(o.fingerprint_cache, o.scheduler.cache.disk_path);
  o.context.kv_memory_budget = available_memory_bytes() / 4;
  if (!o.chat_template_file.empty()) {
    // Read before the model loads: a wrong path fails in a moment, not after minutes.
    std::ifstream file(o.chat_template_file, std::ios::binary);
    if (!file) throw std::runtime_error("--chat-template-file: cannot read " + o.chat_template_file);
    o.server.chat_template.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    if (o.server.chat_template.empty()) throw std::runtime_error("--chat-template-file: " + o.chat_template_file + " is empty");
  }
  std::unique_ptr<engine::Engine> model = engine::load_llama_engine(o.model_path, o.context, o.server.model_alias);
  const bool large_blocks_mapped = !model->model().on_accelerator;
  if (large_blocks_mapped) fix_mmap_threshold();
  o.server.max_json_nodes = o.http.max_json_nodes > 0
                                ? o.http.max_json_nodes
                                : api::json_node_limit_for_context(static_cast<std::size_t>(model->context_size()));
  spdlog::info("http: {} threads, request bodies up to {} bytes and {} JSON values; heap: {} arenas, {}, trimmed "
               "after requests with bodies of {} KiB or more",
               o.server.http.workers, o.server.http.max_body_bytes, o.server.max_json_nodes, cores,
               large_blocks_mapped ? "blocks of 128 KiB or more mapped apart"
                                   : "glibc's adaptive mmap threshold (layers on a GPU)",
               kLargeBodyBytes >> 10);
  if (cache.shift_reuse_min > 0) {
    if (!cache_on) throw std::runtime_error("--cache-reuse needs the prompt cache: drop --no-cache-prompt");
    if (!model->can_shift()) {
      if (!model->model().cells_shared) {
        throw std::runtime_error("--cache-reuse copies moved chunks into a sequence that holds other cells, which a "
                                 "KV stream per sequence (--no-kv-unified) cannot do: drop one of the two");
      }
      throw std::runtime_error(std::format("--cache-reuse moves cached K/V to other positions, which this model ({} "
                                           "memory) cannot do: {}",
                                           engine::family_name(model->model().family),
                                           cache::Family::of(model->model())->shift_remedy()));
    }
    spdlog::info("cache: reuse by shifting chunks of {} tokens or more (--cache-reuse): answers from moved K/V are "
                 "not those of a cold run",
                 cache.shift_reuse_min);
  }
  if (o.device_cells >= 0) cache.device_cells = o.device_cells;  // else the backend's default
  cache.compaction = cache::parse_compaction(o.compaction);
  if (o.prefill_packing == "on") o.scheduler.prefill_packing = scheduler::PrefillPacking::on;
  if (o.prefill_packing == "bounded") o.scheduler.prefill_packing = scheduler::PrefillPacking::bounded;
  if (o.prefill_packing == "off") o.scheduler.prefill_packing = scheduler::PrefillPacking::off;
  using SpecType = scheduler::SpeculationOptions::Type;
  if (o.spec_type == "auto") o.spec_type = o.draft_model_path.empty() ? "none" : "model";
  if (o.spec_type == "model" && o.draft_model_path.empty()) throw std::runtime_error("--spec-type model needs --model-draft FILE");
  if (o.spec_type != "model" && !o.draft_model_path.empty()) {
    throw std::runtime_error(std::format("--model-draft drafts with a model: drop --spec-type {}", o.spec_type));
  }
  o.scheduler.speculation.type = o.spec_type == "ngram" ? SpecType::ngram : o.spec_type == "model" ? SpecType::model : SpecType::none;
  o.scheduler.speculation.only_paying = o.draft_when == "paying";
  o.scheduler.n_slots = o.context.n_parallel;
  o.server.slots = o.context.n_parallel;
  o.server.default_seed = o.seed < 0 ? engine::kRandomSeed : static_cast<std::uint32_t>(o.seed);
  const std::size_t per_token = model->model().kv_bytes_per_token;
  std::unique_ptr<engine::Engine> drafter;
  if (!o.draft_model_path.empty()) drafter = load_draft_model(o, *model);
  const auto kv_events = start_kv_events(o.kv_events, cache.block_size, o.scheduler, o.server);
  scheduler::Scheduler scheduler(*model, o.scheduler, drafter.get());
  const cache::CacheConfig& resolved = scheduler.cache_config();
  const bool trimmable = cache::Family::of(model->model())->trimmable();
  if (cache_on && !model->model().has_memory) {
    spdlog::warn("prompt cache: off: this model keeps no memory between calls (an encoder)");
  } else if (cache_on && !model->model().partial_copy_supported) {
    spdlog::warn("prompt cache: off for architecture {}: libllama cannot copy part of its sequences",
                 model->model().architecture);
  }
  const bool cache_runs = cache_on && model->model().has_memory && model->model().partial_copy_supported;
  spdlog::info("prompt cache: {}; device tier {} idle cells in {} holder sequences (compaction {}), host tier {:.1f} "
               "MiB ({} tokens at {} bytes/token, {} segments), min prefix {}, block {} ({}), ttl {} s",
               cache_runs ? (trimmable ? "on, any prefix" : "on, at checkpoints") : "off",
               resolved.device_cells.value_or(0),
               cache_runs ? std::clamp(model->sequence_count() - o.context.n_parallel - 1, 0, o.scheduler.cache_holders) : 0,
               cache::compaction_name(resolved.compaction),
               static_cast<double>(cache.host_capacity_bytes) / (1 << 20),
               per_token > 0 ? cache.host_capacity_bytes / per_token : 0, per_token, cache.host_max_segments,
               cache.min_prefix, cache.block_size, o.apc_hash, o.cache_ttl_seconds);
  if (cache_runs && !trimmable) {
    spdlog::info("checkpoints: at user-turn boundaries, every {} prompt tokens, where a prompt leaves a prefix it "
                 "shares, before and after the last prompt token; {:.1f} MiB, {} entries, {} per session; warm-up after replies {}",
                 cache.checkpoint_every, static_cast<double>(cache.checkpoint_capacity_bytes) / (1 << 20),
                 cache.checkpoint_max_entries, cache.checkpoints_per_session, o.scheduler.cache_warmup ? "on" : "off");
  }
  if (cache_runs && !cache.disk_path.empty()) {
    spdlog::info("disk tier: {} ({}; at most {:.1f} MiB: {}; write-behind queue {:.1f} MiB; --no-cache-disk turns it "
                 "off), model fingerprint {}",
                 cache.disk_path, disk->source, static_cast<double>(cache.disk_capacity_bytes) / (1 << 20),
                 disk->capacity_source, static_cast<double>(cache.disk_queue_bytes) / (1 << 20),
                 model->model().fingerprint);
  }
  if (cache_runs && !cache.remote_urls.empty()) {
    std::string seeds;
    for (const std::string& url : cache.remote_urls) seeds += (seeds.empty() ? "" : ", ") + url;
    spdlog::info("shared tier: {} (timeout {} ms, write-behind queue {:.1f} MiB)", seeds, cache.remote_timeout_ms,
                 static_cast<double>(cache.remote_queue_bytes) / (1 << 20));
  }
  std::optional<api::HttpServer> server;
  try {
    server.emplace(*model, scheduler, o.server);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("--cache-shared-prefix-file: ") + e.what());
  }
  spdlog::info("cache isolation: {}{}", api::cache_isolation_name(o.server.cache_isolation),
               o.server.cache_shared_prefix.empty() ? "" : ", with a shared prefix (--cache-shared-prefix-file)");
  const auto grace = std::chrono::milliseconds(static_cast<std::int64_t>(o.http.shutdown_grace_s * 1000));
  signals.start(*server, grace, [keys = o.server.keys] {
    if (keys == nullptr) {
      spdlog::info("SIGHUP: no key file to reload (--api-keys is not set)");
      return;
    }
    if (auto reloaded = keys->reload()) {
      spdlog::info("SIGHUP: reloaded {}: {}", keys->source().string(), *reloaded);
    } else {
      spdlog::error("SIGHUP: keeping the previous keys: {}", reloaded.error());
    }
  });
  const bool served = server->run();
  signals.stop();  // a late signal must not reach a server that is being destroyed
  if (!served) return 1;
  spdlog::info("http: stopped; finishing the cache's pending writes");
  return 0;  // the scheduler, then the cache and its write-behind queue, are flushed as they go
}

}  // namespace

std::function<int()> add_serve_options(CLI::App& serve_app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = &serve_app;
  cmd->add_option("-m,--model", o->model_path, "GGUF model file (or --hf-repo)")->envname("PREFIXD_MODEL")
      ->check(CLI::ExistingFile);
  cmd->add_option("--hf-repo", o->hf_repo,
                  "A model by name from a Hugging Face hub, OWNER/NAME[:QUANT] (default quant Q4_K_M), downloaded "
                  "into the Hugging Face cache once (as `prefixd pull`), with its vision projector")
      ->envname("PREFIXD_HF_REPO");
  cmd->add_option("--hf-file", o->hf_file, "With --hf-repo: the GGUF file to take, by its name, instead of a quant")
      ->envname("PREFIXD_HF_FILE");
  cmd->add_option("--alias", o->server.model_alias, "Model id the API reports (default: the file name)")
      ->envname("PREFIXD_ALIAS");
  cmd->add_option("--chat-template-file", o->chat_template_file,
                  "A Jinja chat template to render prompts with instead of the model's own")
      ->envname("PREFIXD_CHAT_TEMPLATE_FILE");
  cmd->add_option("--mmproj", o->context.mmproj_path,
                  "A vision projector GGUF for the model (libmtmd's format): chat messages may then carry images")
      ->envname("PREFIXD_MMPROJ")->check(CLI::ExistingFile);
  cmd->add_option("--max-images", o->server.images.max_images, "Images and audio clips one request may carry (with --mmproj)")
      ->capture_default_str()->envname("PREFIXD_MAX_IMAGES")->check(CLI::Range(1, 1024));
  cmd->add_option("--max-image-bytes", o->server.images.max_bytes, "Largest image file a request may carry, in bytes")
      ->capture_default_str()->envname("PREFIXD_MAX_IMAGE_BYTES")->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--max-image-pixels", o->context.max_image_pixels,
                  "Largest image, in pixels (width x height), read from its header before it is decoded (0: 33554432)")
      ->capture_default_str()->envname("PREFIXD_MAX_IMAGE_PIXELS");
  cmd->add_option("--max-audio-seconds", o->context.max_audio_seconds,
                  "Longest audio clip a request may carry, in seconds of decoded sound (with an audio projector; 0: 600)")
      ->capture_default_str()->envname("PREFIXD_MAX_AUDIO_SECONDS")->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--image-embedding-bytes", o->scheduler.image_embedding_bytes,
                  "Memory for image embeddings kept by digest, so a recomputed image is not encoded again")
      ->capture_default_str()->envname("PREFIXD_IMAGE_EMBEDDING_BYTES");
  cmd->add_option("-c,--ctx-size", o->context.n_ctx,
                  "KV cache cells shared by all sequences (0: the model's training context, or as much of it as fits "
                  "in a quarter of the available memory)")
      ->capture_default_str()->envname("PREFIXD_CTX_SIZE")
      ->check(CLI::Validator([](const std::string& text) -> std::string {
                const long n = std::strtol(text.c_str(), nullptr, 10);
                return n == 0 || (n >= 16 && n <= (1 << 22)) ? "" : "must be 0 (the model's) or in [16, 4194304]";
              }, "0 or [16, 4194304]"));
  cmd->add_option("--parallel", o->context.n_parallel, "Requests decoded at once")
      ->capture_default_str()->envname("PREFIXD_PARALLEL")->check(CLI::Range(1, 64));
  cmd->add_option("-b,--batch-size", o->context.n_batch, "Most tokens per model call (prefill chunk size)")
      ->capture_default_str()->envname("PREFIXD_BATCH_SIZE")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("-t,--threads", o->context.n_threads, "CPU threads (0: all)")
      ->capture_default_str()->envname("PREFIXD_THREADS")->check(CLI::Range(0, 1024));
  cmd->add_flag("--flash-attn,!--no-flash-attn", o->context.flash_attention, "Use flash attention (default on; --no-flash-attn turns it off)")
      ->capture_default_str()->envname("PREFIXD_FLASH_ATTN");
  cmd->add_flag("--deterministic", o->context.deterministic,
                "Compute every prompt token in small row-wise batches at aligned positions, without repacked weights, so "
                "that every kind of cache hit answers exactly as a cold prompt (slower prefill; with layers on a GPU every call is "
                "padded by a rule measured at startup; default off)")
      ->capture_default_str()->envname("PREFIXD_DETERMINISTIC");
  cmd->add_flag("--embeddings,--embedding", o->context.embeddings,
                "Serve embeddings (/v1/embeddings, /embedding) instead of generating: the model's outputs are pooled "
                "per input (--pooling); generation endpoints answer 400 (default off)")
      // CLI11 keeps no reader of the bound value for a flag with two names: it is given one.
      ->default_function([o] { return std::string(o->context.embeddings ? "1" : "0"); })
      ->capture_default_str()->envname("PREFIXD_EMBEDDINGS");
  cmd->add_flag("--reranking,--rerank", o->reranking,
                "Serve /v1/rerank with a reranker model: --embeddings with --pooling rank (default off)")
      ->default_function([o] { return std::string(o->reranking ? "1" : "0"); })
      ->capture_default_str()->envname("PREFIXD_RERANKING");
  cmd->add_option("--pooling", o->pooling,
                  "How --embeddings pools a sequence's outputs: model (the model's own), none (a vector per token), "
                  "mean, cls (the first token), last, rank (a reranker's score)")
      ->capture_default_str()->envname("PREFIXD_POOLING")
      ->check(CLI::IsMember({"model", "none", "mean", "cls", "last", "rank"}));
  cmd->add_option("--embd-normalize", o->server.embd_normalize,
                  "How embeddings are normalized unless a request says: -1 none, 0 max absolute scaled to int16, "
                  "1 taxicab, 2 Euclidean, p > 2 the p-norm")
      ->capture_default_str()->envname("PREFIXD_EMBD_NORMALIZE")->check(CLI::Range(-1, 1 << 20));
  add_model_host_options(*cmd, o->models);
  cmd->add_option("--lora", o->lora,
                  "LoRA adapter (GGUF) to load and apply at scale 1 (repeat, or separate with commas); requests pick "
                  "adapters and scales with `lora`, POST /lora-adapters sets the server's")
      ->delimiter(',')->envname("PREFIXD_LORA");
  cmd->add_option("--lora-scaled", o->lora_scaled,
                  "LoRA adapter with its own scale: FILE:SCALE (repeat, or separate with commas); ids follow every "
                  "--lora")
      ->delimiter(',')->envname("PREFIXD_LORA_SCALED");
  cmd->add_flag("--lora-init-without-apply", o->lora_init_without_apply,
                "Load the adapters at scale 0: none applies until POST /lora-adapters or a request's `lora` says "
                "(default off)")
      ->default_function([o] { return std::string(o->lora_init_without_apply ? "1" : "0"); })
      ->capture_default_str()->envname("PREFIXD_LORA_INIT_WITHOUT_APPLY");
  cmd->add_option("-s,--seed", o->seed, "Sampling seed of a request that sends none (-1: a random one per request)")
      ->capture_default_str()->envname("PREFIXD_SEED")->check(CLI::Range(std::int64_t{-1}, std::int64_t{0xFFFFFFFE}));
  cmd->add_option("--gpu-layers,--n-gpu-layers", o->context.gpu_layers, "Layers to offload to a GPU backend, if one is built in")
      ->capture_default_str()->envname("PREFIXD_GPU_LAYERS");
  cmd->add_option("--model-fingerprint-cache", o->fingerprint_cache,
                  "File remembering model file digests, so a restart does not rehash an unchanged model; off: "
                  "hash at every start (default: $XDG_CACHE_HOME/prefixd/model-fingerprints.tsv, else "
                  "~/.cache/prefixd/model-fingerprints.tsv)")
      ->envname("PREFIXD_MODEL_FINGERPRINT_CACHE");
  cmd->add_option("--max-queued", o->scheduler.max_queued, "Requests that may wait for a slot; more get 503")
      ->capture_default_str()->envname("PREFIXD_MAX_QUEUED")->check(CLI::Range(0, 1 << 20));
  add_http_options(*cmd, o->server, o->http);
  add_kv_event_options(*cmd, o->kv_events);
  cmd->add_option("--api-key", o->server.api_key,
                  "Require 'Authorization: Bearer KEY' on every route but /health (one admin key of tenant "
                  "'default')")
      ->envname("PREFIXD_API_KEY");
  cmd->add_option("--api-keys", o->api_keys_path,
                  "Key file: one 'KEY TENANT [admin]' per line ('#' comments); tenants never share cached K/V; "
                  "SIGHUP reloads it")
      ->envname("PREFIXD_API_KEYS");
  cmd->add_option("--cache-isolation", o->cache_isolation,
                  "Who shares cached prefixes inside a tenant: tenant (every request) or session (only requests "
                  "of one prompt_cache_key/user, plus --cache-shared-prefix-file)")
      ->capture_default_str()->envname("PREFIXD_CACHE_ISOLATION")->check(CLI::IsMember({"tenant", "session"}));
  cmd->add_option("--cache-shared-prefix-file", o->shared_prefix_path,
                  "With --cache-isolation session: a system prompt whose rendering every session of a tenant "
                  "shares")
      ->envname("PREFIXD_CACHE_SHARED_PREFIX_FILE");
  cmd->add_flag("--metrics,!--no-metrics", o->server.metrics, "Serve Prometheus metrics at GET /metrics")
      ->capture_default_str()->envname("PREFIXD_METRICS");
  cmd->add_flag("--webui,!--no-webui", o->server.webui,
                "Serve the web UI (chat and cache pages) at / and /cache; its files need no API key, its API calls do")
      ->capture_default_str()->envname("PREFIXD_WEBUI");
  cmd->add_option("--webui-dir", o->server.webui_dir,
                  "Serve the web UI's files from this folder (read on every request) instead of the copy built into "
                  "the binary")
      ->envname("PREFIXD_WEBUI_DIR")->check(CLI::ExistingDirectory);
  cmd->add_flag("--allow-special-in-content", o->server.allow_special_in_content,
                "Let special-token strings inside messages (<|im_end|>, ...) become control tokens like the chat "
                "template's own markers (default: they are read as text)")
      ->envname("PREFIXD_ALLOW_SPECIAL_IN_CONTENT");
  cmd->add_option("--max-grammar-rules", o->server.grammar_limits.max_rules,
                  "Largest grammar one request may constrain its output with, in the grammar engine's rules "
                  "(response_format schemas, forced tool calls); larger ones get 400")
      ->capture_default_str()->envname("PREFIXD_MAX_GRAMMAR_RULES")->check(CLI::Range(std::int64_t{1}, std::int64_t{10'000'000}));
  cmd->add_option("--response-store-bytes", o->server.response_store_bytes,
                  "Memory for responses stored by POST /v1/responses (store: true), which GET /v1/responses/{id} "
                  "answers and previous_response_id continues; the least recently used go first (0: store none)")
      ->capture_default_str()->envname("PREFIXD_RESPONSE_STORE_BYTES");
  cmd->add_option("--response-ttl", o->server.response_ttl_seconds, "Seconds a stored response is kept")
      ->capture_default_str()->envname("PREFIXD_RESPONSE_TTL")->check(CLI::Range(1, 30 * 24 * 3600));
  cmd->add_flag("--no-cache-prompt", o->no_cache_prompt, "Never read or write the prompt cache")
      ->envname("PREFIXD_NO_CACHE_PROMPT");
  cmd->add_option("--prompt-cache-enabled", o->cache_enabled, "Reuse K/V of earlier prompts (true/false)")
      ->capture_default_str()->envname("PREFIXD_PROMPT_CACHE_ENABLED");
  cmd->add_option("--cache-reuse", o->scheduler.cache.shift_reuse_min,
                  "Past the longest exact prefix, move chunks of at least this many tokens that a cached sequence holds "
                  "later on instead of computing them (0: off). Not exact: moved keys are re-rotated, not recomputed")
      ->envname("PREFIXD_CACHE_REUSE")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--prompt-cache-min-prefix", o->scheduler.cache.min_prefix, "Shortest match worth adopting (tokens)")
      ->capture_default_str()->envname("PREFIXD_PROMPT_CACHE_MIN_PREFIX")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--prompt-cache-capacity-bytes", o->cache_capacity_bytes,
                  "Host-tier budget in bytes (default: a quarter of available memory, at most 8 GiB)")
      ->envname("PREFIXD_PROMPT_CACHE_CAPACITY_BYTES");
  cmd->add_option("--prompt-cache-max-entries", o->scheduler.cache.host_max_segments,
                  "Most host-tier segments (device entries are bounded by --prompt-cache-holders)")
      ->capture_default_str()->envname("PREFIXD_PROMPT_CACHE_MAX_ENTRIES")->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--prompt-cache-ttl", o->cache_ttl_seconds, "Seconds an unused entry is kept")
      ->capture_default_str()->envname("PREFIXD_PROMPT_CACHE_TTL")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--prompt-cache-retain-tokens", o->retain_tokens,
                  "Tokens each tenant may keep ahead of LRU eviction for the TTL its requests ask (a Messages "
                  "cache_control breakpoint: 5m or 1h); 0: none (default: the context size)")
      ->envname("PREFIXD_PROMPT_CACHE_RETAIN_TOKENS")->check(CLI::Range(std::int64_t{-1}, std::int64_t{1} << 40));
  CLI::Option* holders =
      cmd->add_option("--prompt-cache-holders", o->scheduler.cache_holders,
                      "Sequence ids that keep finished prompts in the model's KV cells (device tier entries; with a "
                      "stream per sequence, as many as --parallel unless given)")
          ->capture_default_str()->envname("PREFIXD_PROMPT_CACHE_HOLDERS")->check(CLI::Range(0, 200));
  cmd->add_option("--prompt-cache-device-cells", o->device_cells,
                  "Idle KV cells the device tier may keep beyond its most recent entry (default: half of "
                  "--ctx-size when layers run on a GPU, else 0)")
      ->envname("PREFIXD_PROMPT_CACHE_DEVICE_CELLS")->check(CLI::Range(-1, 1 << 24));
  cmd->add_option("--prefill-packing", o->prefill_packing,
                  "Which prompts may finish their prefill in the batch where another one does: auto (on a "
                  "GPU, bounded on the CPU), on (any), bounded (only prompts that finish there too, while the "
                  "step they spare the waiting prompts outweighs their tokens), off (none)")
      ->capture_default_str()->envname("PREFIXD_PREFILL_PACKING")
      ->check(CLI::IsMember({"auto", "on", "bounded", "off"}));
  cmd->add_option("--spec-type", o->spec_type,
                  "Speculative decoding: none; ngram (draft each request's next tokens from its own tokens and "
                  "from the replies its namespace produced earlier, verified in its decode call); model (a draft "
                  "model's guesses, --model-draft); auto: model with --model-draft, else none")
      ->capture_default_str()->envname("PREFIXD_SPEC_TYPE")->check(CLI::IsMember({"auto", "none", "ngram", "model"}));
  cmd->add_option("--draft-max,--spec-draft-n-max", o->scheduler.speculation.draft_max,
                  "Most tokens one request drafts at one decode step (a request's speculative.n_max overrides)")
      ->capture_default_str()->envname("PREFIXD_DRAFT_MAX")->check(CLI::Range(1, 62));
  cmd->add_option("--draft-min,--spec-draft-n-min", o->scheduler.speculation.draft_min,
                  "Fewest tokens worth verifying: a shorter guess is not drafted (a request's speculative.n_min "
                  "overrides)")
      ->capture_default_str()->envname("PREFIXD_DRAFT_MIN")->check(CLI::Range(1, 62));
  cmd->add_option("--draft-when", o->draft_when,
                  "paying: draft only as long as the measured time of the decode calls says a draft yields more "
                  "tokens per second than none (on a CPU a draft row costs most of a decode step); always: verify "
                  "every guess of --draft-min tokens or more")
      ->capture_default_str()->envname("PREFIXD_DRAFT_WHEN")->check(CLI::IsMember({"paying", "always"}));
  cmd->add_option("--model-draft,--spec-draft-model", o->draft_model_path,
                  "A draft model GGUF whose vocabulary is the model's: its greedy guesses are verified in each "
                  "request's decode call (sets --spec-type model)")
      ->envname("PREFIXD_MODEL_DRAFT")->check(CLI::ExistingFile);
  cmd->add_option("--draft-p-min,--spec-draft-p-min", o->scheduler.speculation.p_min,
                  "A draft model's guess it gives less probability than this ends the draft (a request's "
                  "speculative.p_min overrides)")
      ->capture_default_str()->envname("PREFIXD_DRAFT_P_MIN")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--gpu-layers-draft,--n-gpu-layers-draft,--spec-draft-ngl", o->draft_gpu_layers,
                  "Layers of the draft model to offload to a GPU backend (default: as --gpu-layers)")
      ->envname("PREFIXD_GPU_LAYERS_DRAFT");
  cmd->add_option("--draft-pool-tokens", o->scheduler.speculation.pool_tokens,
                  "Tokens of earlier replies kept for n-gram drafting, over every namespace (oldest go first)")
      ->capture_default_str()->envname("PREFIXD_DRAFT_POOL_TOKENS")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 32));
  cmd->add_option("--prompt-cache-compaction", o->compaction,
                  "Rewrite idle device entries at the start of the context when the server goes idle: auto "
                  "(never: measured slower), idle, never")
      ->capture_default_str()->envname("PREFIXD_PROMPT_CACHE_COMPACTION")
      ->check(CLI::IsMember({"auto", "idle", "never"}));
  CLI::Option* kv_unified =
      cmd->add_flag("--kv-unified,!--no-kv-unified", o->kv_unified,
                    "One KV pool shared by every sequence (--kv-unified), or a stream per sequence (--no-kv-unified: "
                    "K/V memory for the context times the sequences; models with attention cells). Unset: streams "
                    "with --deterministic on a dense, sliding-window or hybrid model, else one pool")
          ->envname("PREFIXD_KV_UNIFIED");
  cmd->add_option("--swa-full", o->swa_full,
                  "Sliding-window models: keep every cell of the window layers so any prefix is reused exactly: "
                  "auto (when those cells fit in 2 GiB), on, off (window only; reuse at checkpoints)")
      ->capture_default_str()->envname("PREFIXD_SWA_FULL")->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--checkpoint-every", o->scheduler.cache.checkpoint_every,
                  "Recurrent, hybrid and windowed models: also checkpoint every N prompt tokens (0: only at turn "
                  "boundaries and the prompt's end)")
      ->capture_default_str()->envname("PREFIXD_CHECKPOINT_EVERY")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--prompt-cache-snapshot-capacity-bytes", o->scheduler.cache.checkpoint_capacity_bytes,
                  "Host memory for checkpoints (recurrent state, window cells)")
      ->capture_default_str()->envname("PREFIXD_PROMPT_CACHE_SNAPSHOT_CAPACITY_BYTES");
  cmd->add_option("--prompt-cache-snapshot-max-entries", o->scheduler.cache.checkpoint_max_entries,
                  "Most checkpoints kept")
      ->capture_default_str()->envname("PREFIXD_PROMPT_CACHE_SNAPSHOT_MAX_ENTRIES")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--checkpoints-per-session", o->scheduler.cache.checkpoints_per_session,
                  "Checkpoints a session (prompt_cache_key or user) keeps; older ones go first")
      ->capture_default_str()->envname("PREFIXD_CHECKPOINTS_PER_SESSION")->check(CLI::Range(1, 4096));
  cmd->add_flag("--cache-warmup,!--no-cache-warmup", o->scheduler.cache_warmup,
                "After a reply, feed the end of the assistant turn for the next request (off the request path)")
      ->envname("PREFIXD_CACHE_WARMUP");
  cmd->add_option("--prompt-cache-host-segment", o->scheduler.cache.host_segment_tokens,
                  "Tokens per host-tier segment (a multiple of --apc-block-size)")
      ->capture_default_str()->envname("PREFIXD_PROMPT_CACHE_HOST_SEGMENT")->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--cache-disk,!--no-cache-disk", o->cache_disk,
                "Keep a disk tier, whose prefixes survive restarts (on by default, at the default location "
                "unless --cache-disk-path)")
      ->capture_default_str()->envname("PREFIXD_CACHE_DISK");
  cmd->add_option("--cache-disk-path", o->scheduler.cache.disk_path,
                  "Directory of the disk tier (default: $CACHE_DIRECTORY, else $XDG_CACHE_HOME/prefixd, else "
                  "~/.cache/prefixd; one server per directory)")
      ->envname("PREFIXD_CACHE_DISK_PATH");
  cmd->add_option("--cache-disk-max-bytes", o->disk_max_bytes,
                  "Most bytes the disk tier's files may take; least recently used leaves go first (0: a quarter "
                  "of the free space and the tier's own files, at most 16 GiB)")
      ->capture_default_str()->envname("PREFIXD_CACHE_DISK_MAX_BYTES");
  cmd->add_option("--cache-disk-queue-bytes", o->scheduler.cache.disk_queue_bytes,
                  "Bytes waiting to be written to the disk tier; writes beyond it are dropped, never waited for")
      ->capture_default_str()->envname("PREFIXD_CACHE_DISK_QUEUE_BYTES");
  cmd->add_option("--cache-remote", o->scheduler.cache.remote_urls,
                  "Shared cache tier on Valkey or Redis: redis://HOST:PORT (repeat, or separate with commas, for "
                  "the seeds of a Valkey Cluster); servers of the same model share prefixes there (default: none)")
      ->delimiter(',')->envname("PREFIXD_CACHE_REMOTE");
  cmd->add_option("--cache-remote-timeout-ms", o->scheduler.cache.remote_timeout_ms,
                  "Deadline of each shared-tier call; a request waits for its lookup this long, or as long as "
                  "computing what the lookup could bring would take, whichever is longer")
      ->capture_default_str()->envname("PREFIXD_CACHE_REMOTE_TIMEOUT_MS")->check(CLI::Range(1, 60000));
  cmd->add_option("--cache-remote-queue-bytes", o->scheduler.cache.remote_queue_bytes,
                  "Bytes waiting to be written to the shared tier; writes beyond it are dropped, never waited for")
      ->capture_default_str()->envname("PREFIXD_CACHE_REMOTE_QUEUE_BYTES");
  cmd->add_option("--slot-save-path", o->server.slot_save_path,
                  "Directory of the files POST /slots/{id}?action=save writes and action=restore reads (llama-server's "
                  "flag); default: off")
      ->envname("PREFIXD_SLOT_SAVE_PATH");
  cmd->add_option("--cache-artifact-path", o->server.artifact_dir,
                  "Directory of named artifacts (POST /v1/cache/save, /v1/cache/load); default: "
                  "<--cache-disk-path>/artifacts when a disk tier is set, else off")
      ->envname("PREFIXD_CACHE_ARTIFACT_PATH");
  cmd->add_option("--apc-enabled", o->scheduler.cache.apc_enabled,
                  "Reuse a stored prefix up to where a request diverges from it (true/false)")
      ->capture_default_str()->envname("PREFIXD_APC_ENABLED");
  cmd->add_option("--apc-block-size", o->scheduler.cache.block_size, "Tokens per hashed block")
      ->capture_default_str()->envname("PREFIXD_APC_BLOCK_SIZE")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--apc-hash", o->apc_hash, "Block hash: blake3 or sha256")
      ->capture_default_str()->envname("PREFIXD_APC_HASH")->check(CLI::IsMember({"sha256", "blake3"}));
  cmd->add_flag("--debug-verify-cache", o->scheduler.cache.verify_every_operation,
                "Check every prompt cache invariant after each cache operation and abort on a violation "
                "(debugging; slow with large caches)")
      ->envname("PREFIXD_DEBUG_VERIFY_CACHE");
  cmd->add_option("--log-level", o->log_level, "trace, debug, info, warn, error")
      ->capture_default_str()->envname("PREFIXD_LOG_LEVEL")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  // Flags report their current value as options do (--help, `config print`, `config init`).
  for (auto [flag, value] : {std::pair{"--flash-attn", &o->context.flash_attention},
                             {"--deterministic", &o->context.deterministic},
                             {"--kv-unified", &o->kv_unified},
                             {"--metrics", &o->server.metrics},
                             {"--webui", &o->server.webui},
                             {"--allow-special-in-content", &o->server.allow_special_in_content},
                             {"--no-cache-prompt", &o->no_cache_prompt},
                             {"--cache-warmup", &o->scheduler.cache_warmup},
                             {"--cache-disk", &o->cache_disk},
                             {"--debug-verify-cache", &o->scheduler.cache.verify_every_operation}}) {
    cmd->get_option(flag)->default_function([value] { return std::string(*value ? "true" : "false"); });
  }
  return [o, kv_unified, holders]() {
    o->kv_unified_set = kv_unified->count() > 0;
    o->holders_set = holders->count() > 0;
    return run_serve(*o);
  };
}

std::function<int()> add_serve_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("serve", "Serve a GGUF model over an OpenAI-compatible HTTP API");
  auto run = add_serve_options(*cmd);
  auto config = add_config_option(*cmd);
  return [run, config] {
    if (!config->model_section.empty()) spdlog::info("config: [models.\"{}\"] applies", config->model_section);
    return run();
  };
}

}  // namespace prefixd::cli
