// Chat template rendering through minja: the built-in ChatML fallback and the error paths.
#include <gtest/gtest.h>

#include <string>

#include "api/prompt/chat_template.h"

namespace prefixd::api {
namespace {

using nlohmann::json;

ChatTemplate chatml() {
  auto tmpl = ChatTemplate::create(std::string(chatml_template_source()));
  EXPECT_TRUE(tmpl.has_value()) << (tmpl ? "" : tmpl.error());
  return std::move(*tmpl);
}

std::string render_ok(const ChatTemplate& tmpl, const ChatInput& input) {
  auto text = tmpl.render(input);
  EXPECT_TRUE(text.has_value()) << (text ? "" : text.error());
  return text.value_or("");
}

TEST(ApiChatTemplate, ChatMlRendersEveryRoleInOrder) {
  ChatInput input;
  input.messages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                                {{"role", "user"}, {"content", "Hi"}},
                                {{"role", "assistant"}, {"content", "Hello!"}},
                                {{"role", "user"}, {"content", "Bye"}}});
  input.add_generation_prompt = false;
  EXPECT_EQ(render_ok(chatml(), input),
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n");
}

TEST(ApiChatTemplate, GenerationPromptOpensTheAssistantTurn) {
  ChatInput input;
  input.messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  input.add_generation_prompt = true;
  EXPECT_EQ(render_ok(chatml(), input), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  input.add_generation_prompt = false;
  EXPECT_EQ(render_ok(chatml(), input), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ApiChatTemplate, ChatMlListsToolsInTheSystemTurn) {
  ChatInput input;
  input.messages = json::array({{{"role", "system"}, {"content", "You help."}}, {{"role", "user"}, {"content", "Weather?"}}});
  input.tools = json::array({{{"type", "function"},
                              {"function", {{"name", "get_weather"}, {"description", "Weather by city"}}}}});
  const std::string text = render_ok(chatml(), input);
  EXPECT_TRUE(text.starts_with("<|im_start|>system\nYou help.\n\n# Tools")) << text;
  EXPECT_NE(text.find("\"name\": \"get_weather\""), std::string::npos) << text;
  // The system message is folded into the tools turn, not repeated.
  EXPECT_EQ(text.find("You help."), text.rfind("You help.")) << text;
  EXPECT_TRUE(text.ends_with("<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n")) << text;
}

TEST(ApiChatTemplate, ChatMlRendersAssistantToolCalls) {
  ChatInput input;
  input.messages = json::array(
      {{{"role", "user"}, {"content", "Weather in Paris?"}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls", json::array({{{"id", "call_1"},
                                      {"type", "function"},
                                      {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}})}},
       {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}}});
  input.tools = json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}}}}});
  const std::string text = render_ok(chatml(), input);
  EXPECT_NE(text.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("<|im_start|>tool\nsunny<|im_end|>"), std::string::npos) << text;
}

TEST(ApiChatTemplate, KwargsReachTheTemplate) {
  auto tmpl = ChatTemplate::create(
      "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}"
      "{% if enable_thinking %}<think>{% else %}<no_think>{% endif %}");
  ASSERT_TRUE(tmpl.has_value()) << tmpl.error();
  ChatInput input;
  input.messages = json::array({{{"role", "user"}, {"content", "x"}}});
  input.extra_context = {{"enable_thinking", true}};
  EXPECT_EQ(render_ok(*tmpl, input), "user:x;<think>");
  input.extra_context = {{"enable_thinking", false}};
  EXPECT_EQ(render_ok(*tmpl, input), "user:x;<no_think>");
  input.extra_context = nullptr;
  EXPECT_EQ(render_ok(*tmpl, input), "user:x;<no_think>");
}

TEST(ApiChatTemplate, EosTokenIsAvailableToTheTemplate) {
  auto tmpl = ChatTemplate::create("{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}", "", "</s>");
  ASSERT_TRUE(tmpl.has_value()) << tmpl.error();
  ChatInput input;
  input.messages = json::array({{{"role", "user"}, {"content", "a"}}, {{"role", "assistant"}, {"content", "b"}}});
  EXPECT_EQ(render_ok(*tmpl, input), "a</s>b</s>");
}

TEST(ApiChatTemplate, UnparsableTemplateIsRejectedWithTheReason) {
  auto tmpl = ChatTemplate::create("{% for m in messages %}{{ m.content }}");
  ASSERT_FALSE(tmpl.has_value());
  EXPECT_FALSE(tmpl.error().empty());
}

TEST(ApiChatTemplate, RaisedTemplateErrorCarriesTheReason) {
  auto tmpl = ChatTemplate::create(
      "{% if messages[0].role == 'assistant' %}{{ raise_exception('Conversations must start with the user') }}"
      "{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}");
  ASSERT_TRUE(tmpl.has_value()) << tmpl.error();
  ChatInput input;
  input.messages = json::array({{{"role", "assistant"}, {"content", "a"}}, {{"role", "user"}, {"content", "u"}}});
  auto refused = tmpl->render(input);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().find("Conversations must start with the user"), std::string::npos) << refused.error();
}

}  // namespace
}  // namespace prefixd::api
