#include "bench/client.h"

#include <format>

#include <httplib.h>

#include "bench/sse.h"

namespace prefixd::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::unique_ptr<httplib::Client> connect(const ClientTarget& target, std::chrono::seconds read_timeout) {
  auto client = std::make_unique<httplib::Client>(target.host, target.port);
  if (!target.api_key.empty()) client->set_bearer_token_auth(target.api_key);
  client->set_connection_timeout(std::chrono::seconds(10));
  // A cold prefill of thousands of tokens on a small CPU takes minutes before the first byte.
  client->set_read_timeout(read_timeout);
  client->set_write_timeout(std::chrono::seconds(60));
  return client;
}

}  // namespace

CompletionResult BenchClient::stream(const std::string& path, nlohmann::json body, int cancel_after_reads,
                                     std::chrono::milliseconds give_up_after) const {
  body["stream"] = true;
  const std::string payload = body.dump();
  const bool gives_up = give_up_after.count() > 0;
  // A read that waits past the deadline ends the request; so does a piece that arrives after it.
  auto client = connect(target_, read_timeout_);
  if (gives_up) client->set_read_timeout(give_up_after);
  StreamReader reader;
  std::string raw;  // kept for error bodies, which are plain JSON rather than a stream
  double ttft_ms = -1;
  std::vector<double> piece_ms;
  int reads_after_first_token = 0;
  bool hung_up = false;
  const auto t0 = Clock::now();
  auto res = client->Post(path, httplib::Headers{}, payload, "application/json",
                          [&](const char* data, std::size_t length) {
                            const std::string_view bytes(data, length);
                            if (raw.size() < 64 * 1024) raw.append(bytes);
                            const bool before = reader.first_token_seen();
                            const int pieces_before = reader.pieces();
                            reader.feed(bytes);
                            if (!before && reader.first_token_seen()) ttft_ms = ms_since(t0);
                            if (reader.pieces() > pieces_before) {
                              piece_ms.insert(piece_ms.end(), static_cast<std::size_t>(reader.pieces() - pieces_before),
                                              ms_since(t0));
                            }
                            if (reader.first_token_seen() && cancel_after_reads > 0 && !reader.done() &&
                                ++reads_after_first_token >= cancel_after_reads) {
                              hung_up = true;
                              return false;  // httplib closes the connection
                            }
                            if (gives_up && !reader.done() && ms_since(t0) > static_cast<double>(give_up_after.count())) {
                              hung_up = true;
                              return false;
                            }
                            return true;
                          });
  const double total_ms = ms_since(t0);
  CompletionResult result = reader.result();
  result.ttft_ms = ttft_ms;
  result.total_ms = total_ms;
  result.piece_ms = std::move(piece_ms);
  if (hung_up && !res && res.error() == httplib::Error::Canceled) {
    result.cancelled = true;
    return result;
  }
  if (gives_up && !res && res.error() == httplib::Error::Read && !reader.done()) {
    result.cancelled = true;  // the deadline passed while waiting for the next bytes
    return result;
  }
  if (!res) {
    result.error = std::format("POST {} failed: {}", path, httplib::to_string(res.error()));
    return result;
  }
  result.status = res->status;
  if (res->status != 200) {
    result.error = std::format("POST {} answered {}: {}", path, res->status, error_message(raw));
  } else if (result.ok() && !reader.done()) {
    result.error = std::format("POST {}: the stream ended without [DONE]", path);
  }
  return result;
}

CompletionResult BenchClient::complete(const std::string& path, nlohmann::json body) const {
  body["stream"] = false;
  const auto t0 = Clock::now();
  const HttpReply reply = post_raw(path, body.dump(), "application/json");
  CompletionResult result;
  result.total_ms = ms_since(t0);
  result.status = reply.status;
  if (reply.status == 0) {
    result.error = std::format("POST {} failed: {}", path, reply.body);
    return result;
  }
  if (reply.status != 200) {
    result.error = std::format("POST {} answered {}: {}", path, reply.status, error_message(reply.body));
    return result;
  }
  const auto parsed = nlohmann::json::parse(reply.body, nullptr, false);
  const nlohmann::json::json_pointer choice("/choices/0");
  if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains(choice)) {
    result.error = std::format("POST {}: not a completion: {}", path, reply.body.substr(0, 200));
    return result;
  }
  read_report_fields(parsed, result);
  const auto& first = parsed.at(choice);
  if (first.contains("text") && first["text"].is_string()) result.text = first["text"].get<std::string>();
  const nlohmann::json::json_pointer content("/message/content");
  if (first.contains(content) && first.at(content).is_string()) result.text = first.at(content).get<std::string>();
  if (first.contains("finish_reason") && first["finish_reason"].is_string()) {
    result.finish_reason = first["finish_reason"].get<std::string>();
  }
  return result;
}

HttpReply BenchClient::post_raw(const std::string& path, const std::string& body, const std::string& content_type) const {
  auto client = connect(target_, read_timeout_);
  auto res = client->Post(path, body, content_type);
  if (!res) return {0, httplib::to_string(res.error())};
  return {res->status, res->body};
}

HttpReply BenchClient::get_raw(const std::string& path) const {
  auto client = connect(target_, read_timeout_);
  auto res = client->Get(path);
  if (!res) return {0, httplib::to_string(res.error())};
  return {res->status, res->body};
}

BenchClient::Reply BenchClient::send(const std::string& method, const std::string& path, const std::string& body) const {
  auto client = connect(target_, read_timeout_);
  auto res = method == "GET" ? client->Get(path) : client->Post(path, body, "application/json");
  if (!res) throw HttpError(std::format("{} {} failed: {}", method, path, httplib::to_string(res.error())));
  return {res->status, res->body};
}

nlohmann::json BenchClient::get_json(const std::string& path) const {
  const auto reply = send("GET", path, "");
  if (reply.status != 200) throw HttpError(std::format("GET {} answered {}: {}", path, reply.status, error_message(reply.body)));
  return nlohmann::json::parse(reply.body);
}

nlohmann::json BenchClient::post_json(const std::string& path, const nlohmann::json& body) const {
  const auto reply = send("POST", path, body.dump());
  if (reply.status != 200) throw HttpError(std::format("POST {} answered {}: {}", path, reply.status, error_message(reply.body)));
  return nlohmann::json::parse(reply.body);
}

std::optional<nlohmann::json> BenchClient::cache_stats() const {
  const auto reply = send("GET", "/v1/cache/stats", "");
  if (reply.status == 404) return std::nullopt;
  if (reply.status != 200) {
    throw HttpError(std::format("GET /v1/cache/stats answered {}: {}", reply.status, error_message(reply.body)));
  }
  return nlohmann::json::parse(reply.body);
}

TokenIds BenchClient::tokenize(const std::string& text, bool add_special) const {
  const auto reply = post_json("/tokenize", {{"content", text}, {"add_special", add_special}, {"parse_special", true}});
  return reply.at("tokens").get<TokenIds>();
}

TokenIds BenchClient::chat_prompt_tokens(const nlohmann::json& messages) const {
  const auto rendered = post_json("/apply-template", {{"messages", messages}});
  return tokenize(rendered.at("prompt").get<std::string>(), /*add_special=*/true);
}

}  // namespace prefixd::bench
