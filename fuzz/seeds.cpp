// prefixd_fuzz_seeds OUT_DIR — writes the seed corpora of the fuzz targets (make fuzz-seeds writes
// them into fuzz/corpus/, where they are kept). Every seed is a valid input made by the project's
// own encoders, so that fuzzing starts from inputs that reach the deepest decoding paths:
// - request_parser, chat_template: request bodies of the benchmark's workloads (bench::step_body,
//   what `prefixd-bench bench` sends), and bodies that use each feature of the chat API once
//   (tools, tool calls and results, content parts, kwargs, extra_body, logprobs, stop, token
//   prompts), and Anthropic Messages and OpenAI Responses bodies using each feature of those
//   adapters;
// - disk_record: the files a prompt cache with a disk tier writes behind (cache::DiskStore) over
//   the FakeEngine, for a dense model (segments) and a hybrid one (segments and checkpoints);
// - artifact: what PrefixCache::save_artifact writes for the same prefixes, with a manifest;
// - json_schema: schemas using each supported feature once, and the costly shapes;
// - image_input: image headers of each format the header reader knows, and data URLs of them;
// - kv_event_batch: KV event batches of every event kind, in both hash forms (events::encode_batch).
// The disk records and artifacts carry their creation time, so a rerun writes other bytes.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/images/image_input.h"
#include "api/prompt/cache_namespace.h"
#include "bench/request.h"
#include "bench/workload.h"
#include "cache/prefix_cache.h"
#include "cache/prefix_cache_probe.h"
#include "events/kv_event_wire.h"
#include "support/fake_engine.h"

namespace prefixd::fuzz {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// libFuzzer's default input limit is 4096 bytes; seeds past it would raise every target's.
constexpr std::size_t kMaxSeedBytes = 4096;

class CorpusWriter {
 public:
  explicit CorpusWriter(fs::path dir) : dir_(std::move(dir)) {}

  void add(const std::string& target, const std::string& name, const std::string& bytes) {
    if (bytes.size() > kMaxSeedBytes) return;
    fs::create_directories(dir_ / target);
    std::ofstream(dir_ / target / name, std::ios::binary) << bytes;
    ++written_;
  }
  void add_file(const std::string& target, const std::string& name, const fs::path& from) {
    std::ifstream in(from, std::ios::binary);
    add(target, name, std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
  }
  int written() const { return written_; }

 private:
  fs::path dir_;
  int written_ = 0;
};

// Chat bodies for both JSON targets, one feature each.
std::vector<json> feature_bodies() {
  const json tools = json::array({{{"type", "function"},
                                   {"function", {{"name", "get_weather"},
                                                 {"description", "Current weather"},
                                                 {"parameters", {{"type", "object"},
                                                                 {"properties", {{"city", {{"type", "string"}}}}},
                                                                 {"required", {"city"}}}}}}}});
  const json call = {{"id", "call_1"}, {"type", "function"},
                     {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Oslo\"}"}}}};
  return {
      {{"model", "default"},
       {"messages", {{{"role", "system"}, {"content", "You are terse."}}, {{"role", "user"}, {"content", "Weather in Oslo?"}}}},
       {"tools", tools},
       {"tool_choice", "auto"}},
      {{"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}},
                     {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}},
                     {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "-3 C, snow"}},
                     {{"role", "user"}, {"content", "And tomorrow?"}}}},
       {"tools", tools},
       {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}},
      {{"messages", {{{"role", "developer"}, {"content", "Answer in French."}},
                     {{"role", "user"}, {"content", json::array({{{"type", "text"}, {"text", "Bonjour"}},
                                                                  {{"type", "text"}, {"text", "ca va?"}}})}}}},
       {"chat_template_kwargs", {{"enable_thinking", false}}},
       {"add_generation_prompt", true}},
      {{"messages", {{{"role", "user"}, {"content", "Count to five."}}}},
       {"max_completion_tokens", 16},
       {"temperature", 0},
       {"top_p", 0.9},
       {"top_k", 40},
       {"min_p", 0.05},
       {"seed", 7},
       {"stop", {"\n\n", "six"}},
       {"logprobs", true},
       {"top_logprobs", 3},
       {"stream", true},
       {"stream_options", {{"include_usage", true}}},
       {"n", 1}},
      {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
       {"extra_body", {{"cache_prompt", true}, {"prompt_cache_key", "session-1"}, {"cache_salt", "tenant-a"}}},
       {"user", "u-1"},
       {"max_tokens", 8},
       {"presence_penalty", 0.5},
       {"frequency_penalty", -0.5}},
  };
}

std::vector<json> completion_bodies() {
  return {
      {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"logprobs", 2}, {"stop", "."}},
      {{"prompt", json::array({1, 2, 3, 200, 257})}, {"max_tokens", 4}, {"n_predict", -1}},
      {{"prompt", json::array({"The answer is"})}, {"temperature", 1.5}, {"echo", false}},
      {{"prompt", json::array({json::array({10, 20, 30})})}, {"cache_prompt", false}},
  };
}

// Anthropic Messages bodies, each feature of the adapter once.
std::vector<std::string> messages_bodies() {
  return {
      R"({"model":"default","max_tokens":16,"system":"Be brief.","messages":[{"role":"user","content":"Hi"}],"stream":true})",
      R"({"model":"default","max_tokens":64,"system":[{"type":"text","text":"Rules.","cache_control":{"type":"ephemeral","ttl":"1h"}}],)"
      R"("tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],)"
      R"("tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},"metadata":{"user_id":"u-1"},)"
      R"("messages":[{"role":"user","content":"Oslo?"},{"role":"assistant","content":[{"type":"thinking","thinking":"look","signature":"s"},)"
      R"({"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Oslo"}}]},)"
      R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"rain"}],"is_error":false},)"
      R"({"type":"text","text":"Tomorrow?","cache_control":{"type":"ephemeral"}}]}]})",
      R"({"model":"default","max_tokens":8,"temperature":0,"top_k":5,"top_p":0.9,"stop_sequences":["END"],)"
      R"("thinking":{"type":"enabled","budget_tokens":1024},"tool_choice":{"type":"none"},"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]})",
      R"({"model":"default","messages":[{"role":"user","content":"How many tokens?"}]})",
  };
}

// Responses API bodies, each feature of that adapter once.
std::vector<std::string> responses_bodies() {
  return {
      R"({"model":"default","input":"Hi","instructions":"Be brief.","max_output_tokens":16,"stream":true,"store":false})",
      R"({"model":"default","previous_response_id":"resp_1","prompt_cache_key":"s-1","tools":[{"type":"function","name":"get_weather",)"
      R"("description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}],)"
      R"("tool_choice":{"type":"function","name":"get_weather"},"parallel_tool_calls":false,"input":[)"
      R"({"role":"developer","content":"Metric."},{"type":"message","role":"user","content":[{"type":"input_text","text":"Oslo?"}]},)"
      R"({"type":"reasoning","id":"rs_1","summary":[]},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},)"
      R"({"type":"function_call_output","call_id":"call_1","output":"rain"}]})",
      R"({"model":"default","input":"Pick","temperature":0,"top_p":0.5,"metadata":{"k":"v"},)"
      R"("text":{"format":{"type":"json_schema","name":"p","schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}})",
  };
}

void request_seeds(CorpusWriter& out) {
  int n = 0;
  for (const json& body : feature_bodies()) {
    const std::string text = body.dump();
    out.add("request_parser", "feature-" + std::to_string(n), text);
    out.add("chat_template", "feature-" + std::to_string(n), text);
    ++n;
  }
  n = 0;
  for (const json& body : completion_bodies()) out.add("request_parser", "completion-" + std::to_string(n++), body.dump());
  n = 0;
  for (const std::string& body : messages_bodies()) out.add("request_parser", "messages-" + std::to_string(n++), body);
  n = 0;
  for (const std::string& body : responses_bodies()) out.add("request_parser", "responses-" + std::to_string(n++), body);
  // What the benchmark sends: multi-turn sessions, agent loops with long shared prefixes, edits.
  const bench::WorkloadParams params{.seed = 1, .scale = 0.02, .reps = 1, .cold_reps_long = 1};
  for (const std::string name : {"agent", "multisession", "edit", "shared"}) {
    const bench::Workload workload = bench::make_workload(name, params);
    const std::size_t step = std::max<std::size_t>(1, workload.steps.size() / 4);
    for (std::size_t i = 0; i < workload.steps.size(); i += step) {
      const bench::Step& s = workload.steps[i];
      const std::string text =
          bench::step_body(s, bench::RequestOptions{.max_tokens = s.max_tokens, .session = s.session}).dump();
      const std::string stem = name + "-" + std::to_string(i);
      out.add("request_parser", stem, text);
      if (s.prompt.empty()) out.add("chat_template", stem, text);
    }
  }
}

// Schemas that use each feature the converter supports once, and the shapes that cost the most
// (a trie of enum values, repetitions written in chunks, recursion through references).
void schema_seeds(CorpusWriter& out) {
  const char* const schemas[] = {
      R"({"type": "object", "properties": {"b": {"type": "integer", "minimum": -5, "maximum": 120}, "a": {"type": "string", "maxLength": 8}}, "required": ["a"], "additionalProperties": false})",
      R"({"type": "object", "properties": {"k": {"type": "null"}}, "additionalProperties": {"type": "boolean"}})",
      R"({"type": ["string", "null"], "minLength": 1})",
      R"({"type": "array", "items": {"type": "number", "exclusiveMinimum": 0}, "minItems": 1, "maxItems": 3})",
      R"({"enum": ["red", "green", "greenish", 1, 12, null, {"a": [true]}]})",
      R"({"const": "fixed", "title": "annotation"})",
      R"({"anyOf": [{"type": "string", "format": "date-time"}, {"type": "string", "format": "uuid"}, {"type": "boolean"}]})",
      R"({"oneOf": [{"$ref": "#/$defs/node"}, {"type": "null"}], "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#"}}}}})",
      R"({"$ref": "#/definitions/a", "definitions": {"a": {"allOf": [{"type": "string", "format": "date"}]}}})",
      R"({"type": "string", "minLength": 2500, "maxLength": 7000})",
      R"({"type": "array", "items": true, "minItems": 1500})",
      R"({"anyOf": [{"$ref": "#"}, {"type": "integer"}]})",
      R"({"type": "string", "pattern": "^a+$"})",
      R"({"enum": ["ab", "c", [1, 2], 3.5], "minLength": 2, "maxItems": 1, "minimum": 4})",
  };
  int n = 0;
  for (const char* schema : schemas) out.add("json_schema", "schema-" + std::to_string(n++), json::parse(schema).dump());
}

// Image headers of every format the header reader knows (and one it refuses), whole small files,
// and data URLs carrying them.
void image_seeds(CorpusWriter& out) {
  std::string bmp = "BM";
  const auto put = [&bmp](std::uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) bmp.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  put(54 + 4 * 4 * 3, 4);
  put(0, 4);
  put(54, 4);
  put(40, 4);
  put(4, 4);
  put(4, 4);
  put(1, 2);
  put(24, 2);
  for (int i = 0; i < 6; ++i) put(i == 1 ? 48 : 0, 4);
  for (int i = 0; i < 48; ++i) bmp.push_back(static_cast<char>(i * 5));
  const std::string png = std::string("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\x10\0\0\0\x08\x08\x02\0\0\0", 29);
  const std::string jpeg = std::string("\xFF\xD8\xFF\xE0\0\x10JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
                                       "\xFF\xC0\0\x11\x08\0\x20\0\x30\x03\x01\x22\0\x02\x11\x01\x03\x11\x01", 39);
  const std::string gif = std::string("GIF89a\x10\0\x08\0\x80\0\0", 13);
  const std::string webp = std::string("RIFF\x24\0\0\0WEBPVP8 ", 16);
  const std::pair<const char*, std::string> files[] = {{"bmp", bmp}, {"png", png}, {"jpeg", jpeg}, {"gif", gif}, {"webp", webp}};
  for (const auto& [name, bytes] : files) {
    out.add("image_input", std::string("file-") + name, bytes);
    const std::string b64 = api::encode_base64(bytes);
    out.add("image_input", std::string("url-") + name, std::string("data:image/") + name + ";base64," + b64);
  }
}

// KV event batches: a first batch (cleared, then a prefix stored on the device and disk tiers), a
// demotion (removed from the device tier, stored on the host tier from a parent), an empty batch.
void kv_event_seeds(CorpusWriter& out) {
  const auto digest = [](std::uint8_t n) {
    cache::Digest d{};
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>(n * 31 + i);
    return d;
  };
  std::vector<cache::KvEvent> first;
  first.emplace_back(cache::AllBlocksCleared{});
  first.emplace_back(cache::BlocksStored{{digest(1), digest(2)}, std::nullopt, {1, 2, 3, 4, 5, 6, 7, 8},
                                         cache::Medium::device, {}});
  first.emplace_back(cache::BlocksStored{{digest(1), digest(2)}, std::nullopt, {1, 2, 3, 4, 5, 6, 7, 8},
                                         cache::Medium::disk, {}});
  std::vector<cache::KvEvent> demotion;
  demotion.emplace_back(cache::BlocksRemoved{{digest(2)}, cache::Medium::device, {}});
  demotion.emplace_back(cache::BlocksStored{{digest(2)}, digest(1), {5, 6, 7, 8}, cache::Medium::host, {}});
  const std::pair<const char*, events::HashFormat> formats[] = {{"int", events::HashFormat::integer},
                                                               {"bytes", events::HashFormat::bytes}};
  for (const auto& [name, format] : formats) {
    out.add("kv_event_batch", std::string("first-") + name, events::encode_batch(first, 1.7e9, 4, format));
    out.add("kv_event_batch", std::string("demotion-") + name, events::encode_batch(demotion, 1.7e9, 4, format));
  }
  out.add("kv_event_batch", "empty", events::encode_batch({}, 0.5, 16, events::HashFormat::integer));
}

// A prompt cache with a disk tier over the FakeEngine, fed as the scheduler feeds it.
class CacheBench {
 public:
  CacheBench(engine::ModelFamily family, const fs::path& dir)
      : engine_(engine::FakeEngineOptions{.n_ctx = 2048, .n_batch = 64, .n_seq = 8, .family = family}) {
    cache::CacheConfig config;
    config.min_prefix = 4;
    config.block_size = 4;
    config.host_segment_tokens = 8;
    config.device_cells = 1024;
    config.host_capacity_bytes = 1 << 20;
    config.disk_path = dir.string();
    cache_ = std::make_unique<cache::PrefixCache>(engine_, config, std::vector<engine::SeqId>{2, 3, 4, 5, 6}, 7);
  }

  // Serves `prompt` on sequence 0 and donates it.
  void serve(const std::string& ns, const std::vector<engine::Token>& prompt) {
    const cache::Acquisition got = cache::PrefixCacheProbe(*cache_).acquire({ns, "seed", {}}, prompt, 0);
    std::int32_t computed = got.reused;
    while (computed < static_cast<std::int32_t>(prompt.size())) {
      const std::int32_t stop = cache_->next_stop(0);
      const std::int32_t end = stop > computed ? stop : static_cast<std::int32_t>(prompt.size());
      for (std::int32_t i = computed; i < end; i += engine_.batch_size()) {
        std::vector<engine::BatchToken> batch;
        for (std::int32_t j = i; j < std::min(end, i + engine_.batch_size()); ++j) {
          batch.push_back({prompt[static_cast<std::size_t>(j)], j, 0, false});
        }
        if (engine_.decode(batch) != engine::DecodeStatus::ok) throw std::runtime_error("the FakeEngine refused a batch");
      }
      computed = end;
      cache_->advance(0, computed);
    }
    cache_->donate(0, prompt);
    cache::PrefixCacheProbe(*cache_).flush_disk();
  }
  cache::PrefixCache& cache() { return *cache_; }

 private:
  engine::FakeEngine engine_;
  std::unique_ptr<cache::PrefixCache> cache_;
};

void record_seeds(CorpusWriter& out, const fs::path& work) {
  const std::string ns = api::namespace_digest({.model_id = "seed-model", .runtime_signature = "seed-runtime"});
  std::vector<engine::Token> prompt;
  for (int i = 0; i < 29; ++i) prompt.push_back((i * 37 + 11) % 256);
  for (const auto family : {engine::ModelFamily::dense, engine::ModelFamily::hybrid}) {
    const std::string tag = family == engine::ModelFamily::dense ? "dense" : "hybrid";
    const fs::path dir = work / tag;
    {
      CacheBench bench(family, dir);
      bench.serve(ns, prompt);
      // A manifest like the one the control plane writes for a prepared module.
      const std::string manifest = R"({"id":")" + tag + R"(","start":0,"chain":[]})";
      bench.cache().save_artifact(cache::RequestKey{ns, "seed", {}}, prompt, work / (tag + ".prefixd"), manifest);
    }
    out.add_file("artifact", tag, work / (tag + ".prefixd"));
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(dir / "kv")) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::ranges::sort(files);
    for (const fs::path& file : files) out.add_file("disk_record", tag + "-" + file.filename().string(), file);
  }
}

}  // namespace
}  // namespace prefixd::fuzz

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) {
    std::cerr << "usage: prefixd_fuzz_seeds OUT_DIR  (writes OUT_DIR/<target>/<seed>)\n";
    return 2;
  }
  const fs::path work = fs::temp_directory_path() / ("prefixd-fuzz-seeds-" + std::to_string(::getpid()));
  try {
    fs::remove_all(work);
    prefixd::fuzz::CorpusWriter out(argv[1]);
    prefixd::fuzz::request_seeds(out);
    prefixd::fuzz::schema_seeds(out);
    prefixd::fuzz::image_seeds(out);
    prefixd::fuzz::kv_event_seeds(out);
    prefixd::fuzz::record_seeds(out, work);
    fs::remove_all(work);
    std::cout << "wrote " << out.written() << " seeds under " << argv[1] << "\n";
    return 0;
  } catch (const std::exception& e) {
    fs::remove_all(work);
    std::cerr << "prefixd_fuzz_seeds: " << e.what() << "\n";
    return 1;
  }
}
