// GCC 16 with -fsanitize=address at -O2 reports a false -Wmaybe-uninitialized inside libstdc++'s
// <regex> (which minja instantiates). Middle-end warnings are attributed to the instantiating
// file, so the system-header exemption does not cover them; they are silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "api/prompt/chat_template.h"

#include <exception>
#include <utility>

#include <minja/chat-template.hpp>

namespace prefixd::api {

struct ChatTemplate::Impl {
  minja::chat_template tmpl;
};

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

std::expected<ChatTemplate, std::string> ChatTemplate::create(std::string source, std::string bos_token,
                                                              std::string eos_token) {
  try {
    // minja probes the template's capabilities (system role, tools, typed content) here by
    // rendering sample conversations, so creation is done once per server, not per request.
    return ChatTemplate(std::make_unique<Impl>(Impl{minja::chat_template(source, bos_token, eos_token)}));
  } catch (const std::exception& e) {
    return std::unexpected(std::string(e.what()));
  }
}

std::expected<std::string, std::string> ChatTemplate::render(const ChatInput& input) const {
  try {
    // minja holds objects in insertion order (minja::Value over nlohmann::ordered_map) and its
    // tojson writes them in that order, so the keys reach the prompt as the client sent them.
    minja::chat_template_inputs inputs;
    inputs.messages = input.messages;
    if (input.tools.is_array() && !input.tools.empty()) inputs.tools = input.tools;
    inputs.add_generation_prompt = input.add_generation_prompt;
    if (input.extra_context.is_object()) inputs.extra_context = input.extra_context;
    return impl_->tmpl.apply(inputs);
  } catch (const std::exception& e) {
    return std::unexpected(std::string(e.what()));
  }
}

const std::string& ChatTemplate::source() const { return impl_->tmpl.source(); }

std::string_view chatml_template_source() {
  // Tools go into the system turn as one JSON object per line (the Hermes / Qwen 2.5 convention),
  // so that a model without its own template still sees them; assistant tool calls are rendered
  // back as <tool_call> blocks and tool results as a "tool" turn.
  static constexpr std::string_view source = R"TMPL(
{%- if tools -%}
<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif -%}
# Tools

You may call one or more functions to assist with the user query.

<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor -%}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags.<|im_end|>
{% endif -%}
{%- for message in messages -%}
{%- if not (tools and loop.first and message.role == 'system') -%}
<|im_start|>{{ message.role }}
{% if message.content is string %}{{ message.content }}{% endif -%}
{%- if message.tool_calls -%}
{%- for call in message.tool_calls %}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments if call.function.arguments is string else call.function.arguments | tojson }}}
</tool_call>
{%- endfor -%}
{%- endif -%}
<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}
)TMPL";
  return source;
}

}  // namespace prefixd::api
