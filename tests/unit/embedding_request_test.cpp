// The embedding and rerank bodies (embedding_request.h) and what happens to a vector on its way out
// (embedding_vectors.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "api/embeddings/embedding_request.h"
#include "api/embeddings/embedding_vectors.h"
#include "api/images/image_input.h"

namespace prefixd::api {
namespace {

ParseOptions options() {
  ParseOptions o;
  o.model_names = {"m"};
  o.vocab_size = 100;
  return o;
}

std::expected<EmbeddingsRequest, ApiError> embeddings(const std::string& body,
                                                      EmbeddingsEndpoint endpoint = EmbeddingsEndpoint::openai) {
  return parse_embeddings_request(body, options(), endpoint, 2);
}

TEST(EmbeddingsRequest, TakesEveryInputShape) {
  auto one = embeddings(R"({"input": "hello"})");
  ASSERT_TRUE(one);
  ASSERT_EQ(one->inputs.size(), 1u);
  EXPECT_EQ(std::get<std::string>(one->inputs[0]), "hello");
  auto ids = embeddings(R"({"input": [1, 2, 3]})");
  ASSERT_TRUE(ids);
  ASSERT_EQ(ids->inputs.size(), 1u);
  EXPECT_EQ(std::get<TokenPrompt>(ids->inputs[0]), (TokenPrompt{1, 2, 3}));
  auto mixed = embeddings(R"({"input": ["a", [4, 5], "b"], "encoding_format": "base64", "embd_normalize": -1})");
  ASSERT_TRUE(mixed);
  ASSERT_EQ(mixed->inputs.size(), 3u);
  EXPECT_EQ(std::get<TokenPrompt>(mixed->inputs[1]), (TokenPrompt{4, 5}));
  EXPECT_TRUE(mixed->base64);
  EXPECT_EQ(mixed->normalize, -1);
  auto content = embeddings(R"({"content": "x"})", EmbeddingsEndpoint::native);
  ASSERT_TRUE(content);
  EXPECT_EQ(content->param, "content");
  EXPECT_EQ(content->normalize, 2);
}

TEST(EmbeddingsRequest, RefusesEachBadFieldByName) {
  const auto param_of = [](const std::string& body, EmbeddingsEndpoint endpoint = EmbeddingsEndpoint::openai) {
    auto parsed = embeddings(body, endpoint);
    EXPECT_FALSE(parsed) << body;
    return parsed ? std::string("(accepted)") : parsed.error().param;
  };
  EXPECT_EQ(param_of(R"({})"), "input");
  EXPECT_EQ(param_of(R"({"content": "x"})"), "input");  // OpenAI's endpoint reads only `input`
  EXPECT_EQ(param_of(R"({"input": []})"), "input");
  EXPECT_EQ(param_of(R"({"input": {"a": 1}})"), "input");
  EXPECT_EQ(param_of(R"({"input": ["a", true]})"), "input[1]");
  EXPECT_EQ(param_of(R"({"input": ["a", []]})"), "input[1]");
  EXPECT_EQ(param_of(R"({"input": [1, 100]})"), "input[1]");
  EXPECT_EQ(param_of(R"({"input": [["a"]]})"), "input[0][0]");
  EXPECT_EQ(param_of(R"({"input": "a", "encoding_format": "int8"})"), "encoding_format");
  EXPECT_EQ(param_of(R"({"input": "a", "dimensions": 0})"), "dimensions");
  EXPECT_EQ(param_of(R"({"input": "a", "embd_normalize": -2})"), "embd_normalize");
  EXPECT_EQ(param_of(R"({"input": "a", "cache_prompt": "yes"})"), "cache_prompt");
  auto unknown = embeddings(R"({"input": "a", "model": "other"})");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().status, 404);
  std::string many = R"({"input": [)";
  for (std::size_t i = 0; i <= kMaxEmbeddingInputs; ++i) many += std::string(i ? "," : "") + "\"x\"";
  EXPECT_EQ(param_of(many + "]}"), "input");
}

TEST(RerankRequest, ReadsJinaCohereAndTeiShapes) {
  auto jina = parse_rerank_request(R"({"query": "q", "documents": ["a", {"text": "b"}], "top_n": 1,
                                       "return_documents": true, "sort": false})", options());
  ASSERT_TRUE(jina);
  EXPECT_EQ(jina->query, "q");
  EXPECT_EQ(jina->documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(jina->top_n, 1u);
  EXPECT_TRUE(jina->return_documents);
  EXPECT_FALSE(jina->sort);
  EXPECT_FALSE(jina->tei);
  auto tei = parse_rerank_request(R"({"query": "q", "texts": ["a"], "return_text": true})", options());
  ASSERT_TRUE(tei);
  EXPECT_TRUE(tei->tei);
  EXPECT_TRUE(tei->return_documents);
  const auto param_of = [](const std::string& body) {
    auto parsed = parse_rerank_request(body, options());
    EXPECT_FALSE(parsed) << body;
    return parsed ? std::string("(accepted)") : parsed.error().param;
  };
  EXPECT_EQ(param_of(R"({"documents": ["a"]})"), "query");
  EXPECT_EQ(param_of(R"({"query": ["q"], "documents": ["a"]})"), "query");
  EXPECT_EQ(param_of(R"({"query": "q"})"), "documents");
  EXPECT_EQ(param_of(R"({"query": "q", "documents": []})"), "documents");
  EXPECT_EQ(param_of(R"({"query": "q", "texts": "a"})"), "texts");
  EXPECT_EQ(param_of(R"({"query": "q", "documents": ["a", {"txt": "b"}]})"), "documents[1]");
  EXPECT_EQ(param_of(R"({"query": "q", "documents": ["a"], "top_n": 0})"), "top_n");
  EXPECT_EQ(param_of(R"({"query": "q", "documents": ["a"], "top_n": 1.5})"), "top_n");
  EXPECT_EQ(param_of(R"({"query": "q", "documents": ["a"], "return_documents": 1})"), "return_documents");
}

TEST(EmbeddingVectors, NormalizeAsLlamaCppDoes) {
  const std::vector<float> v{3, -4};
  EXPECT_EQ(normalized(v, -1), v);
  const std::vector<float> euclid = normalized(v, 2);
  EXPECT_FLOAT_EQ(euclid[0], 0.6f);
  EXPECT_FLOAT_EQ(euclid[1], -0.8f);
  const std::vector<float> taxicab = normalized(v, 1);
  EXPECT_FLOAT_EQ(taxicab[0], 3.0f / 7);
  const std::vector<float> int16 = normalized(v, 0);
  EXPECT_FLOAT_EQ(int16[1], -32760.0f);
  EXPECT_FLOAT_EQ(int16[0], 3 * 32760.0f / 4);
  const std::vector<float> cube = normalized(v, 3);
  EXPECT_FLOAT_EQ(cube[0], static_cast<float>(3 / std::cbrt(27.0 + 64.0)));
  EXPECT_EQ(normalized(std::vector<float>{0, 0}, 2), (std::vector<float>{0, 0}));
}

TEST(EmbeddingVectors, Base64CarriesTheFloatBytes) {
  const std::vector<float> v{1.5f, -2.25f, 1e-7f};
  const std::string bytes = decode_base64(base64_floats(v)).value();
  ASSERT_EQ(bytes.size(), v.size() * sizeof(float));
  std::vector<float> back(v.size());
  std::memcpy(back.data(), bytes.data(), bytes.size());
  EXPECT_EQ(back, v);
}

}  // namespace
}  // namespace prefixd::api
