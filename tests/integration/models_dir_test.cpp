// Several models behind one address (`serve --models-dir`): a request's `model` picks the model,
// which loads on first use and answers as a server of that model alone; /v1/models shows each
// one's state; /models/load and /models/unload work as llama-server's; --models-max unloads the
// least recently used idle model and never one serving a request; --models-idle-seconds unloads an
// unused one; each model keeps its disk tier in a folder of its own and its metrics under its name;
// with keys the front checks them before anything loads; every model's KV events come on one
// address under a topic of its own; every bad name is refused naming it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <string>
#include <thread>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "events/kv_event_wire.h"
#include "server_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

const std::string kModels = PREFIXD_TEST_MODELS_DIR;

// A models folder: tiny.gguf, gemma.gguf, and a folder `vl` with a model and its projector.
struct ModelsDir {
  ModelsDir() : path(std::filesystem::temp_directory_path() / ("prefixd-models-" + std::to_string(::getpid()) + "-" +
                                                                std::to_string(counter++))) {
    std::filesystem::create_directories(path / "vl");
    std::filesystem::create_symlink(kModels + "/tiny.gguf", path / "tiny.gguf");
    std::filesystem::create_symlink(kModels + "/gemma3-tiny.gguf", path / "gemma.gguf");
    std::filesystem::create_symlink(kModels + "/tiny-qwen2vl.gguf", path / "vl" / "model.gguf");
    std::filesystem::create_symlink(kModels + "/tiny-qwen2vl-mmproj.gguf", path / "vl" / "mmproj-model.gguf");
  }
  ~ModelsDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
  std::filesystem::path disk() const { return path.string() + "-disk"; }
  static inline int counter = 0;
};

ServerConfig host_config(const ModelsDir& dir, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--models-dir", dir.path.string(), "--cache-disk-path", dir.disk().string()};
  args.insert(args.end(), more.begin(), more.end());
  return ServerConfig{.model = "", .extra_args = args, .parallel = 2};
}

json completion(const std::string& model, int max_tokens = 8) {
  return {{"model", model}, {"prompt", "The harbour at dawn was quiet except for"}, {"max_tokens", max_tokens},
          {"temperature", 0}};
}

std::map<std::string, std::string> states(httplib::Client& client) {
  std::map<std::string, std::string> out;
  for (const json& m : get_json(client, "/v1/models").body["data"]) out[m["id"]] = m["status"]["value"];
  return out;
}

// Waits (up to 20 s) until `model`'s state is `state`.
bool reaches(httplib::Client& client, const std::string& model, const std::string& state) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (states(client)[model] == state) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(ModelsDir, EachModelAnswersAsItsOwnServerAndLoadsOnFirstUse) {
  ModelsDir dir;
  std::string alone;
  {
    ServerProcess single({.model = kModels + "/tiny.gguf", .parallel = 2});
    alone = post_json(*single.client(), "/v1/completions", completion("tiny")).body["choices"][0]["text"];
  }
  ServerProcess server(host_config(dir));
  auto client = server.client();
  EXPECT_EQ(states(*client), (std::map<std::string, std::string>{{"gemma", "unloaded"}, {"tiny", "unloaded"}, {"vl", "unloaded"}}));
  const JsonReply tiny = post_json(*client, "/v1/completions", completion("tiny"));
  ASSERT_EQ(tiny.status, 200) << tiny.raw << server.log();
  EXPECT_EQ(tiny.body["model"], "tiny");
  EXPECT_EQ(tiny.body["choices"][0]["text"], alone) << "the same answer as a server of that model alone";
  EXPECT_EQ(states(*client)["tiny"], "loaded");

  const auto streamed = client->Post("/v1/chat/completions",
                                     json{{"model", "gemma"}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                                          {"max_tokens", 4}, {"stream", true}}.dump(),
                                     "application/json");
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->status, 200);
  const auto payloads = sse_payloads(streamed->body);
  ASSERT_FALSE(payloads.empty());
  EXPECT_EQ(payloads.back(), "[DONE]");
  EXPECT_EQ(json::parse(payloads.front())["model"], "gemma");

  // The projector beside the folder's model: the model takes images.
  const JsonReply props = get_json(*client, "/props?model=vl");
  ASSERT_EQ(props.status, 200) << props.raw;
  EXPECT_TRUE(props.body["modalities"]["vision"].get<bool>()) << props.raw;

  // Each model's metrics under its name, beside the front's.
  const auto metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("prefixd_model_state{model=\"tiny\",state=\"loaded\"} 1"), std::string::npos);
  EXPECT_GT(metric_value(metrics->body, "prefixd_requests_total{model=\"tiny\"}"), 0) << metrics->body.substr(0, 2000);
  EXPECT_GT(metric_value(metrics->body, "prefixd_requests_total{model=\"gemma\"}"), 0);
  // A disk tier folder per model.
  EXPECT_TRUE(std::filesystem::is_directory(dir.disk() / "tiny"));
  EXPECT_TRUE(std::filesystem::is_directory(dir.disk() / "gemma"));
  std::filesystem::remove_all(dir.disk());
}

// --models-max 1: loading a second model unloads the first once it is idle, never while it serves.
TEST(ModelsDir, AModelServingARequestIsNeverUnloadedForRoom) {
  ModelsDir dir;
  ServerProcess server(host_config(dir, {"--models-max", "1"}));
  auto client = server.client();
  ASSERT_EQ(post_json(*client, "/v1/completions", completion("tiny")).status, 200);
  // A long reply on tiny, and meanwhile a request for gemma, which must wait for it.
  auto long_reply = std::async(std::launch::async, [&server] {
    json body = completion("tiny", 1500);
    body["ignore_eos"] = true;
    return post_json(*server.client(), "/v1/completions", body);
  });
  ASSERT_TRUE(reaches(*client, "tiny", "loaded"));
  const auto until_busy = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (get_json(*client, "/v1/models/tiny").body["in_flight"] != 1 && std::chrono::steady_clock::now() < until_busy) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto gemma = std::async(std::launch::async, [&server] { return post_json(*server.client(), "/v1/completions", completion("gemma")); });
  const JsonReply first = long_reply.get();
  ASSERT_EQ(first.status, 200) << first.raw;
  EXPECT_EQ(first.body["usage"]["completion_tokens"], 1500) << "the long reply ran to its end";
  const JsonReply second = gemma.get();
  ASSERT_EQ(second.status, 200) << second.raw;
  const auto now = states(*client);
  EXPECT_EQ(now.at("tiny"), "unloaded");
  EXPECT_EQ(now.at("gemma"), "loaded");
  std::filesystem::remove_all(dir.disk());
}

TEST(ModelsDir, LoadUnloadAndIdleUnloadWorkAsLlamaServers) {
  ModelsDir dir;
  ServerProcess server(host_config(dir, {"--no-models-autoload", "--models-idle-seconds", "1"}));
  auto client = server.client();
  const JsonReply refused = post_json(*client, "/v1/completions", completion("tiny"));
  EXPECT_EQ(refused.status, 503) << refused.raw;
  EXPECT_EQ(refused.body["error"]["code"], "model_not_loaded");
  const JsonReply loaded = post_json(*client, "/models/load", {{"model", "tiny"}});
  ASSERT_EQ(loaded.status, 200) << loaded.raw;
  EXPECT_EQ(loaded.body["success"], true);
  EXPECT_EQ(states(*client)["tiny"], "loaded") << "the load answers once the model is ready";
  EXPECT_EQ(post_json(*client, "/models/load", {{"model", "tiny"}}).status, 400) << "already loaded";
  EXPECT_EQ(post_json(*client, "/v1/completions", completion("tiny")).status, 200);
  // Unused for --models-idle-seconds: unloaded.
  EXPECT_TRUE(reaches(*client, "tiny", "unloaded"));
  EXPECT_EQ(post_json(*client, "/models/unload", {{"model", "tiny"}}).status, 400) << "not loaded";
  ASSERT_EQ(post_json(*client, "/models/load", {{"model", "gemma"}}).status, 200);
  const JsonReply unloaded = post_json(*client, "/models/unload", {{"model", "gemma"}});
  ASSERT_EQ(unloaded.status, 200) << unloaded.raw;
  EXPECT_EQ(states(*client)["gemma"], "unloaded");
  std::filesystem::remove_all(dir.disk());
}

// With keys the front checks them itself, on every route but /health and before anything loads:
// a request without a valid key loads nothing (a load may unload another model for room); loading,
// unloading and the front's /metrics need an admin key; a tenant's key is served by the model.
TEST(ModelsDir, KeysAreCheckedAtTheFrontBeforeAnythingLoads) {
  ModelsDir dir;
  const std::filesystem::path keys = dir.path.string() + "-keys";
  std::ofstream(keys) << "alpha-key-1 alpha\nops-admin-key ops admin\n";
  ServerProcess server(host_config(dir, {"--api-keys", keys.string()}));
  auto anonymous = server.client();
  auto wrong = server.client("not-a-key");
  auto tenant = server.client("alpha-key-1");
  auto admin = server.client("ops-admin-key");
  EXPECT_EQ(anonymous->Get("/health")->status, 200);
  const JsonReply refused = post_json(*anonymous, "/v1/completions", completion("tiny"));
  EXPECT_EQ(refused.status, 401) << refused.raw;
  EXPECT_EQ(refused.body["error"]["type"], "authentication_error") << refused.raw;
  EXPECT_EQ(post_json(*wrong, "/v1/chat/completions", {{"model", "gemma"}, {"messages", json::array()}}).status, 401);
  EXPECT_EQ(get_json(*anonymous, "/v1/models").status, 401);
  EXPECT_EQ(anonymous->Get("/slots?model=tiny")->status, 401);
  for (const auto& [id, state] : states(*tenant)) EXPECT_EQ(state, "unloaded") << id << ": nothing without a key loads";

  const JsonReply load = post_json(*tenant, "/models/load", {{"model", "tiny"}});
  EXPECT_EQ(load.status, 403) << load.raw;
  EXPECT_EQ(tenant->Get("/metrics")->status, 403);
  EXPECT_EQ(states(*tenant)["tiny"], "unloaded");
  const JsonReply served = post_json(*tenant, "/v1/completions", completion("tiny"));
  EXPECT_EQ(served.status, 200) << served.raw;
  EXPECT_EQ(admin->Get("/metrics")->status, 200);
  EXPECT_EQ(post_json(*admin, "/models/unload", {{"model", "tiny"}}).status, 200);
  EXPECT_EQ(states(*admin)["tiny"], "unloaded");
  std::filesystem::remove(keys);
  std::filesystem::remove_all(dir.disk());
}

// With --kv-events-endpoint the front publishes every model's KV events on that one address, each
// model's under its own topic (`kv@pod-a` gives `kv@pod-a@tiny`, llm-d's form) with its own
// numbers; a replay endpoint is refused with --models-dir.
TEST(ModelsDir, EveryModelsKvEventsComeOnOneAddressUnderItsOwnTopic) {
  ModelsDir dir;
  const int port = pick_free_port();
  ServerProcess server(host_config(dir, {"--kv-events-endpoint", "tcp://*:" + std::to_string(port), "--kv-events-topic",
                                         "kv@pod-a", "--kv-events-interval-ms", "5"}));
  zmq::context_t context;
  zmq::socket_t sub(context, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvtimeo, 100);
  sub.connect("tcp://127.0.0.1:" + std::to_string(port));
  auto client = server.client();
  std::map<std::string, std::int64_t> stored;  // topic → blocks stored
  std::map<std::string, std::vector<std::int64_t>> seqs;
  const auto both = [&] { return stored["kv@pod-a@tiny"] > 0 && stored["kv@pod-a@gemma"] > 0; };
  // A subscription reaches a model's publisher some time after it connects: requests go on, each
  // with a new prompt, until both models' stored blocks came.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int round = 0; !both() && std::chrono::steady_clock::now() < deadline; ++round) {
    for (const std::string model : {"tiny", "gemma"}) {
      json body = completion(model, 2);
      body["prompt"] = std::to_string(round) + " " + body["prompt"].get<std::string>() + " the tide and the gulls";
      const JsonReply reply = post_json(*client, "/v1/completions", body);
      ASSERT_EQ(reply.status, 200) << reply.raw;
    }
    for (int quiet = 0; quiet < 5;) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(sub, std::back_inserter(frames))) {
        ++quiet;
        continue;
      }
      ASSERT_EQ(frames.size(), 3u);
      const std::string topic = frames[0].to_string();
      ASSERT_TRUE(topic == "kv@pod-a@tiny" || topic == "kv@pod-a@gemma") << topic;
      const auto seq = events::parse_sequence_frame(std::span(frames[1].data<std::uint8_t>(), frames[1].size()));
      ASSERT_TRUE(seq.has_value());
      seqs[topic].push_back(*seq);
      const auto batch = events::decode_batch(std::span(frames[2].data<std::uint8_t>(), frames[2].size()));
      ASSERT_TRUE(batch) << batch.error();
      for (const events::WireEvent& e : batch->events) {
        if (const auto* s = std::get_if<events::WireStored>(&e)) stored[topic] += static_cast<std::int64_t>(s->hashes.size());
      }
    }
  }
  EXPECT_TRUE(both()) << "tiny: " << stored["kv@pod-a@tiny"] << " blocks, gemma: " << stored["kv@pod-a@gemma"];
  for (const auto& [topic, numbers] : seqs) {
    EXPECT_TRUE(std::ranges::is_sorted(numbers)) << topic << ": each model numbers its own batches";
  }

  const CommandResult replay = run_shell(std::string(PREFIXD_BINARY) + " serve --models-dir " + dir.path.string() +
                                         " --port 0 --kv-events-endpoint tcp://*:" + std::to_string(pick_free_port()) +
                                         " --kv-events-replay-endpoint tcp://*:" + std::to_string(pick_free_port()) + " 2>&1");
  EXPECT_NE(replay.status, 0);
  EXPECT_NE(replay.output.find("--kv-events-replay-endpoint with --models-dir"), std::string::npos) << replay.output;
  std::filesystem::remove_all(dir.disk());
}

TEST(ModelsDir, BadNamesAreRefusedNamingThem) {
  ModelsDir dir;
  ServerProcess server(host_config(dir));
  auto client = server.client();
  const JsonReply unknown = post_json(*client, "/v1/chat/completions", {{"model", "nope"}, {"messages", json::array()}});
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.body["error"]["param"], "model");
  EXPECT_NE(unknown.raw.find("'nope'"), std::string::npos) << unknown.raw;
  const JsonReply missing = post_json(*client, "/v1/completions", {{"prompt", "hi"}});
  EXPECT_EQ(missing.status, 400);
  EXPECT_EQ(missing.body["error"]["param"], "model");
  EXPECT_EQ(get_json(*client, "/v1/models/nope").status, 404);
  EXPECT_EQ(post_json(*client, "/models/load", {{"model", "nope"}}).status, 404);
  EXPECT_EQ(post_json(*client, "/models/load", json::object()).status, 400);
  EXPECT_EQ(client->Post("/models/load", "{", "application/json")->status, 400);
  EXPECT_EQ(get_json(*client, "/slots").status, 400) << "a GET names its model with ?model=";
  for (const auto& [id, state] : states(*client)) EXPECT_EQ(state, "unloaded") << id << ": no bad request loaded anything";

  const CommandResult no_dir = run_shell(std::string(PREFIXD_BINARY) + " serve --models-dir /nonexistent/models --port 0 2>&1");
  EXPECT_NE(no_dir.status, 0);
  EXPECT_NE(no_dir.output.find("no folder at '/nonexistent/models'"), std::string::npos) << no_dir.output;
  const std::filesystem::path empty = dir.path.string() + "-empty";
  std::filesystem::create_directories(empty);
  const CommandResult none = run_shell(std::string(PREFIXD_BINARY) + " serve --models-dir " + empty.string() + " --port 0 2>&1");
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.output.find("no model (.gguf)"), std::string::npos) << none.output;
  std::filesystem::remove_all(empty);
  std::filesystem::remove_all(dir.disk());
}

}  // namespace
}  // namespace prefixd::testing
