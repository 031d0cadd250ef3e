#include "api/anthropic/anthropic_messages.h"

#include <algorithm>
#include <cctype>
#include <format>
#include <limits>
#include <set>
#include <utility>

#include "api/body/common_fields.h"
#include "api/body/field_reader.h"
#include "api/tools/tool_definitions.h"

namespace prefixd::api {
namespace {

using nlohmann::ordered_json;
using fields::FieldReader;
using fields::guarded;
using fields::reject;

using fields::kInt32Max;

// Anthropic allows longer tool names than OpenAI.
constexpr std::size_t kMaxAnthropicToolNameBytes = 128;

std::string block_type(const ordered_json& block, const std::string& param) {
  if (!block.is_object()) reject(param, std::format("'{}' must be a content block object", param));
  const auto type = block.find("type");
  if (type == block.end() || !type->is_string()) reject(param + ".type", std::format("'{}.type' must be a string", param));
  return type->get<std::string>();
}

std::string text_of(const ordered_json& block, const std::string& param) {
  const auto text = block.find("text");
  if (text == block.end() || !text->is_string()) reject(param + ".text", std::format("'{}.text' must be a string", param));
  return text->get<std::string>();
}

bool has_breakpoint(const ordered_json& block) {
  const auto control = block.find("cache_control");
  return control != block.end() && !control->is_null();
}

// How long a block's breakpoint asks its prefix to be kept: 5 minutes unless it says "1h"; zero
// without a breakpoint. (Checked by check_cache_control.)
std::chrono::seconds breakpoint_ttl(const ordered_json& block) {
  if (!has_breakpoint(block)) return std::chrono::seconds::zero();
  const ordered_json& control = block["cache_control"];
  return control.value("ttl", "5m") == "1h" ? std::chrono::hours(1) : std::chrono::minutes(5);
}

// Accepted on any block: {"type": "ephemeral", "ttl"?: "5m" | "1h"}.
void check_cache_control(const ordered_json& block, const std::string& param) {
  if (!has_breakpoint(block)) return;
  const ordered_json& control = block["cache_control"];
  if (!control.is_object() || control.value("type", "") != "ephemeral") {
    reject(param + ".cache_control", std::format("'{}.cache_control' must be {{\"type\": \"ephemeral\"}}", param));
  }
  if (const auto ttl = control.find("ttl"); ttl != control.end() && *ttl != "5m" && *ttl != "1h") {
    reject(param + ".cache_control.ttl", std::format("'{}.cache_control.ttl' must be \"5m\" or \"1h\"", param));
  }
}

[[noreturn]] void unsupported_block(const std::string& type, const std::string& param) {
  if (type == "image") {
    reject(param + ".type", "'image' blocks are served in user messages only (with --mmproj)");
  }
  if (type == "document") {
    reject(param + ".type", "'document' blocks are not supported: send the document's text");
  }
  reject(param + ".type", std::format("content blocks of type '{}' are not supported here", type));
}

// The text of a string or of text blocks (a system prompt, a tool result), joined by "\n".
std::string joined_text(const ordered_json& content, const std::string& param, std::chrono::seconds& breakpoint) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) reject(param, std::format("'{}' must be a string or an array of text blocks", param));
  std::string text;
  for (std::size_t j = 0; j < content.size(); ++j) {
    const std::string at = std::format("{}[{}]", param, j);
    const std::string type = block_type(content[j], at);
    if (type != "text") unsupported_block(type, at);
    check_cache_control(content[j], at);
    breakpoint = std::max(breakpoint, breakpoint_ttl(content[j]));
    if (j > 0) text += '\n';
    text += text_of(content[j], at);
  }
  return text;
}

void require_blocks(const ordered_json& content, const std::string& param) {
  if (!content.is_array() || content.empty()) reject(param, std::format("'{}' must be a string or a non-empty array of blocks", param));
}

struct Conversation {
  ordered_json messages = ordered_json::array();
  std::vector<ImageInput> images;  // in the order their markers stand in the messages
  std::optional<std::size_t> breakpoint_messages;
  std::vector<CacheBreakpoint> breakpoints;  // in order

  // The messages so far end at a breakpoint of `ttl` (none when zero).
  void mark(std::chrono::seconds ttl) {
    if (ttl == std::chrono::seconds::zero()) return;
    breakpoint_messages = messages.size();
    breakpoints.push_back({messages.size(), ttl});
  }
};

// An image block: {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ...}}.
// A URL source is refused (this server fetches nothing).
std::string image_block_bytes(const ordered_json& block, const std::string& param, const ImageLimits& limits) {
  const auto source = block.find("source");
  if (source == block.end() || !source->is_object()) reject(param + ".source", std::format("'{}.source' must be an object", param));
  const std::string type = source->value("type", "");
  if (type == "url") {
    reject(param + ".source", std::format("'{}.source' is a URL; this server fetches nothing: send the image as base64", param));
  }
  if (type != "base64") reject(param + ".source.type", std::format("'{}.source.type' must be 'base64'", param));
  const auto media_type = source->find("media_type");
  if (media_type == source->end() || !media_type->is_string() ||
      !media_type->get_ref<const std::string&>().starts_with("image/")) {
    reject(param + ".source.media_type", std::format("'{}.source.media_type' must be an image type (image/png, ...)", param));
  }
  const auto data = source->find("data");
  if (data == source->end() || !data->is_string()) reject(param + ".source.data", std::format("'{}.source.data' must be a string", param));
  return image_bytes_from_base64(data->get_ref<const std::string&>(), param + ".source.data", limits);
}

void add_user_turn(Conversation& out, const ordered_json& content, const std::string& param, const ImageLimits& limits) {
  if (content.is_string()) {
    out.messages.push_back({{"role", "user"}, {"content", content.get<std::string>()}});
    return;
  }
  require_blocks(content, param);
  std::string text;
  bool has_text = false;    // a text or image block came
  bool after_text = false;  // the last block was text: "\n" between text blocks only
  auto breakpoint = std::chrono::seconds::zero();
  for (std::size_t j = 0; j < content.size(); ++j) {
    const ordered_json& block = content[j];
    const std::string at = std::format("{}[{}]", param, j);
    const std::string type = block_type(block, at);
    check_cache_control(block, at);
    if (type == "tool_result") {
      if (has_text) reject(at, std::format("'{}': tool_result blocks come before any text in a user message", at));
      const auto id = block.find("tool_use_id");
      if (id == block.end() || !id->is_string() || id->get_ref<const std::string&>().empty()) {
        reject(at + ".tool_use_id", std::format("'{}.tool_use_id' is required: a result names the tool_use it answers", at));
      }
      auto inner_breakpoint = std::chrono::seconds::zero();
      const auto result = block.find("content");
      std::string result_text =
          result == block.end() || result->is_null() ? std::string() : joined_text(*result, at + ".content", inner_breakpoint);
      // An error result reaches the model as such: the template has no field for it.
      if (block.value("is_error", false)) result_text = "Error: " + result_text;
      out.messages.push_back({{"role", "tool"}, {"tool_call_id", id->get<std::string>()}, {"content", std::move(result_text)}});
      out.mark(std::max(breakpoint_ttl(block), inner_breakpoint));
    } else if (type == "text") {
      if (after_text) text += '\n';
      text += text_of(block, at);
      has_text = true;
      after_text = true;
      breakpoint = std::max(breakpoint, breakpoint_ttl(block));
    } else if (type == "image") {
      require_projector(at, limits);
      add_image(out.images, image_block_bytes(block, at, limits), at, limits);
      text += kImageMarker;  // nothing between an image and its neighbours, as chat content is flattened
      has_text = true;
      after_text = false;
      breakpoint = std::max(breakpoint, breakpoint_ttl(block));
    } else {
      unsupported_block(type, at);
    }
  }
  if (has_text) {
    out.messages.push_back({{"role", "user"}, {"content", std::move(text)}});
    out.mark(breakpoint);
  }
}

void add_assistant_turn(Conversation& out, const ordered_json& content, const std::string& param) {
  ordered_json message = {{"role", "assistant"}};
  if (content.is_string()) {
    message["content"] = content.get<std::string>();
    out.messages.push_back(std::move(message));
    return;
  }
  require_blocks(content, param);
  std::string text;
  std::string reasoning;
  ordered_json calls = ordered_json::array();
  auto breakpoint = std::chrono::seconds::zero();
  for (std::size_t j = 0; j < content.size(); ++j) {
    const ordered_json& block = content[j];
    const std::string at = std::format("{}[{}]", param, j);
    const std::string type = block_type(block, at);
    check_cache_control(block, at);
    breakpoint = std::max(breakpoint, breakpoint_ttl(block));
    if (type == "text") {
      text += text_of(block, at);
    } else if (type == "thinking") {
      const auto thinking = block.find("thinking");
      if (thinking == block.end() || !thinking->is_string()) reject(at + ".thinking", std::format("'{}.thinking' must be a string", at));
      reasoning += thinking->get<std::string>();
    } else if (type == "redacted_thinking") {
      // Encrypted reasoning from another provider: nothing a template could render.
    } else if (type == "tool_use") {
      const auto id = block.find("id");
      const auto name = block.find("name");
      const auto input = block.find("input");
      if (id == block.end() || !id->is_string()) reject(at + ".id", std::format("'{}.id' must be a string", at));
      if (name == block.end() || !name->is_string()) reject(at + ".name", std::format("'{}.name' must be a string", at));
      if (input == block.end() || !input->is_object()) reject(at + ".input", std::format("'{}.input' must be an object", at));
      // Compact, keys in the order sent: the form a reply's call is cached in for the next turn.
      calls.push_back({{"id", id->get<std::string>()},
                       {"type", "function"},
                       {"function", {{"name", name->get<std::string>()}, {"arguments", input->dump()}}}});
    } else {
      unsupported_block(type, at);
    }
  }
  message["content"] = text.empty() && !calls.empty() ? ordered_json(nullptr) : ordered_json(std::move(text));
  if (!calls.empty()) message["tool_calls"] = std::move(calls);
  if (!reasoning.empty()) message["reasoning_content"] = std::move(reasoning);
  out.messages.push_back(std::move(message));
  out.mark(breakpoint);
}

Conversation parse_conversation(const ordered_json& root, const ImageLimits& limits) {
  Conversation out;
  if (const auto system = root.find("system"); system != root.end() && !system->is_null()) {
    auto breakpoint = std::chrono::seconds::zero();
    std::string text = joined_text(*system, "system", breakpoint);
    out.messages.push_back({{"role", "system"}, {"content", std::move(text)}});
    out.mark(breakpoint);
  }
  const auto messages = root.find("messages");
  if (messages == root.end() || messages->is_null()) reject("messages", "'messages' is required");
  if (!messages->is_array() || messages->empty()) reject("messages", "'messages' must be a non-empty array");
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const ordered_json& message = (*messages)[i];
    const std::string param = std::format("messages[{}]", i);
    if (!message.is_object()) reject(param, std::format("'{}' must be an object", param));
    const auto role = message.find("role");
    const auto content = message.find("content");
    if (role == message.end() || (*role != "user" && *role != "assistant" && *role != "system")) {
      reject(param + ".role", std::format("'{}.role' must be 'user', 'assistant' or 'system'", param));
    }
    if (content == message.end() || content->is_null()) reject(param + ".content", std::format("'{}.content' is required", param));
    if (*role == "system") {
      // A system message within the conversation (agents send their environment this way): a
      // system turn where it stands, as the template renders one.
      auto breakpoint = std::chrono::seconds::zero();
      std::string text = joined_text(*content, param + ".content", breakpoint);
      out.messages.push_back({{"role", "system"}, {"content", std::move(text)}});
      out.mark(breakpoint);
    } else if (*role == "user") {
      add_user_turn(out, *content, param + ".content", limits);
    } else {
      if (i + 1 == messages->size()) {
        reject(param, std::format("'{}': a final assistant message (a prefill of the reply) is not supported", param));
      }
      add_assistant_turn(out, *content, param + ".content");
    }
  }
  return out;
}

// Anthropic tools -> function tools; a tool's breakpoint covers the tools, which the template
// renders before the first message.
ordered_json parse_tools(const ordered_json& root, std::chrono::seconds& breakpoint) {
  const auto tools = root.find("tools");
  if (tools == root.end() || tools->is_null()) return nullptr;
  if (!tools->is_array()) reject("tools", "'tools' must be an array");
  FunctionTools functions(kMaxAnthropicToolNameBytes);
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const ordered_json& tool = (*tools)[i];
    const std::string at = std::format("tools[{}]", i);
    if (!tool.is_object()) reject(at, std::format("'{}' must be an object", at));
    if (const auto type = tool.find("type"); type != tool.end() && !type->is_null() && *type != "custom") {
      reject(at + ".type", std::format("server tools ('{}') are not supported: only tools with an input_schema",
                                       type->is_string() ? type->get<std::string>() : type->dump()));
    }
    const auto schema = tool.find("input_schema");
    if (schema == tool.end() || !schema->is_object()) {
      reject(at + ".input_schema", std::format("'{}.input_schema' must be a JSON Schema object", at));
    }
    check_cache_control(tool, at);
    breakpoint = std::max(breakpoint, breakpoint_ttl(tool));
    // A deferred tool is one the model does not see until the client loads it (tool search):
    // its schema checked, not rendered.
    if (const auto deferred = tool.find("defer_loading"); deferred != tool.end() && *deferred == true) continue;
    // A function as Chat Completions defines it: the schema is its parameters; the envelope
    // (type, cache_control) is this protocol's, not the tool's.
    ordered_json function = ordered_json::object();
    if (const auto name = tool.find("name"); name != tool.end()) function["name"] = *name;
    if (const auto description = tool.find("description"); description != tool.end() && description->is_string()) {
      function["description"] = *description;
    }
    function["parameters"] = *schema;
    functions.add(std::move(function), at + ".name", at + ".input_schema");
  }
  return functions.tools();
}

ordered_json parse_tool_choice(const FieldReader& in, const ordered_json& tools, bool& parallel) {
  const ordered_json* choice = in.find("tool_choice");
  const bool has_tools = tools.is_array() && !tools.empty();
  if (!choice) return has_tools ? "auto" : "none";
  if (!choice->is_object() || !choice->contains("type") || !(*choice)["type"].is_string()) {
    reject("tool_choice", "'tool_choice' must be an object with a string 'type'");
  }
  if (const auto disable = choice->find("disable_parallel_tool_use"); disable != choice->end() && !disable->is_null()) {
    if (!disable->is_boolean()) reject("tool_choice.disable_parallel_tool_use", "'disable_parallel_tool_use' must be a boolean");
    parallel = !disable->get<bool>();
  }
  const std::string& type = (*choice)["type"].get_ref<const std::string&>();
  if (type == "none") return "none";
  if (!has_tools) reject("tool_choice", "'tool_choice' needs 'tools'");
  if (type == "auto") return "auto";
  if (type == "any") return "required";
  if (type != "tool") reject("tool_choice.type", "'tool_choice.type' must be 'auto', 'any', 'tool' or 'none'");
  const auto name = choice->find("name");
  if (name == choice->end() || !name->is_string()) reject("tool_choice.name", "'tool_choice.name' must be a string");
  const bool defined = std::ranges::any_of(tools, [&](const ordered_json& tool) { return tool["function"]["name"] == *name; });
  if (!defined) reject("tool_choice.name", std::format("'tool_choice' names '{}', which 'tools' does not define", name->get<std::string>()));
  return ordered_json{{"type", "function"}, {"function", {{"name", *name}}}};
}

std::vector<std::string> parse_stop_sequences(const FieldReader& in) {
  const ordered_json* value = in.find("stop_sequences");
  if (!value) return {};
  if (!value->is_array()) reject("stop_sequences", "'stop_sequences' must be an array of strings");
  if (value->size() > kMaxStopStrings) reject("stop_sequences", std::format("at most {} stop sequences are supported", kMaxStopStrings));
  std::vector<std::string> stop;
  for (const ordered_json& item : *value) {
    if (!item.is_string() || item.get_ref<const std::string&>().empty()) {
      reject("stop_sequences", "stop sequences must be non-empty strings");
    }
    if (item.get_ref<const std::string&>().size() > kMaxStopStringBytes) {
      reject("stop_sequences", std::format("stop sequences are limited to {} bytes", kMaxStopStringBytes));
    }
    stop.push_back(item.get<std::string>());
  }
  return stop;
}

CommonParams parse_params(const FieldReader& in, const ParseOptions& options, MessagesRoute route) {
  CommonParams params;
  fields::check_served_model(in, options.model_names, /*required=*/true);
  if (route == MessagesRoute::create) {
    const auto max_tokens = in.integer("max_tokens", 1, kInt32Max);
    if (!max_tokens) reject("max_tokens", "'max_tokens' is required");
    params.max_tokens = static_cast<std::int32_t>(*max_tokens);
  }
  params.sampling.seed = options.default_seed;
  fields::read_temperature(in, params.sampling, 1.0);
  if (auto p = in.number("top_p", 0.0, 1.0, /*lo_open=*/true)) params.sampling.top_p = static_cast<float>(*p);
  if (auto k = in.integer("top_k", 0, kInt32Max)) params.sampling.top_k = params.sampling.temperature == 0 ? 1 : static_cast<std::int32_t>(*k);
  params.stop = parse_stop_sequences(in);
  fields::read_streaming(in, params);
  // The end user's id is the cache session requests of one user share, as `user` is for OpenAI;
  // cache_prompt, prompt_cache_key and cache_salt are read as every endpoint reads them.
  std::optional<std::string> end_user;
  if (const ordered_json* metadata = in.find("metadata")) {
    if (!metadata->is_object()) reject("metadata", "'metadata' must be an object");
    end_user = FieldReader(*metadata).string("user_id");
  }
  params.cache = fields::read_cache_fields(in, options.cache_prompt_default, end_user);
  params.speculative = fields::read_speculative(in);
  return params;
}

ordered_json parse_thinking(const FieldReader& in) {
  const ordered_json* thinking = in.find("thinking");
  if (!thinking) return nullptr;
  if (!thinking->is_object() || !thinking->contains("type") || !(*thinking)["type"].is_string()) {
    reject("thinking", "'thinking' must be an object with a string 'type'");
  }
  const std::string& type = (*thinking)["type"].get_ref<const std::string&>();
  if (type != "enabled" && type != "disabled" && type != "adaptive") {
    reject("thinking.type", "'thinking.type' must be 'enabled', 'adaptive' or 'disabled'");
  }
  if (const auto display = thinking->find("display"); display != thinking->end() && !display->is_null() &&
                                                       *display != "summarized" && *display != "omitted") {
    reject("thinking.display", "'thinking.display' must be 'summarized' or 'omitted'");
  }
  // Adaptive: the model decides how much to think, which a reasoning template leaves to it anyway.
  return ordered_json{{"enable_thinking", type != "disabled"}};
}

}  // namespace

std::expected<MessagesRequest, ApiError> parse_messages_request(std::string_view body, const ParseOptions& options,
                                                                MessagesRoute route) {
  // Tool inputs and schemas keep the key order they were sent in (parse_json_object keeps it): an
  // input is rendered back as the model wrote it, a schema's property order becomes the order of a
  // forced call's keys, and the template prints the tools as the client wrote them.
  auto root = parse_json_object(body, options.max_json_nodes);
  if (!root) return std::unexpected(root.error());
  return guarded([&] {
    const FieldReader in(*root);
    MessagesRequest out;
    ChatRequest& request = out.chat;
    request.params = parse_params(in, options, route);
    Conversation conversation = parse_conversation(*root, options.images);
    auto tools_breakpoint = std::chrono::seconds::zero();
    request.tools = parse_tools(*root, tools_breakpoint);
    request.tool_choice = parse_tool_choice(in, request.tools, request.parallel_tool_calls);
    if (request.tool_choice != "none") request.chat.tools = request.tools;
    request.chat.messages = std::move(conversation.messages);
    request.images = std::move(conversation.images);
    if (!request.images.empty()) check_image_markers(request.chat.messages, request.images.size());
    request.chat.extra_context = parse_thinking(in);
    out.breakpoint_messages = conversation.breakpoint_messages;
    if (tools_breakpoint > std::chrono::seconds::zero() && !out.breakpoint_messages) out.breakpoint_messages = 0;
    // The template renders the tools inside the system prompt: a tools breakpoint keeps the system
    // message with them (nothing, without one: no prefix of the prompt holds the tools alone).
    std::vector<CacheBreakpoint> all;
    const bool system = !request.chat.messages.empty() && request.chat.messages[0]["role"] == "system";
    if (tools_breakpoint > std::chrono::seconds::zero() && system) all.push_back({1, tools_breakpoint});
    all.insert(all.end(), conversation.breakpoints.begin(), conversation.breakpoints.end());
    // Per TTL, the last breakpoint with it.
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (std::ranges::none_of(out.retained, [&](const CacheBreakpoint& b) { return b.ttl == it->ttl; })) out.retained.push_back(*it);
    }
    return out;
  });
}

ordered_json anthropic_error_json(const ApiError& error) {
  const char* type = "invalid_request_error";
  switch (error.status) {
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: type = "overloaded_error"; break;
    default: type = error.status >= 500 ? "api_error" : "invalid_request_error";
  }
  return ordered_json{{"type", "error"}, {"error", {{"type", type}, {"message", error.message}}}};
}

MessagesUsage messages_usage(const scheduler::Usage& usage, std::optional<std::int32_t> breakpoint_tokens) {
  MessagesUsage out;
  out.cache_read_input_tokens = usage.cached_tokens;
  const std::int32_t computed = usage.prompt_tokens - usage.cached_tokens;
  if (breakpoint_tokens) {
    const std::int32_t up_to = std::clamp(*breakpoint_tokens, usage.cached_tokens, usage.prompt_tokens);
    out.cache_creation_input_tokens = up_to - usage.cached_tokens;
  }
  out.input_tokens = computed - out.cache_creation_input_tokens;
  out.output_tokens = usage.completion_tokens;
  return out;
}

ordered_json messages_usage_json(const MessagesUsage& usage) {
  return ordered_json{{"input_tokens", usage.input_tokens},
                      {"cache_creation_input_tokens", usage.cache_creation_input_tokens},
                      {"cache_read_input_tokens", usage.cache_read_input_tokens},
                      {"output_tokens", usage.output_tokens}};
}

const char* messages_stop_reason(const scheduler::StreamEvent& done, bool called_tools) {
  if (done.finish == scheduler::FinishReason::length) return "max_tokens";
  if (!done.stop_sequence.empty()) return "stop_sequence";
  return called_tools ? "tool_use" : "end_turn";
}

ordered_json tool_use_input(const ToolCall& call) {
  ordered_json input = ordered_json::parse(call.arguments, nullptr, false);
  return input.is_object() ? input : ordered_json::object();
}

ordered_json messages_body(const ResponseMeta& meta, const ParsedAssistant& reply, const scheduler::StreamEvent& done,
                           const MessagesUsage& usage) {
  ordered_json content = ordered_json::array();
  // The signature proves a thinking block to the service that wrote it; prefixd renders a block it
  // gets back whatever its signature, so it signs nothing.
  if (!reply.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", reply.reasoning}, {"signature", ""}});
  if (!reply.content.empty()) content.push_back({{"type", "text"}, {"text", reply.content}});
  for (const ToolCall& call : reply.tool_calls) {
    content.push_back({{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", tool_use_input(call)}});
  }
  ordered_json body = {{"id", meta.id},
                       {"type", "message"},
                       {"role", "assistant"},
                       {"model", meta.model},
                       {"content", std::move(content)},
                       {"stop_reason", messages_stop_reason(done, !reply.tool_calls.empty())},
                       {"stop_sequence", done.stop_sequence.empty() ? ordered_json(nullptr) : ordered_json(done.stop_sequence)},
                       {"usage", messages_usage_json(usage)}};
  body["prompt_cache"] = prompt_cache_json(done.cache);
  body["timings"] = timings_json(done);
  return body;
}

}  // namespace prefixd::api
