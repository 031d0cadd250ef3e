#include "bench/soak_traffic.h"

#include <format>

namespace prefixd::bench {
namespace {

using nlohmann::json;

// Seeds of the texts, apart from each other so no two streams of words coincide.
constexpr std::uint64_t kSystemSeed = 0x5eed'0000'0000ull;
constexpr std::uint64_t kUserSeed = 0x5eed'1000'0000ull;

// The bad requests, each with the status the API promises for it (docs/operator-guide.md).
constexpr int kInvalidKinds = 8;

}  // namespace

SoakTraffic::SoakTraffic(std::uint64_t seed, int client, SoakShape shape)
    : seed_(seed), client_(client), shape_(shape), rng_(seed * 1'000'003 + static_cast<std::uint64_t>(client)) {}

int SoakTraffic::between(int lo, int hi) {
  return static_cast<int>(rng_.uniform(static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi) + 1));
}

std::string SoakTraffic::system_prompt(std::uint64_t index) const {
  return make_text(kSystemSeed + seed_ * 64 + index, static_cast<std::size_t>(shape_.system_words));
}

void SoakTraffic::start_session() {
  session_ = std::format("soak-{}-{}", client_, sessions_++);
  const auto which = rng_.uniform(0, static_cast<std::uint64_t>(shape_.system_prompts));
  messages_ = json::array({{{"role", "system"}, {"content", system_prompt(which)}}});
  turns_left_ = between(2, std::max(2, shape_.max_turns));
}

SoakRequest SoakTraffic::chat_turn(SoakKind kind) {
  if (turns_left_ <= 0) start_session();
  const std::string user = make_text(kUserSeed + rng_.next() % 1'000'000, static_cast<std::size_t>(between(shape_.user_words_min, shape_.user_words_max)));
  messages_.push_back({{"role", "user"}, {"content", user}});
  json body = {{"messages", messages_},
               {"max_tokens", between(shape_.max_tokens_min, shape_.max_tokens_max)},
               {"temperature", 0},
               {"prompt_cache_key", session_}};
  if (kind != SoakKind::chat) body["stream_options"] = {{"include_usage", true}};
  SoakRequest request{.kind = kind, .path = "/v1/chat/completions", .body = body.dump()};
  if (kind == SoakKind::chat_cancel) request.cancel_after_reads = between(1, 4);
  return request;
}

SoakRequest SoakTraffic::completion() {
  // A raw prompt that starts with a shared system prompt's text: completions share prefixes too.
  const auto which = rng_.uniform(0, static_cast<std::uint64_t>(shape_.system_prompts));
  const std::string prompt = system_prompt(which) + "\n" + make_text(kUserSeed + rng_.next() % 1'000'000, 12);
  const json body = {{"prompt", prompt}, {"max_tokens", between(shape_.max_tokens_min, shape_.max_tokens_max)}, {"temperature", 0}};
  return {.kind = SoakKind::completion, .path = "/v1/completions", .body = body.dump()};
}

SoakRequest SoakTraffic::constrained() {
  // Every field bounded (a random-weight model never closes an open string), and an enum large
  // enough that its grammar is a trie of many rules: the grammar engine's memory per request comes
  // and goes with these.
  json tags = json::array();
  for (int i = 0; i < shape_.constrained_enum_values; ++i) tags.push_back(std::format("tag-{}", (i * 7919) % 100'003));
  const json schema = {{"type", "object"},
                       {"properties", {{"tag", {{"enum", tags}}},
                                       {"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 999}}},
                                       {"note", {{"type", "string"}, {"maxLength", 12}}}}},
                       {"required", {"tag", "n", "note"}},
                       {"additionalProperties", false}};
  const json body = {{"messages", json::array({{{"role", "user"}, {"content", make_text(kUserSeed + rng_.next() % 1'000'000, 12)}}})},
                     {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "tagged"}, {"schema", schema}}}}},
                     {"max_tokens", 64},
                     {"temperature", 0.8},
                     {"seed", rng_.next() % 1'000'000}};
  return {.kind = SoakKind::constrained, .path = "/v1/chat/completions", .body = body.dump()};
}

SoakRequest SoakTraffic::invalid() {
  SoakRequest request{.kind = SoakKind::invalid, .path = "/v1/chat/completions", .expected_status = 400};
  const json hello = json::array({{{"role", "user"}, {"content", "hello"}}});
  switch (between(0, kInvalidKinds - 1)) {
    case 0: request.body = R"({"messages": [{"role": "user", "content": "unterminated)"; break;
    case 1: request.body = json{{"messages", "hello"}}.dump(); break;
    case 2: request.body = json{{"messages", json::array()}}.dump(); break;
    case 3:
      request.body = json{{"model", "no-such-model"}, {"messages", hello}}.dump();
      request.expected_status = 404;
      break;
    case 4: request.body = json{{"messages", hello}, {"top_logprobs", 2}}.dump(); break;
    case 5: {
      // Nested far deeper than any real request, inside a message the server copies and renders:
      // refused before anything walks it.
      const std::size_t depth = 100'000;
      request.body = R"({"messages": [{"role": "user", "content": "x", "extra": )" + std::string(depth, '[') +
                     std::string(depth, ']') + "}]}";
      break;
    }
    case 6:
      // More words than the context has cells: context_length_exceeded after tokenizing.
      request.body = json{{"messages", json::array({{{"role", "user"},
                                                     {"content", make_text(kUserSeed, static_cast<std::size_t>(shape_.ctx_size) * 2)}}})}}
                         .dump();
      break;
    default:
      request.body = json{{"messages", json::array({{{"role", "user"},
                                                     {"content", json::array({{{"type", "image_url"},
                                                                               {"image_url", {{"url", "http://x/y.png"}}}}})}}})}}
                         .dump();
      break;
  }
  return request;
}

SoakRequest SoakTraffic::next() {
  const int roll = between(0, 999);
  int edge = shape_.invalid_per_mille;
  if (roll < edge) return invalid();
  if (roll < (edge += shape_.completion_per_mille)) return completion();
  if (roll < (edge += shape_.constrained_per_mille)) return constrained();
  if (roll < (edge += shape_.cancel_per_mille)) return chat_turn(SoakKind::chat_cancel);
  return chat_turn(roll % 2 == 0 ? SoakKind::chat_stream : SoakKind::chat);
}

void SoakTraffic::answered(const SoakRequest& request, const CompletionResult& result) {
  if (request.kind != SoakKind::chat && request.kind != SoakKind::chat_stream && request.kind != SoakKind::chat_cancel) return;
  if (result.ok() && !result.cancelled) {
    // The next turn sends the reply back, as a chat client does.
    messages_.push_back({{"role", "assistant"}, {"content", result.text}});
    --turns_left_;
  } else {
    // A reply the user stopped (or that failed) is not part of the conversation; the session
    // goes on from its previous turn.
    messages_.erase(messages_.size() - 1);
  }
}

SoakOutcome classify(const SoakRequest& request, const CompletionResult& result, std::string& detail) {
  if (request.kind == SoakKind::invalid) {
    // The error body must be OpenAI's {"error": {"message", ...}} (result.text holds the body).
    const auto body = json::parse(result.text, nullptr, false);
    const bool shaped = body.is_object() && body.contains("error") && body["error"].is_object() &&
                        body["error"].contains("message") && body["error"]["message"].is_string();
    if (result.status == request.expected_status && shaped) return SoakOutcome::rejected;
    detail = std::format("a bad request got {} (expected {} with an error body): {}", result.status,
                         request.expected_status, result.text.substr(0, 200));
    return SoakOutcome::unexpected;
  }
  if (result.cancelled) return SoakOutcome::cancelled;
  if (!result.ok()) {
    detail = result.error;
    return SoakOutcome::unexpected;
  }
  if (result.status != 200 || result.finish_reason.empty()) {
    detail = std::format("status {}, finish reason '{}'", result.status, result.finish_reason);
    return SoakOutcome::unexpected;
  }
  // A structured reply that ended by itself is a whole JSON object.
  if (request.kind == SoakKind::constrained && result.finish_reason == "stop" &&
      !json::parse(result.text, nullptr, false).is_object()) {
    detail = "a JSON-schema reply that stopped is not a JSON object: " + result.text.substr(0, 200);
    return SoakOutcome::unexpected;
  }
  return SoakOutcome::completed;
}

}  // namespace prefixd::bench
