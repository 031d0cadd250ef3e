#include "bench/sse.h"

#include <nlohmann/json.hpp>

namespace prefixd::bench {
namespace {

// Adds one streamed tool-call piece ({index, id?, type?, function {name?, arguments?}}) to the
// calls so far: the first piece of an index opens its call, later ones append to its arguments.
// False for a piece that is not an object.
bool merge_tool_call_delta(const nlohmann::json& piece, nlohmann::json& calls) {
  if (!piece.is_object()) return false;
  const std::size_t index = piece.value("index", calls.empty() ? 0 : calls.size() - 1);
  while (calls.size() <= index) {
    calls.push_back({{"id", ""}, {"type", "function"}, {"function", {{"name", ""}, {"arguments", ""}}}});
  }
  auto& call = calls[index];
  if (const auto id = piece.find("id"); id != piece.end() && id->is_string()) call["id"] = *id;
  if (const auto function = piece.find("function"); function != piece.end() && function->is_object()) {
    if (const auto name = function->find("name"); name != function->end() && name->is_string()) {
      call["function"]["name"] = call["function"]["name"].get<std::string>() + name->get<std::string>();
    }
    if (const auto args = function->find("arguments"); args != function->end() && args->is_string()) {
      call["function"]["arguments"] = call["function"]["arguments"].get<std::string>() + args->get<std::string>();
    }
  }
  return true;
}

}  // namespace

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> events;
  for (char c : bytes) {
    if (c != '\n') {
      line_ += c;
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {
      // A blank line ends the event.
      if (has_data_) events.push_back(std::move(data_));
      data_.clear();
      has_data_ = false;
    } else if (line_.starts_with("data:")) {
      std::string_view value = std::string_view(line_).substr(5);
      if (value.starts_with(' ')) value.remove_prefix(1);
      if (has_data_) data_ += '\n';
      data_ += value;
      has_data_ = true;
    }
    // Anything else (":" comments, event:, id:, retry:) does not matter for completions.
    line_.clear();
  }
  return events;
}

void StreamReader::feed(std::string_view bytes) {
  for (const auto& payload : parser_.feed(bytes)) handle(payload);
}

void StreamReader::handle(const std::string& payload) {
  if (payload == "[DONE]") {
    done_ = true;
    return;
  }
  const auto chunk = nlohmann::json::parse(payload, nullptr, false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    result_.error = "unparsable stream chunk: " + payload.substr(0, 200);
    return;
  }
  if (chunk.contains("error")) {
    result_.error = error_message(payload);
    return;
  }
  read_report_fields(chunk, result_);
  if (!chunk.contains("choices") && chunk.contains("stop")) {
    handle_native(chunk);
    return;
  }
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty()) return;
  const auto& choice = (*choices)[0];
  std::string piece;
  bool called = false;  // this chunk carries a piece of a tool call
  if (const auto text = choice.find("text"); text != choice.end() && text->is_string()) {
    piece = text->get<std::string>();
  } else if (const auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
    if (const auto content = delta->find("content"); content != delta->end() && content->is_string()) {
      piece = content->get<std::string>();
    }
    if (const auto calls = delta->find("tool_calls"); calls != delta->end() && calls->is_array()) {
      for (const auto& call : *calls) called = merge_tool_call_delta(call, result_.tool_calls) || called;
    }
  }
  result_.text += piece;
  const auto finish = choice.find("finish_reason");
  const bool finished = finish != choice.end() && finish->is_string();
  if (finished) result_.finish_reason = finish->get<std::string>();
  if (!first_token_seen_ && (!piece.empty() || called || finished)) {
    result_.first_piece = piece;
    // OpenAI's chat shape: choices[0].logprobs.content[0].top_logprobs, on the chunk of the token.
    const nlohmann::json::json_pointer top("/logprobs/content/0/top_logprobs");
    if (choice.contains(top)) result_.first_logprobs = choice.at(top);
  }
  if (!piece.empty() || called || finished) first_token_seen_ = true;
  if (!piece.empty() || called) ++pieces_;
}

void StreamReader::handle_native(const nlohmann::json& chunk) {
  // llama-server's native stream (/completion, /infill): {"content", "stop": false} per piece, then
  // the totals with "stop": true, and no [DONE].
  std::string piece;
  if (const auto content = chunk.find("content"); content != chunk.end() && content->is_string()) piece = *content;
  const bool stop = chunk.value("stop", false);
  result_.text += piece;
  if (stop) {
    done_ = true;
    if (const auto type = chunk.find("stop_type"); type != chunk.end() && type->is_string()) result_.finish_reason = *type;
    if (const auto n = chunk.find("tokens_predicted"); n != chunk.end() && n->is_number_integer()) result_.completion_tokens = *n;
    if (const auto n = chunk.find("tokens_evaluated"); n != chunk.end() && n->is_number_integer()) result_.prompt_tokens = *n;
  }
  if (!first_token_seen_ && (!piece.empty() || stop)) result_.first_piece = piece;
  if (!piece.empty() || stop) first_token_seen_ = true;
  if (!piece.empty()) ++pieces_;
}

}  // namespace prefixd::bench
