#include "bench/gates.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <format>
#include <map>

#include "bench/request.h"

namespace prefixd::bench {
namespace {

constexpr int kTopLogprobs = 5;
constexpr int kGateReply = 8;
// A first-token distribution "differs" beyond float noise (warm vs cold differ by ~5e-4).
constexpr double kDistributionDiffers = 1e-2;
// The widest gap between two first tokens that still counts as a tie (below): above the warm/cold
// rounding seen on the default model with flash attention (up to 0.06 nats on every logprob), far
// below what a wrong prefix does to a distribution (whole nats).
constexpr double kMaxTieNats = 0.1;

std::string key_of(const nlohmann::json& entry, bool by_id) {
  if (by_id) return std::to_string(entry.at("id").get<long long>());
  return entry.value("token", std::string());
}

bool all_have_ids(const nlohmann::json& list) {
  for (const auto& e : list) {
    if (!e.is_object() || !e.contains("id") || !e.at("id").is_number_integer()) return false;
  }
  return true;
}

// Sends with top logprobs while the server accepts them; on a 400 retries once without and
// remembers that this server has none.
class Asker {
 public:
  Asker(const BenchClient& client, nlohmann::json tools) : client_(client), tools_(std::move(tools)) {}

  CompletionResult ask(const nlohmann::json& messages, RequestOptions options) {
    options.tools = tools_;
    if (logprobs_) {
      options.top_logprobs = kTopLogprobs;
      auto r = client_.stream("/v1/chat/completions", chat_body(messages, options));
      if (r.status != 400) return r;
      logprobs_ = false;
    }
    options.top_logprobs = 0;
    return client_.stream("/v1/chat/completions", chat_body(messages, options));
  }
  bool logprobs() const { return logprobs_; }

 private:
  const BenchClient& client_;
  nlohmann::json tools_;
  bool logprobs_ = true;
};

nlohmann::json optional_number(std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

std::string fresh_key(const std::string& tag) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::format("gate-{}-{}", tag, std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
}

// A follow-up whose answer is only in the earlier messages.
constexpr const char* kFollowUp = "Which word came fifth in the text above? Answer with that word only.";

// The logprob `list` gives `piece` (matched by token text), if it lists it.
std::optional<double> logprob_of(const nlohmann::json& list, const std::string& piece) {
  if (!list.is_array()) return std::nullopt;
  for (const auto& e : list) {
    if (e.is_object() && e.value("token", std::string()) == piece && e.contains("logprob") && e.at("logprob").is_number()) {
      return e.at("logprob").get<double>();
    }
  }
  return std::nullopt;
}

}  // namespace

bool first_tokens_tie(const nlohmann::json& warm_logprobs, const std::string& warm_piece,
                      const nlohmann::json& cold_logprobs, const std::string& cold_piece) {
  const auto diff = logprob_max_abs_diff(warm_logprobs, cold_logprobs);
  if (!diff) return false;
  const double tolerance = std::min(2 * *diff, kMaxTieNats);
  const auto close_in = [&](const nlohmann::json& list) {
    const auto a = logprob_of(list, warm_piece);
    const auto b = logprob_of(list, cold_piece);
    return a && b && std::fabs(*a - *b) <= tolerance;
  };
  return close_in(warm_logprobs) && close_in(cold_logprobs);
}

std::optional<double> logprob_max_abs_diff(const nlohmann::json& a, const nlohmann::json& b) {
  if (!a.is_array() || !b.is_array() || a.empty() || b.empty()) return std::nullopt;
  const bool by_id = all_have_ids(a) && all_have_ids(b);
  std::map<std::string, double> left;
  for (const auto& e : a) {
    if (e.is_object() && e.contains("logprob") && e.at("logprob").is_number()) left[key_of(e, by_id)] = e.at("logprob").get<double>();
  }
  std::optional<double> worst;
  for (const auto& e : b) {
    if (!e.is_object() || !e.contains("logprob") || !e.at("logprob").is_number()) continue;
    const auto it = left.find(key_of(e, by_id));
    if (it == left.end()) continue;
    const double d = std::fabs(it->second - e.at("logprob").get<double>());
    worst = worst ? std::max(*worst, d) : d;
  }
  return worst;
}

nlohmann::json run_gates(const BenchClient& client, const nlohmann::json& messages, const std::string& session,
                         const std::string& observed_first_piece, const nlohmann::json& tools) {
  Asker asker(client, tools);
  nlohmann::json out;
  auto failed = [](const CompletionResult& r) { return r.ok() ? nlohmann::json() : nlohmann::json(r.error); };

  // Warm first: the prefix is still cached from the workload; the cold replay then cannot evict
  // it before the warm one has used it.
  const auto warm = asker.ask(messages, {.max_tokens = 1, .session = session});
  const auto cold = asker.ask(messages, {.max_tokens = 1, .session = session, .cache_prompt = false});
  const auto diff = logprob_max_abs_diff(warm.first_logprobs, cold.first_logprobs);
  const bool same = warm.ok() && cold.ok() && warm.first_piece == cold.first_piece;
  const bool tie = warm.ok() && cold.ok() && !same &&
                   first_tokens_tie(warm.first_logprobs, warm.first_piece, cold.first_logprobs, cold.first_piece);
  out["first_token"] = {{"warm", warm.first_piece},
                        {"cold", cold.first_piece},
                        {"workload", observed_first_piece},
                        {"equal", same || tie},
                        {"tie", tie},
                        {"workload_equal", cold.ok() && observed_first_piece == cold.first_piece},
                        {"warm_evaluated", evaluated_tokens(warm)},
                        {"cold_evaluated", evaluated_tokens(cold)},
                        {"prompt_tokens", cold.prompt_tokens},
                        {"logprob_max_abs_diff", optional_number(diff)},
                        {"error", failed(warm.ok() ? cold : warm)}};

  const auto a = asker.ask(messages, {.max_tokens = kGateReply, .session = fresh_key("a")});
  const auto b = asker.ask(messages, {.max_tokens = kGateReply, .session = fresh_key("b")});
  out["determinism"] = {{"a", a.text}, {"b", b.text}, {"equal", a.ok() && b.ok() && a.text == b.text},
                        {"error", failed(a.ok() ? b : a)}};

  // The follow-up after the cached conversation (which the server should reuse) vs the same
  // follow-up alone: a "hit" that ignored the cached tokens would answer both alike.
  nlohmann::json with_prefix = messages;
  with_prefix.push_back({{"role", "assistant"}, {"content", "OK."}});
  with_prefix.push_back({{"role", "user"}, {"content", kFollowUp}});
  const nlohmann::json alone = nlohmann::json::array({{{"role", "user"}, {"content", kFollowUp}}});
  const auto with = asker.ask(with_prefix, {.max_tokens = kGateReply, .session = session});
  const auto without = asker.ask(alone, {.max_tokens = kGateReply, .session = fresh_key("alone")});
  const auto context_diff = logprob_max_abs_diff(with.first_logprobs, without.first_logprobs);
  const bool text_differs = with.text != without.text;
  const bool first_differs = with.first_piece != without.first_piece;
  const bool distribution_differs = asker.logprobs() && (!context_diff || *context_diff > kDistributionDiffers);
  out["context"] = {{"with_prefix", with.text},
                    {"with_prefix_cached", cached_tokens(with)},
                    {"without_prefix", without.text},
                    {"text_differs", text_differs},
                    {"first_token_differs", first_differs},
                    {"logprob_max_abs_diff", optional_number(context_diff)},
                    // Without logprobs the first token alone is a coarse probe of the distribution:
                    // the whole short reply stands in for it.
                    {"differs", with.ok() && without.ok() &&
                                    (first_differs || distribution_differs || (!asker.logprobs() && text_differs))},
                    {"error", failed(with.ok() ? without : with)}};
  out["logprobs"] = asker.logprobs();
  return out;
}

bool gates_passed(const nlohmann::json& g) {
  auto flag = [&](const char* pointer) {
    const nlohmann::json::json_pointer where(pointer);
    return g.contains(where) && g.at(where).is_boolean() && g.at(where).get<bool>();
  };
  return flag("/first_token/equal") && flag("/determinism/equal") && flag("/context/differs");
}

}  // namespace prefixd::bench
