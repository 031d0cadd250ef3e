// Embeddings and rerank scores (--embeddings, --reranking): the vectors and scores are
// llama-server's on the same model, a last-pooling model reuses cached prefixes with the cold
// answer, inputs of one request run together and come back in order, and every bad field is a 400
// that names it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bench/server_process.h"
#include "media_requests.h"
#include "llama_server_peer.h"
#include "server_process.h"
#include "valkey_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

const std::string kModels = PREFIXD_TEST_MODELS_DIR;

const std::string kPassage =
    "The river runs past the old mill, under the stone bridge and through the meadow where the children play in "
    "summer. In winter the water freezes at the edges and the mill wheel stands still until the spring thaw.";

std::vector<float> floats(const json& array) {
  std::vector<float> out;
  for (const json& x : array) out.push_back(x.get<float>());
  return out;
}

double norm(const std::vector<float>& v) {
  double sum = 0;
  for (const float x : v) sum += static_cast<double>(x) * x;
  return std::sqrt(sum);
}

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e9;
  double most = 0;
  for (size_t i = 0; i < a.size(); ++i) most = std::max(most, std::abs(static_cast<double>(a[i]) - b[i]));
  return most;
}

std::vector<std::vector<float>> vectors_of(const JsonReply& reply) {
  std::vector<std::vector<float>> out;
  for (const json& item : reply.body["data"]) out.push_back(floats(item["embedding"]));
  return out;
}


struct EmbeddingModel {
  std::string file;
  std::string pooling;  // the model's own
  bool cached;          // a causal model pooling its last token: prefixes come from the cache
};

class Embeddings : public ::testing::TestWithParam<EmbeddingModel> {};

INSTANTIATE_TEST_SUITE_P(Models, Embeddings,
                         ::testing::Values(EmbeddingModel{"tiny-embed.gguf", "last", true},
                                           EmbeddingModel{"tiny-bert.gguf", "mean", false}),
                         [](const auto& info) { return info.param.pooling; });

// The vectors are llama-server's, input by input, and each is normalized.
TEST_P(Embeddings, VectorsAreLlamaServersOnTheSameModel) {
  if (!have_program("llama-server")) GTEST_SKIP() << "llama-server is not on PATH (run through scripts/in-env)";
  const std::string model = kModels + "/" + GetParam().file;
  const json request{{"input", json::array({"hello world", kPassage, "the cat sat on the mat"})}};
  JsonReply ours;
  {
    ServerProcess server({.model = model, .extra_args = {"--embeddings"}, .parallel = 2, .ctx_size = 2048});
    ours = post_json(*server.client(), "/v1/embeddings", request);
  }
  ASSERT_EQ(ours.status, 200) << ours.raw;
  LlamaServerPeer peer({"-m", model, "--embeddings", "-c", "2048", "-np", "2"});
  const JsonReply theirs = post_json(*peer.client, "/v1/embeddings", request);
  ASSERT_EQ(theirs.status, 200) << theirs.raw;
  const auto a = vectors_of(ours);
  const auto b = vectors_of(theirs);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].size(), 64u);
    EXPECT_NEAR(norm(a[i]), 1.0, 1e-5);
    // Which inputs share a call depends on timing on both servers, and moves the fifth digit.
    EXPECT_LT(largest_difference(a[i], b[i]), 5e-4) << "input " << i;
    EXPECT_EQ(ours.body["data"][i]["index"], i);
  }
  EXPECT_EQ(ours.body["usage"]["prompt_tokens"], theirs.body["usage"]["prompt_tokens"]);
}

// A batch answers as its inputs one by one, in input order; base64 carries the same floats; the
// native endpoint carries each vector in a list; embd_normalize -1 leaves the model's vector.
TEST_P(Embeddings, ABatchAnswersAsItsInputsOneByOne) {
  ServerProcess server({.model = kModels + "/" + GetParam().file, .extra_args = {"--embeddings"}, .parallel = 3});
  auto client = server.client();
  std::vector<std::string> texts;
  for (int i = 0; i < 7; ++i) texts.push_back(std::to_string(i) + " " + kPassage.substr(0, 40 + 13 * i));
  const JsonReply batch = post_json(*client, "/v1/embeddings", {{"input", texts}, {"cache_prompt", false}});
  ASSERT_EQ(batch.status, 200) << batch.raw;
  const auto together = vectors_of(batch);
  ASSERT_EQ(together.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const JsonReply alone = post_json(*client, "/v1/embeddings", {{"input", texts[i]}, {"cache_prompt", false}});
    ASSERT_EQ(alone.status, 200) << alone.raw;
    // How an input's prompt is split into calls depends on what arrives beside it, which moves the
    // fifth digit by default (to the bit under --deterministic: EmbeddingsDeterministic).
    EXPECT_LT(largest_difference(vectors_of(alone)[0], together[i]), 5e-4) << "input " << i;
  }
  const JsonReply encoded = post_json(*client, "/v1/embeddings", {{"input", texts[2]}, {"encoding_format", "base64"}});
  ASSERT_EQ(encoded.status, 200) << encoded.raw;
  const std::string bytes = api::decode_base64(encoded.body["data"][0]["embedding"].get<std::string>()).value();
  std::vector<float> decoded(bytes.size() / sizeof(float));
  std::memcpy(decoded.data(), bytes.data(), decoded.size() * sizeof(float));
  EXPECT_LT(largest_difference(decoded, together[2]), 5e-4);
  const JsonReply native = post_json(*client, "/embedding", {{"content", texts[2]}});
  ASSERT_EQ(native.status, 200) << native.raw;
  ASSERT_TRUE(native.body.is_array());
  EXPECT_LT(largest_difference(floats(native.body[0]["embedding"][0]), together[2]), 5e-4);
  const JsonReply raw = post_json(*client, "/v1/embeddings", {{"input", texts[2]}, {"embd_normalize", -1}});
  ASSERT_EQ(raw.status, 200) << raw.raw;
  const std::vector<float> unscaled = vectors_of(raw)[0];
  const double length = norm(unscaled);
  ASSERT_GT(length, 0);
  EXPECT_GT(std::abs(length - 1.0), 1e-3) << "embd_normalize -1: the model's own vector, not a unit one";
  // Computed alone, not in the batch: the fifth digit moves as above.
  std::vector<float> rescaled;
  for (const float x : unscaled) rescaled.push_back(static_cast<float>(x / length));
  EXPECT_LT(largest_difference(rescaled, together[2]), 5e-4);
  // Token ids are inputs as they are: the text's own tokens give its vector.
  const JsonReply tokens = post_json(*client, "/tokenize", {{"content", texts[2]}, {"add_special", true}});
  ASSERT_EQ(tokens.status, 200);
  const JsonReply by_ids = post_json(*client, "/v1/embeddings", {{"input", tokens.body["tokens"]}});
  ASSERT_EQ(by_ids.status, 200) << by_ids.raw;
  EXPECT_LT(largest_difference(vectors_of(by_ids)[0], together[2]), 5e-4);
}

// Inputs that share a long prefix: on a last-pooling model the later ones take it from the cache
// (usage says how much, and the stats agree) and answer as with cache_prompt false: in the last
// bits by default (as a generated token's log-probabilities), to the bit with --deterministic.
// Other poolings read nothing from the cache.
TEST_P(Embeddings, ASharedPrefixIsReusedOnlyWhereTheLastTokenPools) {
  for (const bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "--deterministic" : "default");
    std::vector<std::string> args{"--embeddings"};
    if (deterministic) args.push_back("--deterministic");
    ServerProcess server({.model = kModels + "/" + GetParam().file, .extra_args = args, .parallel = 2});
    auto client = server.client();
    const std::string first = kPassage + " The first question is about the mill.";
    const std::string second = kPassage + " The second question is about the bridge.";
    ASSERT_EQ(post_json(*client, "/v1/embeddings", {{"input", first}}).status, 200);
    const JsonReply warm = post_json(*client, "/v1/embeddings", {{"input", second}});
    ASSERT_EQ(warm.status, 200) << warm.raw;
    const JsonReply cold = post_json(*client, "/v1/embeddings", {{"input", second}, {"cache_prompt", false}});
    ASSERT_EQ(cold.status, 200) << cold.raw;
    const int cached = warm.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
    if (GetParam().cached) {
      EXPECT_GT(cached, 20) << warm.raw;
    } else {
      EXPECT_EQ(cached, 0);
    }
    EXPECT_EQ(cold.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    if (deterministic) {
      EXPECT_EQ(vectors_of(warm)[0], vectors_of(cold)[0]) << "warm = cold";
    } else {
      EXPECT_LT(largest_difference(vectors_of(warm)[0], vectors_of(cold)[0]), 1e-3);
    }
    const JsonReply stats = get_json(*client, "/v1/cache/stats");
    ASSERT_EQ(stats.status, 200);
    EXPECT_EQ(stats.body["tokens_reused"].get<int>(), cached) << stats.raw;
  }
}

// With --deterministic an encoder computes each input in a call of its own: a batch answers to the
// bit as its inputs alone.
TEST(EmbeddingsDeterministic, AnEncodersBatchAnswersAsItsInputsAlone) {
  ServerProcess server({.model = kModels + "/tiny-bert.gguf", .extra_args = {"--embeddings", "--deterministic"}});
  auto client = server.client();
  const std::vector<std::string> texts{"hello world", kPassage, "the cat sat on the mat", kPassage.substr(0, 50)};
  const JsonReply batch = post_json(*client, "/v1/embeddings", {{"input", texts}});
  ASSERT_EQ(batch.status, 200) << batch.raw;
  for (size_t i = 0; i < texts.size(); ++i) {
    const JsonReply alone = post_json(*client, "/v1/embeddings", {{"input", texts[i]}});
    ASSERT_EQ(alone.status, 200) << alone.raw;
    EXPECT_EQ(vectors_of(alone)[0], vectors_of(batch)[i]) << "input " << i;
  }
}

TEST_P(Embeddings, BadInputIsA400NamingTheField) {
  ServerProcess server({.model = kModels + "/" + GetParam().file, .extra_args = {"--embeddings", "-b", "64"},
                        .parallel = 2});
  auto client = server.client();
  const auto refused = [&](const std::string& path, const json& body, const std::string& param) {
    const JsonReply reply = post_json(*client, path, body);
    EXPECT_EQ(reply.status, 400) << body.dump() << " -> " << reply.raw;
    EXPECT_EQ(reply.body["error"]["param"], param) << body.dump() << " -> " << reply.raw;
  };
  refused("/v1/embeddings", json::object(), "input");
  refused("/v1/embeddings", {{"input", json::array()}}, "input");
  refused("/v1/embeddings", {{"input", 5}}, "input");
  refused("/v1/embeddings", {{"input", json::array({"ok", 5})}}, "input[1]");
  refused("/v1/embeddings", {{"input", json::array({"ok", json::array()})}}, "input[1]");
  refused("/v1/embeddings", {{"input", json::array({1, 999999})}}, "input[1]");
  refused("/v1/embeddings", {{"input", json::array({1, -1})}}, "input[1]");
  refused("/v1/embeddings", {{"input", "x"}, {"encoding_format", "hex"}}, "encoding_format");
  refused("/v1/embeddings", {{"input", "x"}, {"dimensions", 32}}, "dimensions");
  refused("/v1/embeddings", {{"input", "x"}, {"embd_normalize", "2"}}, "embd_normalize");
  refused("/v1/embeddings", {{"input", "x"}, {"cache_salt", ""}}, "cache_salt");
  refused("/embedding", json::object(), "input");
  refused("/embedding", {{"content", json::array()}}, "content");
  // One call computes a whole input where the pooling reads every token: a longer one is refused.
  std::string long_text;
  for (int i = 0; i < 8; ++i) long_text += kPassage + " ";
  if (GetParam().cached) {
    EXPECT_EQ(post_json(*client, "/v1/embeddings", {{"input", long_text}}).status, 200);
  } else {
    refused("/v1/embeddings", {{"input", json::array({"ok", long_text})}}, "input[1]");
  }
  EXPECT_EQ(post_json(*client, "/v1/embeddings", {{"input", "x"}, {"dimensions", 64}}).status, 200);
  const JsonReply unknown = post_json(*client, "/v1/embeddings", {{"input", "x"}, {"model", "no-such-model"}});
  EXPECT_EQ(unknown.status, 404) << unknown.raw;
  // No text is generated here, and no ranking.
  const JsonReply chat = post_json(*client, "/v1/chat/completions",
                                   {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}});
  EXPECT_EQ(chat.status, 400) << chat.raw;
  EXPECT_EQ(chat.body["error"]["code"], "generation_not_enabled");
  EXPECT_EQ(post_json(*client, "/completion", {{"prompt", "hi"}}).status, 400);
  EXPECT_EQ(post_json(*client, "/v1/rerank", {{"query", "q"}, {"documents", json::array({"d"})}}).status, 400);
  // The server still answers after every refusal.
  EXPECT_EQ(post_json(*client, "/v1/embeddings", {{"input", "still here"}}).status, 200);
}

// A text model's pooling none: /embedding gives a vector per token (as the model gave it) and
// /v1/embeddings, which carries one vector per input, refuses.
TEST(EmbeddingsPerToken, PoolingNoneGivesAVectorPerToken) {
  ServerProcess server({.model = kModels + "/tiny-embed.gguf", .extra_args = {"--embeddings", "--pooling", "none"}});
  auto client = server.client();
  const JsonReply tokens = post_json(*client, "/tokenize", {{"content", kPassage}, {"add_special", true}});
  const JsonReply native = post_json(*client, "/embedding", {{"content", kPassage}});
  ASSERT_EQ(native.status, 200) << native.raw;
  ASSERT_EQ(native.body[0]["embedding"].size(), tokens.body["tokens"].size());
  EXPECT_EQ(native.body[0]["embedding"][0].size(), 64u);
  // The last token's own output is what last pooling normalizes.
  std::vector<float> last = floats(native.body[0]["embedding"].back());
  const double length = norm(last);
  for (float& x : last) x = static_cast<float>(x / length);
  ServerProcess pooled({.model = kModels + "/tiny-embed.gguf", .extra_args = {"--embeddings", "--pooling", "last"}});
  const JsonReply by_last = post_json(*pooled.client(), "/v1/embeddings", {{"input", kPassage}});
  ASSERT_EQ(by_last.status, 200);
  EXPECT_LT(largest_difference(vectors_of(by_last)[0], last), 1e-5);
  const JsonReply openai = post_json(*client, "/v1/embeddings", {{"input", kPassage}});
  EXPECT_EQ(openai.status, 400) << openai.raw;
  EXPECT_EQ(openai.body["error"]["code"], "pooling_none");
}

TEST(EmbeddingsOff, AGenerationServerRefusesEmbeddingsAndRerank) {
  ServerProcess server;
  auto client = server.client();
  const JsonReply reply = post_json(*client, "/v1/embeddings", {{"input", "hello"}});
  EXPECT_EQ(reply.status, 400) << reply.raw;
  EXPECT_EQ(reply.body["error"]["code"], "embeddings_not_enabled");
  EXPECT_EQ(post_json(*client, "/v1/rerank", {{"query", "q"}, {"documents", json::array({"d"})}}).status, 400);
}

class Rerank : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Models, Rerank, ::testing::Values("tiny-bert-reranker.gguf", "tiny-qwen3-reranker.gguf"),
                         [](const auto& info) { return info.param.find("bert") != std::string::npos ? "bert" : "qwen3"; });

const json kDocuments = json::array({"a cat is an animal that purrs", "paris is a city on a river", "cats sleep all day",
                                     "the mill wheel turns in the river"});

TEST_P(Rerank, ScoresAreLlamaServersOnTheSameModel) {
  if (!have_program("llama-server")) GTEST_SKIP() << "llama-server is not on PATH (run through scripts/in-env)";
  const std::string model = kModels + "/" + GetParam();
  const json request{{"query", "what is a cat"}, {"documents", kDocuments}};
  JsonReply ours;
  {
    ServerProcess server({.model = model, .extra_args = {"--reranking"}, .parallel = 2, .ctx_size = 4096});
    ours = post_json(*server.client(), "/v1/rerank", request);
  }
  ASSERT_EQ(ours.status, 200) << ours.raw;
  LlamaServerPeer peer({"-m", model, "--reranking", "-c", "4096", "-np", "2"});
  const JsonReply theirs = post_json(*peer.client, "/v1/rerank", request);
  ASSERT_EQ(theirs.status, 200) << theirs.raw;
  ASSERT_EQ(ours.body["results"].size(), kDocuments.size());
  ASSERT_EQ(theirs.body["results"].size(), kDocuments.size());
  for (size_t i = 0; i < kDocuments.size(); ++i) {
    EXPECT_EQ(ours.body["results"][i]["index"], theirs.body["results"][i]["index"]) << "rank " << i;
    EXPECT_NEAR(ours.body["results"][i]["relevance_score"].get<double>(),
                theirs.body["results"][i]["relevance_score"].get<double>(), 1e-5);
  }
  EXPECT_EQ(ours.body["usage"]["prompt_tokens"], theirs.body["usage"]["prompt_tokens"]);
}

TEST_P(Rerank, FieldsShapeTheAnswerAndBadOnesAreRefused) {
  ServerProcess server({.model = kModels + "/" + GetParam(), .extra_args = {"--reranking"}, .ctx_size = 4096});
  auto client = server.client();
  const JsonReply all = post_json(*client, "/v1/rerank", {{"query", "what is a cat"}, {"documents", kDocuments}});
  ASSERT_EQ(all.status, 200) << all.raw;
  const json& results = all.body["results"];
  ASSERT_EQ(results.size(), kDocuments.size());
  for (size_t i = 1; i < results.size(); ++i) {
    EXPECT_GE(results[i - 1]["relevance_score"].get<double>(), results[i]["relevance_score"].get<double>());
  }
  // top_n keeps the best; sort false keeps input order; return_documents carries the texts.
  const JsonReply top = post_json(*client, "/rerank",
                                  {{"query", "what is a cat"}, {"documents", kDocuments}, {"top_n", 2}, {"return_documents", true}});
  ASSERT_EQ(top.status, 200) << top.raw;
  ASSERT_EQ(top.body["results"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(top.body["results"][i]["index"], results[i]["index"]);
    EXPECT_EQ(top.body["results"][i]["document"]["text"], kDocuments[results[i]["index"].get<size_t>()]);
  }
  const JsonReply ordered = post_json(*client, "/v1/rerank", {{"query", "what is a cat"}, {"documents", kDocuments}, {"sort", false}});
  ASSERT_EQ(ordered.status, 200);
  for (size_t i = 0; i < kDocuments.size(); ++i) {
    EXPECT_EQ(ordered.body["results"][i]["index"], i);
    const auto same = std::ranges::find_if(results, [&](const json& r) { return r["index"] == i; });
    // Scores of pairs computed in one call beside others may differ in the sixth digit (llama-server's too).
    EXPECT_NEAR(ordered.body["results"][i]["relevance_score"].get<double>(), (*same)["relevance_score"].get<double>(), 1e-4);
  }
  // Cohere's {"text"} documents and TEI's `texts` (a bare array of scores).
  json objects = json::array();
  for (const json& d : kDocuments) objects.push_back({{"text", d}});
  const JsonReply cohere = post_json(*client, "/v1/rerank", {{"query", "what is a cat"}, {"documents", objects}});
  ASSERT_EQ(cohere.body["results"].size(), results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_NEAR(cohere.body["results"][i]["relevance_score"].get<double>(), results[i]["relevance_score"].get<double>(), 1e-4);
  }
  const JsonReply tei = post_json(*client, "/rerank", {{"query", "what is a cat"}, {"texts", kDocuments}, {"return_text", true}});
  ASSERT_EQ(tei.status, 200) << tei.raw;
  ASSERT_TRUE(tei.body.is_array());
  EXPECT_NEAR(tei.body[0]["score"].get<double>(), results[0]["relevance_score"].get<double>(), 1e-4);
  EXPECT_EQ(tei.body[0]["text"], kDocuments[results[0]["index"].get<size_t>()]);
  const auto refused = [&](const json& body, const std::string& param) {
    const JsonReply reply = post_json(*client, "/v1/rerank", body);
    EXPECT_EQ(reply.status, 400) << body.dump() << " -> " << reply.raw;
    EXPECT_EQ(reply.body["error"]["param"], param) << body.dump() << " -> " << reply.raw;
  };
  refused({{"documents", kDocuments}}, "query");
  refused({{"query", 5}, {"documents", kDocuments}}, "query");
  refused({{"query", "q"}}, "documents");
  refused({{"query", "q"}, {"documents", "one"}}, "documents");
  refused({{"query", "q"}, {"documents", json::array()}}, "documents");
  refused({{"query", "q"}, {"documents", json::array({"ok", 5})}}, "documents[1]");
  refused({{"query", "q"}, {"documents", kDocuments}, {"top_n", 0}}, "top_n");
  refused({{"query", "q"}, {"documents", kDocuments}, {"top_n", -1}}, "top_n");
  refused({{"query", "q"}, {"documents", kDocuments}, {"top_n", "1"}}, "top_n");
  refused({{"query", "q"}, {"documents", kDocuments}, {"sort", "no"}}, "sort");
  // A reranker ranks: it computes no embeddings.
  EXPECT_EQ(post_json(*client, "/v1/embeddings", {{"input", "x"}}).status, 400);
  EXPECT_EQ(post_json(*client, "/v1/rerank", {{"query", "q"}, {"documents", kDocuments}}).status, 200);
}

}  // namespace
}  // namespace prefixd::testing
