// `serve --models-dir` with KV events (cli/serve_models.h): each model's topic is the configured
// one with {model} replaced, or the model's name after it (llm-d's kv@POD@MODEL), or the name alone.
#include <gtest/gtest.h>

#include "cli/serve_models.h"

namespace prefixd::cli {
namespace {

TEST(ModelTopic, EachModelGetsATopicOfItsOwn) {
  EXPECT_EQ(model_topic("", "tiny"), "tiny");
  EXPECT_EQ(model_topic("kv@pod-1", "tiny"), "kv@pod-1@tiny") << "llm-d's kv@POD@MODEL";
  EXPECT_EQ(model_topic("kv@pod-1@{model}", "qwen"), "kv@pod-1@qwen");
  EXPECT_EQ(model_topic("{model}/{model}", "m"), "m/m") << "every placeholder";
  EXPECT_EQ(model_topic("{model", "m"), "{model@m") << "not a placeholder";
  EXPECT_NE(model_topic("kv@pod", "a"), model_topic("kv@pod", "b"));
}

}  // namespace
}  // namespace prefixd::cli
