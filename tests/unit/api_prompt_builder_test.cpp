// From a parsed request to the scheduler's GenerationRequest: the prompt tokens, the prompt-length
// limit, template refusals, and the cache options (namespace, session, bypass).
#include <gtest/gtest.h>

#include <string>

#include "api/prompt/cache_namespace.h"
#include "api/prompt/prompt_builder.h"
#include "support/fake_engine.h"

namespace prefixd::api {
namespace {

using nlohmann::json;

// The fake vocabulary has one token per byte, so token counts are text lengths.
class ApiPromptBuilder : public ::testing::Test {
 protected:
  PromptBuilder builder(std::string template_source = std::string(chatml_template_source()),
                        std::string model_key = "model-key", std::string runtime_signature = "type_k=f16;") {
    auto tmpl = ChatTemplate::create(std::move(template_source));
    EXPECT_TRUE(tmpl.has_value());
    return PromptBuilder(engine_.vocab(), std::move(*tmpl), std::move(model_key), std::move(runtime_signature));
  }

  static ChatRequest chat(const json& body) {
    ParseOptions options;
    options.model_names = {"fake"};
    auto parsed = parse_chat_request(body.dump(), options);
    EXPECT_TRUE(parsed.has_value()) << (parsed ? "" : parsed.error().message);
    return parsed.value_or(ChatRequest{});
  }

  static CompletionRequest completion(const json& body) {
    ParseOptions options;
    options.model_names = {"fake"};
    auto parsed = parse_completion_request(body.dump(), options);
    EXPECT_TRUE(parsed.has_value()) << (parsed ? "" : parsed.error().message);
    return parsed.value_or(CompletionRequest{});
  }

  engine::FakeEngine engine_;
};

const json kHello = json::array({{{"role", "user"}, {"content", "Hello"}}});

TEST_F(ApiPromptBuilder, ChatPromptIsTheRenderedTemplateTokenized) {
  auto request = builder().build(chat({{"messages", kHello}, {"max_tokens", 5}, {"stop", {"x"}}}), 1000);
  ASSERT_TRUE(request.has_value()) << request.error().message;
  const std::string rendered = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(request->prompt.size(), rendered.size());
  EXPECT_EQ(request->prompt.front(), static_cast<engine::Token>('<'));
  EXPECT_EQ(request->max_tokens, 5);
  EXPECT_EQ(request->stop, std::vector<std::string>{"x"});
}

TEST_F(ApiPromptBuilder, TokenIdPromptsAreUsedAsGiven) {
  auto request = builder().build(completion({{"prompt", {7, 8, 9}}}), 1000);
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->prompt, (std::vector<engine::Token>{7, 8, 9}));
}

TEST_F(ApiPromptBuilder, PromptLongerThanTheLimitIsContextLengthExceeded) {
  auto request = builder().build(completion({{"prompt", "0123456789"}}), 9);
  ASSERT_FALSE(request.has_value());
  EXPECT_EQ(request.error().status, 400);
  EXPECT_EQ(request.error().code, "context_length_exceeded");
  EXPECT_TRUE(builder().build(completion({{"prompt", "0123456789"}}), 10).has_value());
}

TEST_F(ApiPromptBuilder, TemplateRefusalIs400WithTheReason) {
  auto b = builder("{{ raise_exception('only user turns, please') }}");
  auto request = b.build(chat({{"messages", kHello}}), 1000);
  ASSERT_FALSE(request.has_value());
  EXPECT_EQ(request.error().status, 400);
  EXPECT_EQ(request.error().code, "template_error");
  EXPECT_NE(request.error().message.find("only user turns, please"), std::string::npos) << request.error().message;
}

TEST_F(ApiPromptBuilder, EmptyRenderedPromptIsRejected) {
  auto request = builder("{% if false %}x{% endif %}").build(chat({{"messages", kHello}}), 1000);
  ASSERT_FALSE(request.has_value());
  EXPECT_EQ(request.error().status, 400);
}

TEST_F(ApiPromptBuilder, CacheOptionsFollowTheRequest) {
  auto b = builder();
  auto plain = b.build(chat({{"messages", kHello}}), 1000);
  auto keyed = b.build(chat({{"messages", kHello}, {"prompt_cache_key", "conv-1"}, {"user", "alice"}}), 1000);
  auto bypass = b.build(chat({{"messages", kHello}, {"cache_prompt", false}}), 1000);
  ASSERT_TRUE(plain && keyed && bypass);
  EXPECT_TRUE(plain->cache.enabled);
  EXPECT_EQ(plain->cache.session_key, "");
  EXPECT_EQ(keyed->cache.session_key, "conv-1");
  EXPECT_FALSE(bypass->cache.enabled);
  EXPECT_EQ(plain->cache.namespace_digest.size(), 32u);
  // The session key is a preference, not a wall: it does not change the namespace.
  EXPECT_EQ(plain->cache.namespace_digest, keyed->cache.namespace_digest);
}

// The namespace holds what changes the K/V of a token sequence: a salt does; the template, its
// kwargs, tools, tool_choice and the endpoint change the tokens (which the match compares) or
// nothing, so they never split a namespace. They are told apart as prompt inputs instead.
TEST_F(ApiPromptBuilder, NamespaceSeparatesSaltsButNotTemplateInputsOrEndpoints) {
  auto b = builder();
  const auto built = [&](const json& body) { return *b.build(chat(body), 1000); };
  const auto base = built({{"messages", kHello}});
  EXPECT_NE(built({{"messages", kHello}, {"cache_salt", "tenant-a"}}).cache.namespace_digest, base.cache.namespace_digest);
  EXPECT_NE(built({{"messages", kHello}, {"extra_body", {{"cache_salt", "tenant-a"}}}}).cache.namespace_digest,
            base.cache.namespace_digest);
  const auto kwargs = built({{"messages", kHello}, {"chat_template_kwargs", {{"enable_thinking", true}}}});
  EXPECT_EQ(kwargs.cache.namespace_digest, base.cache.namespace_digest);
  EXPECT_NE(kwargs.cache.prompt_inputs, base.cache.prompt_inputs);
  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  const auto tooled = built({{"messages", kHello}, {"tools", tools}});
  EXPECT_EQ(tooled.cache.namespace_digest, base.cache.namespace_digest);
  EXPECT_NE(tooled.cache.prompt_inputs, base.cache.prompt_inputs);
  const auto completion_request = *b.build(completion({{"prompt", "Hello"}}), 1000);
  EXPECT_EQ(completion_request.cache.namespace_digest, base.cache.namespace_digest);
  EXPECT_NE(completion_request.cache.prompt_inputs, base.cache.prompt_inputs);
  auto other = builder("{% for m in messages %}{{ m.content }}{% endfor %}");
  const auto other_template = *other.build(chat({{"messages", kHello}}), 1000);
  EXPECT_EQ(other_template.cache.namespace_digest, base.cache.namespace_digest);
  EXPECT_NE(other_template.cache.prompt_inputs, base.cache.prompt_inputs);
}

TEST_F(ApiPromptBuilder, NamespaceSeparatesModelFilesAndRuntimeSignatures) {
  const std::string chatml(chatml_template_source());
  const auto digest = [&](PromptBuilder b) { return b.build(chat({{"messages", kHello}}), 1000)->cache.namespace_digest; };
  const std::string base = digest(builder(chatml, "model-key", "type_k=f16;"));
  EXPECT_EQ(digest(builder(chatml, "model-key", "type_k=f16;")), base);
  EXPECT_NE(digest(builder(chatml, "other-model-key", "type_k=f16;")), base);
  // The same weights under other K/V settings (here the K cache type) never share K/V.
  EXPECT_NE(digest(builder(chatml, "model-key", "type_k=q8_0;")), base);
  // Raw completions too.
  const auto completion_digest = [&](PromptBuilder b) {
    return b.build(completion({{"prompt", "Hello"}}), 1000)->cache.namespace_digest;
  };
  EXPECT_NE(completion_digest(builder(chatml, "model-key", "flash_attn=enabled;")),
            completion_digest(builder(chatml, "model-key", "flash_attn=disabled;")));
}

}  // namespace
}  // namespace prefixd::api
