#include "api/native/native_completion.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "api/native/infill_prompt.h"
#include "api/openai/request_parser.h"
#include "api/openai/responses.h"
#include "api/reply_answer.h"

namespace prefixd::api {
namespace {

OrderedJson bytes_of(std::string_view piece) {
  OrderedJson out = OrderedJson::array();
  for (const char c : piece) out.push_back(static_cast<unsigned char>(c));
  return out;
}

OrderedJson token_entry(const scheduler::TokenLogprob& t) {
  return {{"id", t.id}, {"token", t.piece}, {"bytes", bytes_of(t.piece)}, {"logprob", t.logprob}};
}

// completion_probabilities: each generated token with its log-probability and the n_probs most
// likely alternatives, in llama-server's shape.
OrderedJson probabilities_json(std::span<const scheduler::GeneratedLogprobs> tokens) {
  OrderedJson out = OrderedJson::array();
  for (const auto& t : tokens) {
    OrderedJson entry = token_entry(t.chosen);
    OrderedJson top = OrderedJson::array();
    for (const auto& alt : t.top) top.push_back(token_entry(alt));
    entry["top_logprobs"] = std::move(top);
    out.push_back(std::move(entry));
  }
  return out;
}

OrderedJson token_ids(std::span<const scheduler::GeneratedLogprobs> tokens) {
  OrderedJson out = OrderedJson::array();
  for (const auto& t : tokens) out.push_back(t.chosen.id);
  return out;
}

// What every object of a reply has; `tokens` only with return_tokens (llama-server sends [] else).
OrderedJson piece_json(const NativeReplyOptions& options, std::string_view content,
                       std::span<const scheduler::GeneratedLogprobs> tokens, bool stop) {
  OrderedJson out = {{"index", 0},
                     {"content", content},
                     {"tokens", options.return_tokens ? token_ids(tokens) : OrderedJson::array()},
                     {"stop", stop},
                     {"id_slot", options.id_slot}};
  if (options.n_probs > 0 && !stop) out["completion_probabilities"] = probabilities_json(tokens);
  return out;
}

class NativeStream final : public StreamFormat {
 public:
  NativeStream(ResponseMeta meta, NativeReplyOptions options) : meta_(std::move(meta)), options_(options) {}

  std::string open() override { return {}; }
  std::string text(const scheduler::StreamEvent& event) override {
    if (event.text.empty() && event.logprobs.empty()) return {};
    return sse_data(piece_json(options_, event.text, event.logprobs, false));
  }
  std::string reasoning(std::string_view text) override { return sse_data(piece_json(options_, text, {}, false)); }
  std::string done(const scheduler::StreamEvent& event) override {
    // The last object: the reply's totals, with no text of its own (every piece was sent).
    return sse_data(native_completion_body(meta_, NativeReplyOptions{.id_slot = options_.id_slot}, "", event, {}));
  }
  std::string stopped(const ApiError& why) override { return sse_data(why.to_json()); }
  std::string keep_alive() override { return sse_data(piece_json(options_, "", {}, false)); }
  std::string progress(const scheduler::PromptProgress& progress) override {
    OrderedJson chunk = piece_json(options_, "", {}, false);
    chunk["prompt_progress"] = prompt_progress_json(progress);
    return sse_data(chunk);
  }

 private:
  ResponseMeta meta_;
  NativeReplyOptions options_;
};

}  // namespace

const char* native_stop_type(const scheduler::StreamEvent& done) {
  switch (done.finish) {
    case scheduler::FinishReason::stop:
      return done.stop_sequence.empty() ? "eos" : "word";
    case scheduler::FinishReason::length:
      return "limit";
    case scheduler::FinishReason::cancelled:
    case scheduler::FinishReason::error:
      return "none";
  }
  return "none";
}

OrderedJson native_completion_body(const ResponseMeta& meta, const NativeReplyOptions& options, std::string_view content,
                                   const scheduler::StreamEvent& done,
                                   std::span<const scheduler::GeneratedLogprobs> tokens) {
  OrderedJson body = piece_json(options, content, tokens, true);
  body["model"] = meta.model;
  body["tokens_predicted"] = done.usage.completion_tokens;
  body["tokens_evaluated"] = done.usage.prompt_tokens;
  body["has_new_line"] = content.find('\n') != std::string_view::npos;
  body["truncated"] = false;
  body["stop_type"] = native_stop_type(done);
  body["stopping_word"] = done.stop_sequence;
  body["tokens_cached"] = done.usage.cached_tokens;
  body["timings"] = timings_json(done);
  body["prompt_cache"] = prompt_cache_json(done.cache);
  if (options.n_probs > 0) body["completion_probabilities"] = probabilities_json(tokens);
  return body;
}

OrderedJson select_fields(const OrderedJson& body, std::span<const std::string> paths) {
  OrderedJson out = OrderedJson::object();
  for (const std::string& path : paths) {
    const OrderedJson* at = &body;
    std::string_view rest = path;
    std::string_view key;
    while (at != nullptr) {
      const std::size_t slash = rest.find('/');
      key = rest.substr(0, slash);
      const auto it = at->is_object() ? at->find(std::string(key)) : at->end();
      at = at->is_object() && it != at->end() ? &*it : nullptr;
      if (slash == std::string_view::npos) break;
      rest.remove_prefix(slash + 1);
    }
    if (at != nullptr) out[std::string(key)] = *at;
  }
  return out;
}

std::unique_ptr<StreamFormat> native_stream_format(ResponseMeta meta, NativeReplyOptions options) {
  return std::make_unique<NativeStream>(std::move(meta), options);
}

namespace {

// Starts a parsed native request and answers it in llama-server's body or stream.
http::Response answer_native(ChatService& chats, const RouteContext& route, http::Request& req,
                             NativeCompletionRequest parsed) {
  const auto caller = route.caller(req);
  if (!caller) return error_response(caller.error());
  const NativeReplyOptions options{.n_probs = parsed.n_probs,
                                   .return_tokens = parsed.return_tokens,
                                   .id_slot = parsed.id_slot,
                                   .response_fields = std::move(parsed.response_fields)};
  auto pending = chats.start(std::move(parsed.completion), ChatAsk{.tenant = caller->tenant});
  if (!pending) return error_response(pending.error());
  const ResponseMeta meta = chats.reply_meta(Endpoint::completion, "cmpl-");
  return answer_reply(*pending, req, meta.id,
                      ReplyShape{
                          .body = [&](const CollectedReply& reply) {
                            OrderedJson body = native_completion_body(meta, options, reply.parsed.content, reply.done, reply.logprobs);
                            return options.response_fields.empty() ? body : select_fields(body, options.response_fields);
                          },
                          .stream_format = [&] { return native_stream_format(meta, options); },
                      });
}

// The context the infill layout sizes other files' chunks by: the longest prompt, and no more than
// the model was trained on (llama-server caps a slot's context there).
std::int32_t infill_context(const ChatService& chats) {
  const std::int32_t trained = chats.model().n_ctx_train;
  return trained > 0 ? std::min(chats.max_prompt_tokens(), trained) : chats.max_prompt_tokens();
}

}  // namespace

http::Response serve_native_completion(ChatService& chats, const RouteContext& route, http::Request& req) {
  if (auto refused = chats.prompts().refuse_oversized_completion(req.body, chats.max_prompt_tokens())) {
    return error_response(*refused);
  }
  auto parsed = parse_native_completion_request(release_body(req), route.parse);
  if (!parsed) return error_response(parsed.error());
  return answer_native(chats, route, req, std::move(*parsed));
}

http::Response serve_infill(ChatService& chats, const RouteContext& route, http::Request& req) {
  const engine::Vocabulary& vocab = chats.vocabulary();
  const std::optional<engine::InfillTokens> markers = vocab.infill_tokens();
  if (!markers) {
    return error_response(invalid_request(
        "this model cannot fill in the middle: its vocabulary has no prefix, suffix and middle tokens (a coder "
        "model's <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|> or their GGUF metadata)",
        "infill_not_supported"));
  }
  auto parsed = parse_infill_request(release_body(req), route.parse);
  if (!parsed) return error_response(parsed.error());
  const auto plain = [&vocab](std::string_view text) { return vocab.tokenize(text, false, false); };
  std::vector<engine::Token> prompt_tokens;
  if (const auto* text = std::get_if<std::string>(&parsed->prompt)) {
    prompt_tokens = vocab.tokenize(*text, /*add_special=*/false, /*parse_special=*/true);
  } else {
    prompt_tokens = std::get<TokenPrompt>(parsed->prompt);
  }
  std::vector<InfillFile> extra;
  extra.reserve(parsed->input_extra.size());
  for (const auto& chunk : parsed->input_extra) extra.push_back({.filename = chunk.filename, .text = chunk.text});
  NativeCompletionRequest native = std::move(parsed->native);
  native.completion.prompt = infill_prompt(*markers, plain,
                                           InfillText{.prefix = parsed->input_prefix,
                                                      .suffix = parsed->input_suffix,
                                                      .prompt = prompt_tokens,
                                                      .extra = extra},
                                           // The server's reply limit, as llama-server sizes it (its -n,
                                           // -1 unless set; prefixd has none), not the request's.
                                           InfillBudget{.context = infill_context(chats), .max_tokens = -1});
  return answer_native(chats, route, req, std::move(native));
}

}  // namespace prefixd::api
