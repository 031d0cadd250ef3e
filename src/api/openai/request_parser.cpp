#include "api/openai/request_parser.h"

#include "api/body/common_fields.h"
#include "api/body/field_reader.h"
#include "api/tools/tool_definitions.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <format>
#include <set>
#include <limits>
#include <optional>
#include <utility>

namespace prefixd::api {
namespace {

using nlohmann::ordered_json;
using fields::FieldReader;
using fields::guarded;
using fields::reject;

using fields::kInt32Max;

std::vector<std::string> parse_stop(const FieldReader& in) {
  const ordered_json* value = in.find("stop");
  if (!value) return {};
  std::vector<std::string> stop;
  auto add = [&](const ordered_json& item) {
    if (!item.is_string()) reject("stop", "'stop' must be a string or an array of strings");
    auto text = item.get<std::string>();
    if (text.empty()) reject("stop", "stop strings must not be empty");
    if (text.size() > kMaxStopStringBytes) reject("stop", std::format("stop strings are limited to {} bytes", kMaxStopStringBytes));
    stop.push_back(std::move(text));
  };
  if (value->is_array()) {
    if (value->size() > kMaxStopStrings) reject("stop", std::format("at most {} stop strings are supported", kMaxStopStrings));
    for (const auto& item : *value) add(item);
  } else {
    add(*value);
  }
  return stop;
}

std::int32_t parse_max_tokens(const FieldReader& in) {
  // OpenAI renamed max_tokens to max_completion_tokens; llama.cpp clients say n_predict (where -1
  // means "no limit"). The newest name wins when several are present.
  if (auto n = in.integer("max_completion_tokens", 1, kInt32Max)) return static_cast<std::int32_t>(*n);
  if (const ordered_json* value = in.find("max_tokens")) {
    return static_cast<std::int32_t>(FieldReader::to_integer(*value, "max_tokens", 1, kInt32Max));
  }
  if (auto n = in.integer("n_predict", -1, kInt32Max)) {
    if (*n == 0) reject("n_predict", "'n_predict' must be -1 (no limit) or at least 1");
    return static_cast<std::int32_t>(*n);
  }
  return -1;
}

engine::SamplingParams parse_sampling(const FieldReader& in, const ParseOptions& options) {
  engine::SamplingParams sampling;
  sampling.seed = options.default_seed;
  if (auto v = in.number("top_p", 0.0, 1.0, /*lo_open=*/true)) sampling.top_p = static_cast<float>(*v);
  if (auto v = in.integer("top_k", 0, kInt32Max)) sampling.top_k = static_cast<std::int32_t>(*v);
  if (auto v = in.number("min_p", 0.0, 1.0)) sampling.min_p = static_cast<float>(*v);
  sampling.ignore_eos = in.boolean("ignore_eos", /*extended=*/true).value_or(false);
  if (const ordered_json* seed = in.find("seed")) {
    const auto n = FieldReader::to_integer(*seed, "seed", std::numeric_limits<std::int64_t>::min(),
                                           std::numeric_limits<std::int64_t>::max());
    // Negative seeds ask for a random one (llama.cpp's -1); others are taken modulo 2^32.
    sampling.seed = n < 0 ? engine::kRandomSeed : static_cast<std::uint32_t>(n & 0xFFFFFFFF);
  }
  fields::read_temperature(in, sampling, 2.0);
  // Accepted for compatibility and range-checked, but this server applies no penalties.
  in.number("presence_penalty", -2.0, 2.0);
  in.number("frequency_penalty", -2.0, 2.0);
  return sampling;
}

CommonParams parse_common(const FieldReader& in, const ParseOptions& options) {
  fields::check_served_model(in, options.model_names, /*required=*/false);
  CommonParams params;
  params.sampling = parse_sampling(in, options);
  params.max_tokens = parse_max_tokens(in);
  params.stop = parse_stop(in);
  fields::read_streaming(in, params);
  if (const ordered_json* stream_options = in.find("stream_options")) {
    if (!stream_options->is_object()) reject("stream_options", "'stream_options' must be an object");
    params.include_usage = FieldReader(*stream_options).boolean("include_usage").value_or(false);
  }
  if (auto n = in.integer("n", std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
      n && *n != 1) {
    reject("n", "only n = 1 is supported");
  }
  params.cache = fields::read_cache_fields(in, options.cache_prompt_default, in.string("user"));
  params.speculative = fields::read_speculative(in);
  // llama.cpp's time bounds, in milliseconds (-1 or 0: none). The prompt's bound is accepted as
  // llama-server accepts it, without effect there or here.
  if (auto ms = in.integer("t_max_predict_ms", -1, kInt32Max); ms && *ms > 0) {
    params.time_limit_after_newline = std::chrono::milliseconds(*ms);
  }
  in.integer("t_max_prompt_ms", -1, kInt32Max);
  // llama.cpp's n_indent: the least indent of a line after the first (0: no floor).
  params.indent_floor = static_cast<std::int32_t>(in.integer("n_indent", 0, kInt32Max).value_or(0));
  // llama.cpp's n_cache_reuse: the shortest chunk worth moving from later in a cached sequence
  // (0: none for this request); absent: the server's --cache-reuse.
  if (auto n = in.integer("n_cache_reuse", 0, kInt32Max)) {
    if (*n > 0 && !options.shift_reuse) {
      reject("n_cache_reuse", "this server cannot reuse K/V by shifting it: the prompt cache is off, or the model's "
                              "memory cannot move cells (recurrent, hybrid or M-RoPE models, and sliding-window "
                              "models with --swa-full off)");
    }
    params.cache.shift_reuse_min = static_cast<std::int32_t>(*n);
  }
  return params;
}

// An image_url part: {"type": "image_url", "image_url": {"url": "data:image/...;base64,..."}} (the
// url alone as a string is accepted too).
void read_image_part(const ordered_json& part, const std::string& part_param, std::vector<ImageInput>& images,
                     const ImageLimits& limits) {
  require_projector(part_param, limits);
  const auto image_url = part.find("image_url");
  const std::string url_param = part_param + ".image_url";
  const ordered_json* url = nullptr;
  if (image_url != part.end() && image_url->is_string()) {
    url = &*image_url;
  } else if (image_url != part.end() && image_url->is_object() && image_url->contains("url")) {
    url = &(*image_url)["url"];
  }
  if (url == nullptr || !url->is_string()) {
    reject(url_param + ".url", std::format("'{}.url' must be a string (a data: URL)", url_param));
  }
  std::string bytes = image_bytes_from_url(url->get_ref<const std::string&>(), url_param + ".url", limits);
  add_image(images, std::move(bytes), part_param, limits);
}

// OpenAI content is a string or an array of parts; templates expect strings, so text parts are
// joined by "\n", and an image part becomes kImageMarker in that text, with nothing between it and
// the parts beside it (llama-server renders the same text, so both tokenize a prompt alike) with its bytes kept in `images`. The
// text is moved out of the request tree, which is not read again: a long prompt is not copied.
ordered_json flatten_content(ordered_json& content, const std::string& param, std::vector<ImageInput>& images,
                     const ImageLimits& limits) {
  if (content.is_string()) return std::move(content);
  if (!content.is_array()) reject(param, std::format("'{}' must be a string or an array of content parts", param));
  std::string text;
  bool after_text = false;  // text parts are joined by "\n"; media markers stand next to the text (as llama-server joins them)
  for (std::size_t j = 0; j < content.size(); ++j) {
    ordered_json& part = content[j];
    const std::string part_param = std::format("{}[{}]", param, j);
    if (!part.is_object()) reject(part_param, std::format("'{}' must be an object", part_param));
    const auto type = part.find("type");
    if (type == part.end() || !type->is_string()) reject(part_param + ".type", std::format("'{}.type' must be a string", part_param));
    if (*type == "image_url" || *type == "input_audio") {
      if (*type == "image_url") {
        read_image_part(part, part_param, images, limits);
      } else {
        add_audio_part(part, part_param, images, limits);
      }
      text += kImageMarker;
      after_text = false;
      continue;
    }
    if (*type != "text") {
      reject(part_param + ".type", std::format("content parts of type '{}' are not supported (text, image_url and input_audio)",
                                               type->get<std::string>()));
    }
    const auto part_text = part.find("text");
    if (part_text == part.end() || !part_text->is_string()) {
      reject(part_param + ".text", std::format("'{}.text' must be a string", part_param));
    }
    if (after_text) text += '\n';
    text += part_text->get_ref<const std::string&>();
    after_text = true;
  }
  return text;
}

void check_tool_calls(const ordered_json& calls, const std::string& param) {
  if (!calls.is_array()) reject(param, "'tool_calls' must be an array");
  for (std::size_t j = 0; j < calls.size(); ++j) {
    const ordered_json& call = calls[j];
    const std::string call_param = std::format("{}[{}]", param, j);
    const auto function = call.is_object() ? call.find("function") : call.end();
    if (!call.is_object() || function == call.end() || !function->is_object() || !function->contains("name") ||
        !(*function)["name"].is_string()) {
      reject(call_param, "each tool call needs a 'function' object with a string 'name'");
    }
    if (const auto type = call.find("type"); type != call.end() && !type->is_null() && *type != "function") {
      reject(call_param + ".type", "only tool calls of type 'function' are supported");
    }
  }
}

// The roles of OpenAI's chat API. Any other role is refused rather than handed to a template that
// might skip it without a word ("function", the predecessor of "tool", included: templates do not
// render it).
constexpr std::string_view kRoles[] = {"system", "developer", "user", "assistant", "tool"};

// Validates the messages and shapes them for the template, in place: the caller's tree is consumed.
ordered_json parse_messages(ordered_json& root, std::vector<ImageInput>& images, const ImageLimits& limits) {
  const auto found = root.find("messages");
  if (found == root.end() || found->is_null()) reject("messages", "'messages' is required");
  ordered_json& messages = *found;
  if (!messages.is_array()) reject("messages", "'messages' must be an array");
  if (messages.empty()) reject("messages", "'messages' must contain at least one message");
  for (std::size_t i = 0; i < messages.size(); ++i) {
    ordered_json& message = messages[i];
    const std::string param = std::format("messages[{}]", i);
    if (!message.is_object()) reject(param, std::format("'{}' must be an object", param));
    const auto role = message.find("role");
    if (role == message.end() || !role->is_string() || role->get_ref<const std::string&>().empty()) {
      reject(param + ".role", std::format("'{}.role' must be a non-empty string", param));
    }
    if (std::ranges::find(kRoles, role->get_ref<const std::string&>()) == std::end(kRoles)) {
      reject(param + ".role", std::format("'{}.role' is '{}'; the roles are system, developer, user, assistant and tool",
                                          param, role->get<std::string>()));
    }
    // "developer" is OpenAI's newer name for "system"; chat templates only know the old one.
    if (*role == "developer") *role = "system";
    if (const auto name = message.find("name"); name != message.end() && !name->is_null() && !name->is_string()) {
      reject(param + ".name", std::format("'{}.name' must be a string", param));
    }
    // A tool result names the call it answers; without the id a template renders it as a reply to
    // nothing (or to the wrong call when there were several), so it is the client's mistake.
    if (*role == "tool") {
      const auto id = message.find("tool_call_id");
      if (id == message.end() || !id->is_string() || id->get_ref<const std::string&>().empty()) {
        reject(param + ".tool_call_id",
               std::format("'{}.tool_call_id' is required: a tool message names the tool call it answers", param));
      }
    }
    const bool has_tool_calls = message.contains("tool_calls") && !message["tool_calls"].is_null();
    if (has_tool_calls) {
      if (*role != "assistant") reject(param + ".tool_calls", "only assistant messages carry tool_calls");
      check_tool_calls(message["tool_calls"], param + ".tool_calls");
    }
    const auto content = message.find("content");
    if (content == message.end() || content->is_null()) {
      if (!has_tool_calls) reject(param + ".content", std::format("'{}.content' is required", param));
      message["content"] = nullptr;
    } else {
      *content = flatten_content(*content, param + ".content", images, limits);
    }
  }
  return std::move(messages);
}

ordered_json parse_tools(const FieldReader& in) {
  const ordered_json* tools = in.find("tools");
  if (!tools) return nullptr;
  if (!tools->is_array()) reject("tools", "'tools' must be an array");
  FunctionTools checked;
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const ordered_json& tool = (*tools)[i];
    const std::string at = std::format("tools[{}]", i);
    const auto function = tool.is_object() ? tool.find("function") : tool.end();
    if (!tool.is_object() || function == tool.end() || !function->is_object() || !function->contains("name") ||
        !(*function)["name"].is_string()) {
      reject(at + ".function", std::format("'{}' needs a 'function' object with a string 'name'", at));
    }
    if (tool.contains("type") && tool["type"] != "function") reject(at + ".type", "only tools of type 'function' are supported");
    // The checks only: the template receives the tools as sent.
    checked.add(*function, at + ".function.name", at + ".function.parameters");
  }
  return *tools;
}

ordered_json parse_tool_choice(const FieldReader& in, const ordered_json& tools) {
  const bool has_tools = tools.is_array() && !tools.empty();
  const ordered_json* choice = in.find("tool_choice");
  if (!choice) return has_tools ? "auto" : "none";
  if (choice->is_string()) {
    if (*choice != "none" && *choice != "auto" && *choice != "required") {
      reject("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or a function object");
    }
  } else if (!choice->is_object()) {
    reject("tool_choice", "'tool_choice' must be a string or an object");
  } else {
    // {"type": "function", "function": {"name": ...}}: one of the request's functions.
    const auto function = choice->find("function");
    if (choice->value("type", "function") != "function" || function == choice->end() || !function->is_object() ||
        !function->contains("name") || !(*function)["name"].is_string()) {
      reject("tool_choice", "'tool_choice' as an object is {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    const std::string& name = (*function)["name"].get_ref<const std::string&>();
    const bool defined = has_tools && std::ranges::any_of(tools, [&](const ordered_json& tool) { return tool["function"]["name"] == name; });
    if (!defined) reject("tool_choice.function.name", std::format("'tool_choice' names '{}', which 'tools' does not define", name));
  }
  if (*choice != "none" && !has_tools) reject("tool_choice", "'tool_choice' needs 'tools'");
  return *choice;
}

// response_format: {"type": "text"} (nothing), {"type": "json_object"} or {"type": "json_schema",
// "json_schema": {"name"?, "schema", "strict"?}}. The schema keeps its key order (the body is
// parsed keeping it), since its property order becomes the order of the output's keys.
OutputFormat parse_response_format(const FieldReader& in) {
  OutputFormat out;
  const ordered_json* format = in.find("response_format");
  if (!format) return out;
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string()) {
    reject("response_format", "'response_format' must be an object with a string 'type'");
  }
  const std::string& type = (*format)["type"].get_ref<const std::string&>();
  if (type == "text") return out;
  if (type == "json_object") {
    out.kind = OutputFormat::Kind::json_object;
    return out;
  }
  if (type != "json_schema") {
    reject("response_format.type", "'response_format.type' must be 'text', 'json_object' or 'json_schema'");
  }
  const auto spec = format->find("json_schema");
  if (spec == format->end() || !spec->is_object()) {
    reject("response_format.json_schema", "'response_format.json_schema' must be an object with a 'schema'");
  }
  const auto schema = spec->find("schema");
  if (schema == spec->end() || !(schema->is_object() || schema->is_boolean())) {
    reject("response_format.json_schema.schema", "'response_format.json_schema.schema' must be a JSON Schema object");
  }
  if (const auto name = spec->find("name"); name != spec->end() && !name->is_string()) {
    reject("response_format.json_schema.name", "'response_format.json_schema.name' must be a string");
  }
  out.kind = OutputFormat::Kind::json_schema;
  out.schema = *schema;
  return out;
}

ordered_json parse_template_kwargs(const FieldReader& in) {
  const ordered_json* kwargs = in.find_extended("chat_template_kwargs");
  // `thinking` is the switch reasoning templates read as `enable_thinking`; it is a kwarg like any
  // other (part of the namespace), so warming a key with it on and generating with it on agree.
  const std::optional<bool> thinking = in.boolean("thinking");
  if (!kwargs && !thinking) return nullptr;
  if (kwargs && !kwargs->is_object()) reject("chat_template_kwargs", "'chat_template_kwargs' must be an object");
  ordered_json out = kwargs ? *kwargs : ordered_json::object();
  // These names are the template's own inputs; a kwarg must not silently replace them.
  for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}) {
    if (out.contains(reserved)) {
      reject("chat_template_kwargs", std::format("'chat_template_kwargs' must not set '{}'", reserved));
    }
  }
  if (thinking) {
    if (const auto set = out.find("enable_thinking"); set != out.end() && *set != *thinking) {
      reject("thinking", "'thinking' contradicts 'chat_template_kwargs.enable_thinking'");
    }
    out["enable_thinking"] = *thinking;
  }
  return out;
}

TokenPrompt parse_token_ids(const ordered_json& ids, const ParseOptions& options) {
  TokenPrompt tokens;
  tokens.reserve(ids.size());
  const std::int64_t hi = options.vocab_size > 0 ? options.vocab_size - 1 : kInt32Max;
  for (const auto& id : ids) tokens.push_back(static_cast<engine::Token>(FieldReader::to_integer(id, "prompt", 0, hi)));
  return tokens;
}

std::variant<std::string, TokenPrompt> parse_prompt(const FieldReader& in, const ParseOptions& options) {
  const ordered_json* prompt = in.find("prompt");
  if (!prompt) reject("prompt", "'prompt' is required");
  auto text = [](const ordered_json& value) {
    auto s = value.get<std::string>();
    if (s.empty()) reject("prompt", "'prompt' must not be empty");
    return s;
  };
  if (prompt->is_string()) return text(*prompt);
  if (!prompt->is_array()) reject("prompt", "'prompt' must be a string, an array of token ids or an array with one string");
  if (prompt->empty()) reject("prompt", "'prompt' must not be empty");
  const ordered_json& first = prompt->front();
  if (first.is_number()) return parse_token_ids(*prompt, options);
  // A batch of prompts would need n choices; only a batch of one is accepted.
  if (prompt->size() != 1) reject("prompt", "only one prompt per request is supported");
  if (first.is_string()) return text(first);
  if (first.is_array() && !first.empty()) return parse_token_ids(first, options);
  reject("prompt", "'prompt' must be a string, an array of token ids or an array with one string");
}

}  // namespace

std::expected<ordered_json, ApiError> parse_json_object(std::string_view body, std::size_t max_nodes) {
  if (auto refused = refuse_unbounded_json(body, max_nodes)) return std::unexpected(std::move(*refused));
  // nlohmann's parser takes a NUL byte for the end of its input, so "{...}\0anything" would parse
  // as the object alone; JSON allows no raw NUL anywhere (inside strings it must be escaped).
  if (body.find('\0') != std::string_view::npos) {
    return std::unexpected(invalid_request("the request body is not valid JSON: it holds a NUL byte", "invalid_json"));
  }
  ordered_json root = ordered_json::parse(body, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return std::unexpected(invalid_request("the request body is not valid JSON", "invalid_json"));
  if (!root.is_object()) return std::unexpected(invalid_request("the request body must be a JSON object"));
  return root;
}

std::expected<ChatRequest, ApiError> parse_chat_request(std::string_view body, const ParseOptions& options) {
  auto root = parse_json_object(body, options.max_json_nodes);
  if (!root) return std::unexpected(root.error());
  return guarded([&] {
    const FieldReader in(*root);
    ChatRequest request;
    request.params = parse_common(in, options);
    // OpenAI: `logprobs` turns them on, `top_logprobs` (0-20) adds alternatives and needs it.
    const bool logprobs = in.boolean("logprobs").value_or(false);
    const auto top = in.integer("top_logprobs", 0, scheduler::kMaxTopLogprobs);
    if (top && !logprobs) reject("top_logprobs", "'top_logprobs' requires 'logprobs': true");
    request.params.logprobs = logprobs ? static_cast<std::int32_t>(top.value_or(0)) : -1;
    request.chat.messages = parse_messages(*root, request.images, options.images);
    if (!request.images.empty()) check_image_markers(request.chat.messages, request.images.size());
    request.tools = parse_tools(in);
    request.tool_choice = parse_tool_choice(in, request.tools);
    request.response_format = parse_response_format(in);
    request.parallel_tool_calls = in.boolean("parallel_tool_calls").value_or(true);
    if (request.response_format.kind != OutputFormat::Kind::text && (request.tool_choice == "required" || request.tool_choice.is_object())) {
      reject("response_format", "'response_format' cannot constrain a reply that 'tool_choice' forces to be a tool call");
    }
    if (request.tool_choice != "none") request.chat.tools = request.tools;
    request.chat.add_generation_prompt = in.boolean("add_generation_prompt").value_or(true);
    request.chat.extra_context = parse_template_kwargs(in);
    return request;
  });
}

std::expected<CompletionRequest, ApiError> parse_completion_request(std::string_view body,
                                                                    const ParseOptions& options) {
  auto root = parse_json_object(body, options.max_json_nodes);
  if (!root) return std::unexpected(root.error());
  return guarded([&] {
    const FieldReader in(*root);
    CompletionRequest request;
    request.params = parse_common(in, options);
    // Legacy completions: `logprobs: n` returns each token's log-probability and n alternatives.
    if (auto logprobs = in.integer("logprobs", 0, scheduler::kMaxTopLogprobs)) {
      request.params.logprobs = static_cast<std::int32_t>(*logprobs);
    }
    if (auto echo = in.boolean("echo"); echo && *echo) reject("echo", "echo is not supported");
    request.prompt = parse_prompt(in, options);
    return request;
  });
}

namespace {

// The fields /completion and /infill share; the prompt is each endpoint's own.
NativeCompletionRequest parse_native_fields(const FieldReader& in, const ParseOptions& options) {
  NativeCompletionRequest request;
  request.completion.params = parse_common(in, options);
  if (auto n = in.integer("n_probs", 0, scheduler::kMaxTopLogprobs)) request.n_probs = static_cast<std::int32_t>(*n);
  request.return_tokens = in.boolean("return_tokens").value_or(false);
  if (auto slot = in.integer("id_slot", -1, kInt32Max)) request.id_slot = static_cast<std::int32_t>(*slot);
  // The sampler order llama-server lets a request choose: accepted when well formed (names, or
  // their one-letter codes in a string); prefixd's chain keeps its own order.
  if (const ordered_json* samplers = in.find("samplers")) {
    const bool names = samplers->is_array() && std::ranges::all_of(*samplers, [](const ordered_json& v) { return v.is_string(); });
    if (!names && !samplers->is_string()) reject("samplers", "'samplers' must be an array of sampler names or a string");
  }
  // The generated tokens' ids come with their log-probabilities (and n_probs alternatives).
  if (request.n_probs > 0 || request.return_tokens) request.completion.params.logprobs = request.n_probs;
  if (const ordered_json* fields = in.find("response_fields")) {
    if (!fields->is_array() || !std::ranges::all_of(*fields, [](const ordered_json& f) { return f.is_string() && !f.get<std::string>().empty(); })) {
      reject("response_fields", "'response_fields' must be an array of field paths such as \"content\" or \"timings/prompt_n\"");
    }
    for (const auto& f : *fields) request.response_fields.push_back(f.get<std::string>());
  }
  return request;
}

std::string optional_text(const FieldReader& in, std::string_view name) {
  const ordered_json* value = in.find(name);
  if (!value) return {};
  if (!value->is_string()) reject(std::string(name), std::format("'{}' must be a string", name));
  return value->get<std::string>();
}

}  // namespace

std::expected<NativeCompletionRequest, ApiError> parse_native_completion_request(std::string_view body,
                                                                                 const ParseOptions& options) {
  auto root = parse_json_object(body, options.max_json_nodes);
  if (!root) return std::unexpected(root.error());
  return guarded([&] {
    const FieldReader in(*root);
    NativeCompletionRequest request = parse_native_fields(in, options);
    request.completion.prompt = parse_prompt(in, options);
    return request;
  });
}

std::expected<InfillRequest, ApiError> parse_infill_request(std::string_view body, const ParseOptions& options) {
  auto root = parse_json_object(body, options.max_json_nodes);
  if (!root) return std::unexpected(root.error());
  return guarded([&] {
    const FieldReader in(*root);
    InfillRequest request{.native = parse_native_fields(in, options)};
    request.input_prefix = optional_text(in, "input_prefix");
    request.input_suffix = optional_text(in, "input_suffix");
    // `prompt` continues the prefix at the cursor: text, or token ids; absent or empty is none.
    if (const ordered_json* prompt = in.find("prompt")) {
      if (prompt->is_string()) {
        request.prompt = prompt->get<std::string>();
      } else if (prompt->is_array() && !prompt->empty() && prompt->front().is_number()) {
        request.prompt = parse_token_ids(*prompt, options);
      } else if (!(prompt->is_array() && prompt->empty())) {
        reject("prompt", "'prompt' must be a string or an array of token ids");
      }
    }
    if (const ordered_json* extra = in.find("input_extra")) {
      if (!extra->is_array()) reject("input_extra", "'input_extra' must be an array of {\"filename\": string, \"text\": string}");
      for (std::size_t i = 0; i < extra->size(); ++i) {
        const std::string param = std::format("input_extra[{}]", i);
        const ordered_json& chunk = (*extra)[i];
        if (!chunk.is_object()) reject(param, std::format("'{}' must be an object with a 'text' string", param));
        const FieldReader fields(chunk);
        const ordered_json* text = fields.find("text");
        if (!text || !text->is_string()) reject(param + ".text", std::format("'{}.text' must be a string", param));
        const ordered_json* filename = fields.find("filename");
        if (filename && !filename->is_string()) reject(param + ".filename", std::format("'{}.filename' must be a string", param));
        request.input_extra.push_back({.filename = filename ? filename->get<std::string>() : std::string("tmp"),
                                       .text = text->get<std::string>()});
      }
    }
    return request;
  });
}

}  // namespace prefixd::api
