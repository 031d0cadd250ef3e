// prefixd api — renders a conversation into prompt text with the model's Jinja chat template.
//
// Wraps minja (the Jinja subset llama.cpp uses) behind a small value type so that minja's headers,
// which declare a global `json` alias, stay inside chat_template.cpp.
#pragma once

#include <expected>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace prefixd::api {

// Every value keeps its object keys in the order the client sent them: a template that prints a
// tool, a schema or call arguments with `tojson` writes the keys in that order (as Hugging Face's
// tojson, a Python dict dump, does), and the prompt's tokens follow it. A sorted copy anywhere on
// the way would render other tokens than llama-server and transformers render for the same request.
struct ChatInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // [{role, content, ...}], validated by the parser
  nlohmann::ordered_json tools;                                       // array of tool definitions, or null
  bool add_generation_prompt = true;                                  // end with the assistant's turn opener
  nlohmann::ordered_json extra_context;                               // chat_template_kwargs: object or null
};

// Immutable after creation; render() is safe to call from many threads at once.
class ChatTemplate {
 public:
  // Parses `source`. `bos_token` / `eos_token` are the texts {{ bos_token }} / {{ eos_token }}
  // render to. Returns the parser's reason when the source is not a valid template.
  static std::expected<ChatTemplate, std::string> create(std::string source, std::string bos_token = {},
                                                         std::string eos_token = {});

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

  // The prompt text, or the template's reason for refusing the input (raise_exception, a missing
  // field, a type error...).
  std::expected<std::string, std::string> render(const ChatInput& input) const;

  const std::string& source() const;

 private:
  struct Impl;
  explicit ChatTemplate(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A ChatML template (<|im_start|>role\n...<|im_end|>), with tools listed in the system turn.
// Used when the model file carries no tokenizer.chat_template.
std::string_view chatml_template_source();

}  // namespace prefixd::api
