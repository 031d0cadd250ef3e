// LoRA adapters (--lora, --lora-scaled, /lora-adapters, a request's `lora`): greedy answers are
// llama-server's under the same adapters and scales; an adapter set is part of the cache
// namespace, so the same prompt under another set or another scale (POST /lora-adapters included)
// reuses nothing, while under the same set a cached prompt answers as a cold one; requests under
// different sets running at once each answer as alone; KV events name the adapters of their
// blocks; every bad field and flag is refused naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/server_process.h"
#include "events/kv_event_subscriber.h"
#include "llama_server_peer.h"
#include "server_process.h"
#include "valkey_process.h"

namespace prefixd::testing {
namespace {

using nlohmann::json;

const std::string kModels = PREFIXD_TEST_MODELS_DIR;
const std::string kAdapterA = kModels + "/tiny-lora-a.gguf";
const std::string kAdapterB = kModels + "/tiny-lora-b.gguf";

const std::string kPrompt =
    "The lighthouse keeper wrote in the log every evening: the weather, the ships that passed, the state of the "
    "lamp and the oil that remained. On the night of the storm he wrote only one line.";

CommandResult prefixd(const std::string& args) {
  return run_shell("env -i PATH=/usr/bin:/bin HOME=/tmp PREFIXD_MODEL_FINGERPRINT_CACHE=off " +
                   std::string(PREFIXD_BINARY) + " " + args + " 2>&1");
}

// A greedy completion of `prompt`; `lora` and `cache_prompt` when given.
json completion(const std::string& prompt, const json& lora = nullptr, bool cache = true, int max_tokens = 16) {
  json body{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"cache_prompt", cache}};
  if (!lora.is_null()) body["lora"] = lora;
  return body;
}

struct Answer {
  std::string text;
  int cached = -1;
};

Answer complete(httplib::Client& client, const json& body) {
  const JsonReply reply = post_json(client, "/v1/completions", body);
  EXPECT_EQ(reply.status, 200) << reply.raw;
  if (reply.status != 200) return {};
  const json& details = reply.body["usage"]["prompt_tokens_details"];
  return Answer{.text = reply.body["choices"][0]["text"].get<std::string>(),
                .cached = details.is_object() ? details.value("cached_tokens", 0) : 0};
}


// The adapter choices the comparisons run: the server's scales, each adapter alone, both, none.
const std::vector<json> kChoices = {
    nullptr,
    json::array({{{"id", 0}, {"scale", 1.0}}}),
    json::array({{{"id", 1}, {"scale", 2.0}}}),
    json::array({{{"id", 0}, {"scale", 0.5}}, {{"id", 1}, {"scale", 1.0}}}),
    json::array({{{"id", 0}, {"scale", 0.0}}}),
};

// Each choice's greedy answer equals llama-server's, cold on both (llama-server would reuse K/V
// computed under another adapter set for the same prompt); the adapters change the answer; no
// adapter at all answers as a server that loads none; GET /lora-adapters lists the same.
TEST(Lora, AnswersAreLlamaServersUnderTheSameAdaptersAndScales) {
  if (!have_program("llama-server")) GTEST_SKIP() << "llama-server is not on PATH (run through scripts/in-env)";
  const std::vector<std::string> flags = {"--lora", kAdapterA, "--lora-scaled", kAdapterB + ":0.5"};
  std::vector<Answer> ours;
  json listed;
  {
    std::vector<std::string> args = flags;
    ServerProcess server({.extra_args = args, .parallel = 2});
    auto client = server.client();
    for (const json& choice : kChoices) ours.push_back(complete(*client, completion(kPrompt, choice, false)));
    listed = get_json(*client, "/lora-adapters").body;
  }
  Answer plain;
  {
    ServerProcess server({.parallel = 2});
    plain = complete(*server.client(), completion(kPrompt, nullptr, false));
  }
  std::vector<std::string> peer_args = {"-m", PREFIXD_TINY_MODEL, "-c", "2048", "-np", "2"};
  peer_args.insert(peer_args.end(), flags.begin(), flags.end());
  LlamaServerPeer peer(peer_args);
  for (size_t i = 0; i < kChoices.size(); ++i) {
    const Answer theirs = complete(*peer.client, completion(kPrompt, kChoices[i], false));
    EXPECT_EQ(ours[i].text, theirs.text) << "choice " << kChoices[i].dump();
  }
  EXPECT_NE(ours[0].text, ours[4].text) << "the adapters change the answer";
  EXPECT_NE(ours[1].text, ours[2].text);
  EXPECT_EQ(ours[4].text, plain.text) << "no adapter applied: the base model's answer";
  const JsonReply theirs_listed = get_json(*peer.client, "/lora-adapters");
  ASSERT_EQ(listed.size(), 2u) << listed.dump();
  ASSERT_EQ(theirs_listed.body.size(), 2u) << theirs_listed.raw;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(listed[i]["id"], theirs_listed.body[i]["id"]);
    EXPECT_EQ(listed[i]["path"], theirs_listed.body[i]["path"]);
    EXPECT_EQ(listed[i]["scale"], theirs_listed.body[i]["scale"]);
  }
  EXPECT_EQ(listed[0]["name"], "tiny-lora-a");
}

// The same prompt under another adapter set, or after POST /lora-adapters changed a scale, reuses
// nothing of it; under the same set it is a hit that answers as cold.
TEST(Lora, AnAdapterSetAndItsScalesArePartOfTheNamespace) {
  ServerProcess server({.extra_args = {"--lora", kAdapterA}, .parallel = 2});
  auto client = server.client();
  const Answer first = complete(*client, completion(kPrompt));
  EXPECT_EQ(first.cached, 0);
  const Answer base = complete(*client, completion(kPrompt, json::array({{{"id", 0}, {"scale", 0}}})));
  EXPECT_EQ(base.cached, 0) << "K/V computed under the adapter is not the base model's";
  const Answer again = complete(*client, completion(kPrompt));
  EXPECT_GT(again.cached, 0);
  EXPECT_EQ(again.text, first.text) << "warm = cold under the adapter";
  const Answer explicit_one = complete(*client, completion(kPrompt, json::array({{{"id", 0}, {"scale", 1}}})));
  EXPECT_GT(explicit_one.cached, 0) << "the server's scale 1 and a request's scale 1 are one namespace";

  const JsonReply set = post_json(*client, "/lora-adapters", json::array({{{"id", 0}, {"scale", 0.5}}}));
  ASSERT_EQ(set.status, 200) << set.raw;
  EXPECT_EQ(set.body["success"], true);
  EXPECT_EQ(get_json(*client, "/lora-adapters").body[0]["scale"], 0.5);
  const Answer halved = complete(*client, completion(kPrompt));
  EXPECT_EQ(halved.cached, 0) << "a new scale reuses no K/V of the old one";
  const Answer halved_cold = complete(*client, completion(kPrompt, nullptr, false));
  EXPECT_EQ(halved.text, halved_cold.text);
  const std::string longer = kPrompt + " The lamp went out at midnight and the keeper climbed the stairs.";
  const Answer extended = complete(*client, completion(longer));
  EXPECT_GT(extended.cached, 0);
  EXPECT_EQ(extended.text, complete(*client, completion(longer, nullptr, false)).text) << "warm = cold at the new scale";
}

// Requests under four adapter sets, two of each, at once on four slots: each answers as it does
// alone (a call computes one set; the others wait for their turn). Answering as alone whatever
// runs beside a request is --deterministic's promise (by default a row's result may depend on the
// rows of its call), so the server runs with it: adapters must keep that promise.
TEST(Lora, RequestsUnderDifferentAdaptersAtOnceAnswerAsAlone) {
  ServerProcess server({.extra_args = {"--deterministic", "--lora", kAdapterA + "," + kAdapterB}, .parallel = 4});
  auto client = server.client();
  const std::vector<json> sets = {json::array({{{"id", 0}, {"scale", 0}}}), json::array({{{"id", 0}, {"scale", 1}}}),
                                  json::array({{{"id", 1}, {"scale", 1}}}), nullptr};
  std::vector<json> bodies;
  for (size_t i = 0; i < 8; ++i) {
    bodies.push_back(completion(std::to_string(i) + ". " + kPrompt.substr(0, 60 + 11 * i), sets[i % sets.size()], false, 24));
  }
  std::vector<std::string> alone;
  for (const json& body : bodies) alone.push_back(complete(*client, body).text);
  const auto counters = [&client] {
    const std::string text = client->Get("/metrics")->body;
    return std::pair{metric_value(text, "prefixd_lora_adapter_switches_total"), metric_value(text, "prefixd_decode_steps_total")};
  };
  for (int round = 0; round < 2; ++round) {
    const auto [switches_before, steps_before] = counters();
    std::vector<std::future<Answer>> running;
    for (const json& body : bodies) {
      running.push_back(std::async(std::launch::async, [&server, body] { return complete(*server.client(), body); }));
    }
    for (size_t i = 0; i < bodies.size(); ++i) EXPECT_EQ(running[i].get().text, alone[i]) << "request " << i << ", round " << round;
    // Each set had turns, and a turn spans several steps (kAdapterTurn): a switch at every step,
    // which costs libllama a reserve each, would make switches about as many as steps.
    const auto [switches, steps] = counters();
    EXPECT_GE(switches - switches_before, 3) << "four sets, each served";
    EXPECT_LE(2 * (switches - switches_before), steps - steps_before) << "a set keeps several steps";
  }
}

// BlockStored events of blocks computed under adapters carry lora_name (the adapters' label) and
// lora_id; the base model's carry neither.
TEST(Lora, KvEventsNameTheAdaptersOfTheirBlocks) {
  const int port = pick_free_port();
  const int replay = pick_free_port();
  ServerProcess server({.extra_args = {"--lora-scaled", kAdapterA + ":0.5", "--kv-events-endpoint",
                                       "tcp://*:" + std::to_string(port), "--kv-events-replay-endpoint",
                                       "tcp://*:" + std::to_string(replay)},
                        .parallel = 2});
  std::mutex mutex;
  std::vector<events::WireStored> stored;
  events::KvEventSubscriber subscriber(
      [&](std::size_t, const events::WireBatch& batch) {
        std::lock_guard lock(mutex);
        for (const events::WireEvent& e : batch.events) {
          if (const auto* s = std::get_if<events::WireStored>(&e)) stored.push_back(*s);
        }
      },
      [](std::size_t) {});
  subscriber.add(0, {.endpoint = "tcp://127.0.0.1:" + std::to_string(port),
                     .replay_endpoint = "tcp://127.0.0.1:" + std::to_string(replay)});
  auto client = server.client();
  // Several blocks each (--apc-block-size).
  const std::string text = kPrompt + " " + kPrompt + " " + kPrompt + " " + kPrompt;
  complete(*client, completion(text));
  complete(*client, completion("Another prompt entirely, " + text, json::array({{{"id", 0}, {"scale", 0}}})));
  const auto seen = [&](bool adapted) {
    std::lock_guard lock(mutex);
    return std::ranges::any_of(stored, [&](const events::WireStored& s) { return !s.lora_name.empty() == adapted; });
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((!seen(true) || !seen(false)) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto names = [&] {
    std::lock_guard lock(mutex);
    std::string out;
    for (const events::WireStored& s : stored) out += "[" + s.medium + " " + std::to_string(s.hashes.size()) + " '" + s.lora_name + "']";
    return out;
  };
  ASSERT_TRUE(seen(true)) << names() << server.log();
  ASSERT_TRUE(seen(false)) << server.log();
  std::lock_guard lock(mutex);
  for (const events::WireStored& s : stored) {
    if (s.lora_name.empty()) {
      EXPECT_FALSE(s.lora_id.has_value());
    } else {
      EXPECT_EQ(s.lora_name, "tiny-lora-a@0.5");
      EXPECT_EQ(s.lora_id, events::lora_id_of("tiny-lora-a@0.5"));
    }
  }
}

// Bad `lora` fields and /lora-adapters bodies are 400s naming the field, and change nothing.
TEST(Lora, BadAdapterFieldsAreRefusedByName) {
  ServerProcess server({.extra_args = {"--lora", kAdapterA}, .parallel = 1});
  auto client = server.client();
  const std::vector<std::pair<json, std::string>> bad = {
      {json{{"id", 0}, {"scale", 1}}, "lora"},
      {json::array({{{"id", 1}, {"scale", 1}}}), "lora[0].id"},
      {json::array({{{"id", 0}}}), "lora[0].scale"},
      {json::array({{{"id", -2}, {"scale", 1}}}), "lora[0].id"},
      {json::array({{{"id", 0}, {"scale", "x"}}}), "lora[0].scale"},
  };
  for (const auto& [lora, param] : bad) {
    for (const char* path : {"/v1/completions", "/v1/chat/completions", "/completion"}) {
      json body = completion("hello", lora);
      if (std::string(path) == "/v1/chat/completions") body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"lora", lora}};
      const JsonReply reply = post_json(*client, path, body);
      EXPECT_EQ(reply.status, 400) << path << " " << lora.dump() << ": " << reply.raw;
      EXPECT_EQ(reply.body["error"]["param"], param) << path << " " << reply.raw;
    }
  }
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"id": 0, "scale": 1})", ""}, {R"([{"id": 3, "scale": 1}])", "body[0].id"}, {"[", ""}}) {
    const auto reply = client->Post("/lora-adapters", body, "application/json");
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 400) << body << ": " << reply->body;
    if (!param.empty()) {
      EXPECT_EQ(json::parse(reply->body)["error"]["param"], param);
    }
  }
  EXPECT_EQ(get_json(*client, "/lora-adapters").body[0]["scale"], 1.0) << "refused bodies change nothing";
  EXPECT_EQ(post_json(*client, "/v1/completions", completion("hello", json::array())).status, 200) << "[]: the server's";

  ServerProcess plain({.parallel = 1});
  auto none = plain.client();
  EXPECT_EQ(get_json(*none, "/lora-adapters").body, json::array());
  const JsonReply refused = post_json(*none, "/v1/completions", completion("hello", json::array({{{"id", 0}, {"scale", 1}}})));
  EXPECT_EQ(refused.status, 400) << refused.raw;
  EXPECT_NE(refused.raw.find("--lora"), std::string::npos) << refused.raw;
  EXPECT_EQ(post_json(*none, "/lora-adapters", json::array()).status, 200);
}

// Adapters that cannot be loaded stop the server at startup with the reason.
TEST(Lora, AnAdapterThatCannotLoadStopsTheServer) {
  const std::string serve = std::string("serve --model ") + PREFIXD_TINY_MODEL + " --port 0 ";
  const CommandResult missing = prefixd(serve + "--lora /nonexistent/adapter.gguf");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find("no file at '/nonexistent/adapter.gguf'"), std::string::npos) << missing.output;
  const CommandResult foreign = prefixd(serve + "--lora " + kModels + "/gemma3-tiny-lora.gguf");
  EXPECT_NE(foreign.status, 0);
  EXPECT_NE(foreign.output.find("cannot load"), std::string::npos) << foreign.output;
  const CommandResult no_scale = prefixd(serve + "--lora-scaled " + kAdapterA);
  EXPECT_NE(no_scale.status, 0);
  EXPECT_NE(no_scale.output.find("expected FILE:SCALE"), std::string::npos) << no_scale.output;
  const CommandResult bad_scale = prefixd(serve + "--lora-scaled " + kAdapterA + ":half");
  EXPECT_NE(bad_scale.status, 0);
  EXPECT_NE(bad_scale.output.find("'half' is not a number"), std::string::npos) << bad_scale.output;
}

}  // namespace
}  // namespace prefixd::testing
