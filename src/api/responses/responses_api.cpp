#include "api/responses/responses_api.h"

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

// An input_image part's image: {"type": "input_image", "image_url": "data:image/...;base64,..."}.
void read_input_image(const ordered_json& part, const std::string& at, std::vector<ImageInput>& images,
                      const ImageLimits& limits) {
  require_projector(at, limits);
  if (part.contains("file_id")) reject(at + ".file_id", std::format("'{}.file_id': this server stores no files; send the image inline as 'image_url' (a data: URL)", at));
  const auto url = part.find("image_url");
  if (url == part.end() || !url->is_string()) reject(at + ".image_url", std::format("'{}.image_url' must be a string (a data: URL)", at));
  add_image(images, image_bytes_from_url(url->get_ref<const std::string&>(), at + ".image_url", limits), at, limits);
}

// A message item's content: a string, or parts: text (input_text from a client, output_text from
// an earlier reply) joined by "\n", and images and audio clips, each kImageMarker in the text with
// nothing between it and its neighbours (as chat content is flattened), its bytes appended to
// `images`.
std::string message_text(const ordered_json& content, const std::string& param, std::vector<ImageInput>& images,
                         const ImageLimits& limits) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) reject(param, std::format("'{}' must be a string or an array of content parts", param));
  std::string text;
  bool after_text = false;  // as chat's: "\n" between text parts only
  for (std::size_t j = 0; j < content.size(); ++j) {
    const ordered_json& part = content[j];
    const std::string at = std::format("{}[{}]", param, j);
    const std::string type = part.is_object() ? part.value("type", "") : "";
    if (type == "input_image" || type == "input_audio") {
      if (type == "input_image") {
        read_input_image(part, at, images, limits);
      } else {
        add_audio_part(part, at, images, limits);
      }
      text += kImageMarker;
      after_text = false;
      continue;
    }
    if (type != "input_text" && type != "output_text" && type != "text") {
      reject(at + ".type", std::format("content parts of type '{}' are not supported (input_text, input_image and input_audio)", type));
    }
    const auto part_text = part.find("text");
    if (part_text == part.end() || !part_text->is_string()) reject(at + ".text", std::format("'{}.text' must be a string", at));
    if (after_text) text += '\n';
    text += part_text->get<std::string>();
    after_text = true;
  }
  return text;
}

std::string required_string(const ordered_json& item, const char* field, const std::string& param) {
  const auto value = item.find(field);
  if (value == item.end() || !value->is_string() || value->get_ref<const std::string&>().empty()) {
    reject(param + "." + field, std::format("'{}.{}' must be a non-empty string", param, field));
  }
  return value->get<std::string>();
}

// Appends the input items to `messages` in the shape chat templates read.
void add_input(ordered_json& messages, const ordered_json& input, std::vector<ImageInput>& images, const ImageLimits& limits) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    return;
  }
  if (!input.is_array()) reject("input", "'input' must be a string or an array of items");
  for (std::size_t i = 0; i < input.size(); ++i) {
    const ordered_json& item = input[i];
    const std::string param = std::format("input[{}]", i);
    if (!item.is_object()) reject(param, std::format("'{}' must be an object", param));
    const std::string type = item.value("type", item.contains("role") ? "message" : "");
    if (type == "message") {
      std::string role = item.value("role", "");
      if (role == "developer") role = "system";
      if (role != "system" && role != "user" && role != "assistant") {
        reject(param + ".role", std::format("'{}.role' must be system, developer, user or assistant", param));
      }
      const auto content = item.find("content");
      if (content == item.end()) reject(param + ".content", std::format("'{}.content' is required", param));
      messages.push_back({{"role", role}, {"content", message_text(*content, param + ".content", images, limits)}});
    } else if (type == "function_call") {
      ordered_json call = {{"id", required_string(item, "call_id", param)},
                   {"type", "function"},
                   {"function", {{"name", required_string(item, "name", param)}, {"arguments", required_string(item, "arguments", param)}}}};
      // Calls made in one turn belong to one assistant message, with the text said before them.
      if (!messages.empty() && messages.back()["role"] == "assistant") {
        ordered_json& last = messages.back();
        if (!last.contains("tool_calls")) last["tool_calls"] = ordered_json::array();
        last["tool_calls"].push_back(std::move(call));
      } else {
        messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", ordered_json::array({std::move(call)})}});
      }
    } else if (type == "function_call_output") {
      const auto output = item.find("output");
      if (output == item.end() || !output->is_string()) reject(param + ".output", std::format("'{}.output' must be a string", param));
      messages.push_back({{"role", "tool"}, {"tool_call_id", required_string(item, "call_id", param)}, {"content", output->get<std::string>()}});
    } else if (type == "reasoning") {
      // A reasoning summary from an earlier reply: nothing a chat template renders.
    } else {
      reject(param + ".type", std::format("input items of type '{}' are not supported", type));
    }
  }
}

// Function tools, flat as the Responses API declares them, as chat tools.
ordered_json parse_tools(const ordered_json& root, ordered_json& echoed) {
  const auto tools = root.find("tools");
  if (tools == root.end() || tools->is_null()) return nullptr;
  if (!tools->is_array()) reject("tools", "'tools' must be an array");
  echoed = *tools;
  FunctionTools functions;
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const ordered_json& tool = (*tools)[i];
    const std::string at = std::format("tools[{}]", i);
    if (!tool.is_object()) reject(at, std::format("'{}' must be an object", at));
    const auto type = tool.find("type");
    if (type == tool.end() || *type != "function") {
      reject(at + ".type", std::format("tools of type {} are not supported: only function tools",
                                       type == tool.end() ? "(none)" : type->dump()));
    }
    // The Responses API flattens the function into the tool; Chat Completions nests it. Every
    // key but the envelope's `type` is the function's (name, description, parameters, strict...).
    ordered_json function = tool;
    function.erase("type");
    functions.add(std::move(function), at + ".name", at + ".parameters");
  }
  return functions.tools();
}

ordered_json parse_tool_choice(const ordered_json& root, const ordered_json& tools) {
  const bool has_tools = tools.is_array() && !tools.empty();
  const auto choice = root.find("tool_choice");
  if (choice == root.end() || choice->is_null()) return has_tools ? "auto" : "none";
  if (choice->is_string()) {
    if (*choice != "none" && *choice != "auto" && *choice != "required") {
      reject("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": ...}");
    }
    if (*choice != "none" && !has_tools) reject("tool_choice", "'tool_choice' needs 'tools'");
    return choice->get<std::string>();
  }
  if (!choice->is_object() || choice->value("type", "") != "function" || !choice->contains("name") || !(*choice)["name"].is_string()) {
    reject("tool_choice", "'tool_choice' as an object is {\"type\": \"function\", \"name\": ...}");
  }
  const std::string name = (*choice)["name"].get<std::string>();
  const bool defined = has_tools && std::ranges::any_of(tools, [&](const ordered_json& tool) { return tool["function"]["name"] == name; });
  if (!defined) reject("tool_choice.name", std::format("'tool_choice' names '{}', which 'tools' does not define", name));
  return ordered_json{{"type", "function"}, {"function", {{"name", name}}}};
}

OutputFormat parse_text_format(const ordered_json& root, ordered_json& echoed) {
  OutputFormat out;
  const auto text = root.find("text");
  if (text == root.end() || text->is_null()) return out;
  if (!text->is_object()) reject("text", "'text' must be an object");
  const auto format = text->find("format");
  if (format == text->end() || format->is_null()) return out;
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string()) {
    reject("text.format", "'text.format' must be an object with a string 'type'");
  }
  echoed = *format;
  const std::string type = (*format)["type"].get<std::string>();
  if (type == "text") return out;
  if (type == "json_object") {
    out.kind = OutputFormat::Kind::json_object;
    return out;
  }
  if (type != "json_schema") reject("text.format.type", "'text.format.type' must be 'text', 'json_object' or 'json_schema'");
  const auto schema = format->find("schema");
  if (schema == format->end() || !(schema->is_object() || schema->is_boolean())) {
    reject("text.format.schema", "'text.format.schema' must be a JSON Schema object");
  }
  out.kind = OutputFormat::Kind::json_schema;
  out.schema = *schema;
  return out;
}

CommonParams parse_params(const FieldReader& in, const ParseOptions& options) {
  CommonParams params;
  fields::check_served_model(in, options.model_names, /*required=*/false);
  if (auto n = in.integer("max_output_tokens", 1, kInt32Max)) params.max_tokens = static_cast<std::int32_t>(*n);
  params.sampling.seed = options.default_seed;
  fields::read_temperature(in, params.sampling, 2.0);
  if (auto p = in.number("top_p", 0.0, 1.0, /*lo_open=*/true)) params.sampling.top_p = static_cast<float>(*p);
  fields::read_streaming(in, params);
  params.cache = fields::read_cache_fields(in, options.cache_prompt_default, in.string("user"));
  params.speculative = fields::read_speculative(in);
  if (in.boolean("background").value_or(false)) reject("background", "background responses are not supported");
  return params;
}

ordered_json usage_object(const scheduler::Usage& usage) {
  return {{"input_tokens", usage.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", usage.cached_tokens}}},
          {"output_tokens", usage.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

ordered_json response_skeleton(const ResponseMeta& meta, const ResponsesRequest& request, const char* status) {
  const CommonParams& params = request.chat.params;
  return {{"id", meta.id},
          {"object", "response"},
          {"created_at", meta.created},
          {"status", status},
          {"error", nullptr},
          {"incomplete_details", nullptr},
          {"instructions", request.instructions ? ordered_json(*request.instructions) : ordered_json(nullptr)},
          {"max_output_tokens", params.max_tokens > 0 ? ordered_json(params.max_tokens) : ordered_json(nullptr)},
          {"model", meta.model},
          {"output", ordered_json::array()},
          {"parallel_tool_calls", request.chat.parallel_tool_calls},
          {"previous_response_id", request.previous_response_id ? ordered_json(*request.previous_response_id) : ordered_json(nullptr)},
          {"store", request.store},
          {"temperature", params.sampling.temperature},
          {"text", {{"format", request.text_format}}},
          {"tool_choice", request.tool_choice},
          {"tools", request.tools},
          {"top_p", params.sampling.top_p},
          {"metadata", request.metadata},
          {"usage", nullptr}};
}

}  // namespace

std::expected<ResponsesRequest, ApiError> parse_responses_request(std::string_view body, const ParseOptions& options) {
  // Schemas, tools and call arguments keep the key order they were sent in (parse_json_object
  // keeps it).
  auto root = parse_json_object(body, options.max_json_nodes);
  if (!root) return std::unexpected(root.error());
  const ordered_json& sent = *root;
  return guarded([&] {
    const FieldReader in(*root);
    ResponsesRequest out;
    ChatRequest& request = out.chat;
    request.params = parse_params(in, options);
    out.instructions = in.string("instructions");
    out.previous_response_id = in.string("previous_response_id");
    out.store = in.boolean("store").value_or(true);
    if (const auto metadata = sent.find("metadata"); metadata != sent.end() && !metadata->is_null()) {
      if (!metadata->is_object()) reject("metadata", "'metadata' must be an object");
      out.metadata = *metadata;
    }
    ordered_json messages = ordered_json::array();
    const auto input = sent.find("input");
    if (input == sent.end() || input->is_null()) reject("input", "'input' is required");
    add_input(messages, *input, request.images, options.images);
    if (messages.empty()) reject("input", "'input' must hold at least one item");
    request.chat.messages = std::move(messages);
    request.tools = parse_tools(sent, out.tools);
    request.tool_choice = parse_tool_choice(sent, request.tools);
    out.tool_choice = sent.contains("tool_choice") && !sent["tool_choice"].is_null() ? sent["tool_choice"]
                                                                                        : ordered_json(request.tool_choice);
    request.parallel_tool_calls = in.boolean("parallel_tool_calls").value_or(true);
    request.response_format = parse_text_format(sent, out.text_format);
    const bool forced = request.tool_choice == "required" || request.tool_choice.is_object();
    if (request.response_format.kind != OutputFormat::Kind::text && forced) {
      reject("text.format", "'text.format' cannot constrain a reply that 'tool_choice' forces to be a function call");
    }
    if (request.tool_choice != "none") request.chat.tools = request.tools;
    return out;
  });
}

ordered_json conversation_of(const ResponsesRequest& request, const ordered_json& history) {
  ordered_json messages = ordered_json::array();
  if (request.instructions) messages.push_back({{"role", "system"}, {"content", *request.instructions}});
  for (const ordered_json& m : history) messages.push_back(m);
  for (const ordered_json& m : request.chat.chat.messages) messages.push_back(m);
  return messages;
}

ordered_json reply_message(const ParsedAssistant& reply) {
  ordered_json message = {{"role", "assistant"}, {"content", reply.content.empty() && !reply.tool_calls.empty() ? ordered_json(nullptr) : ordered_json(reply.content)}};
  if (!reply.tool_calls.empty()) message["tool_calls"] = ordered_json::parse(dump_json(tool_calls_json(reply.tool_calls)));
  // Templates that reason render it where they keep it (often only within the current tool loop).
  if (!reply.reasoning.empty()) message["reasoning_content"] = reply.reasoning;
  return message;
}

ordered_json response_output(const std::string& response_id, const ParsedAssistant& reply) {
  // resp_X -> msg_X, fc_X_0...: stable ids a client can refer to.
  const std::string suffix = response_id.substr(response_id.find('_') + 1);
  ordered_json output = ordered_json::array();
  if (!reply.reasoning.empty()) {
    output.push_back({{"type", "reasoning"},
                      {"id", "rs_" + suffix},
                      {"summary", ordered_json::array()},
                      {"content", ordered_json::array({{{"type", "reasoning_text"}, {"text", reply.reasoning}}})},
                      {"status", "completed"}});
  }
  if (!reply.content.empty() || reply.tool_calls.empty()) {
    output.push_back({{"type", "message"},
                      {"id", "msg_" + suffix},
                      {"status", "completed"},
                      {"role", "assistant"},
                      {"content", ordered_json::array({{{"type", "output_text"}, {"text", reply.content}, {"annotations", ordered_json::array()}}})}});
  }
  for (std::size_t i = 0; i < reply.tool_calls.size(); ++i) {
    const ToolCall& call = reply.tool_calls[i];
    output.push_back({{"type", "function_call"},
                      {"id", std::format("fc_{}_{}", suffix, i)},
                      {"call_id", call.id},
                      {"name", call.name},
                      {"arguments", call.arguments},
                      {"status", "completed"}});
  }
  return output;
}

const char* response_status(const scheduler::StreamEvent& done) {
  return done.finish == scheduler::FinishReason::length ? "incomplete" : "completed";
}

ordered_json response_object(const ResponseMeta& meta, const ResponsesRequest& request, ordered_json output,
                             const scheduler::StreamEvent& done) {
  ordered_json body = response_skeleton(meta, request, response_status(done));
  if (done.finish == scheduler::FinishReason::length) body["incomplete_details"] = {{"reason", "max_output_tokens"}};
  body["output"] = std::move(output);
  body["usage"] = usage_object(done.usage);
  body["prompt_cache"] = prompt_cache_json(done.cache);
  body["timings"] = timings_json(done);
  return body;
}

ordered_json response_in_progress(const ResponseMeta& meta, const ResponsesRequest& request) {
  return response_skeleton(meta, request, "in_progress");
}

}  // namespace prefixd::api
