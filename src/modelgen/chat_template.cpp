// ChatML chat template, in the spirit of Qwen2.5's but written for prefixd.
//
// Shape of the rendered prompt:
//   <|im_start|>system\n{system text}\n\n# Tools ... <tools>{one JSON per line}</tools> ...<|im_end|>\n
//   <|im_start|>user\n{text}<|im_end|>\n
//   <|im_start|>assistant\n{text}\n<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call><|im_end|>\n
//   <|im_start|>user\n<tool_response>\n{result}\n</tool_response><|im_end|>\n   (consecutive tool
//                                                                              messages share a turn)
//   <|im_start|>assistant\n                                                    (add_generation_prompt)
// Only plain Jinja is used (if/for/set, tests `defined`/`string`, filter `tojson`, loop.*), so any
// reasonable Jinja engine renders it.
#include "modelgen/vocab.h"

namespace prefixd::modelgen {

std::string_view chat_template() {
  return R"tmpl({%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages and messages[0].role == 'system' %}
{{- messages[0].content + '\n\n' }}
{%- endif %}
{{- '# Tools\n\nYou may call the functions described below. Their signatures are listed inside <tools></tools> tags:\n<tools>' }}
{%- for tool in tools %}
{{- '\n' }}{{- tool | tojson }}
{%- endfor %}
{{- '\n</tools>\n\nTo call a function, reply with one JSON object per call, each inside <tool_call></tool_call> tags:\n<tool_call>\n{"name": <function-name>, "arguments": <arguments-json-object>}\n</tool_call><|im_end|>\n' }}
{%- elif messages and messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'system' %}
{%- if not loop.first %}
{{- '<|im_start|>system\n' + message.content + '<|im_end|>\n' }}
{%- endif %}
{%- elif message.role == 'user' %}
{{- '<|im_start|>user\n' + message.content + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if message.content %}
{{- '\n' + message.content }}
{%- endif %}
{%- if message.tool_calls %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}
{%- set call = tool_call.function %}
{%- else %}
{%- set call = tool_call %}
{%- endif %}
{{- '\n<tool_call>\n{"name": "' + call.name + '", "arguments": ' }}
{%- if call.arguments is string %}
{{- call.arguments }}
{%- else %}
{{- call.arguments | tojson }}
{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
{{- '<|im_start|>user' }}
{%- endif %}
{{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
{{- '<|im_end|>\n' }}
{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- endif %}
)tmpl";
}

// Shape of a rerank prompt (one per query and document; llama-server fills in the placeholders):
//   <|im_start|>system\n{instruction}<|im_end|>\n
//   <|im_start|>user\nQuery: {query}\nDocument: {document}<|im_end|>\n
//   <|im_start|>assistant\n
// The reranker scores the token that comes next: its classifier holds the head's rows for the
// answers "yes" and "no".
std::string_view rerank_template() {
  return "<|im_start|>system\nYou check search results. Say whether the document answers the query: reply "
         "\"yes\" or \"no\" and nothing else.<|im_end|>\n"
         "<|im_start|>user\nQuery: {query}\nDocument: {document}<|im_end|>\n"
         "<|im_start|>assistant\n";
}

}  // namespace prefixd::modelgen
