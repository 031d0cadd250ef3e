// prefixd bench — a chat transcript under construction, with the prompt size it will have.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace prefixd::bench {

class Transcript {
 public:
  // ChatML spends about five tokens per message on its markers and three on the generation
  // prompt; the estimate only sizes the context, the servers report the real count.
  static constexpr int kPerMessage = 5;
  static constexpr int kGenerationPrompt = 3;

  void add(const std::string& role, std::string content, int content_tokens) {
    messages_.push_back({{"role", role}, {"content", std::move(content)}});
    tokens_ += content_tokens + kPerMessage;
  }
  const nlohmann::json& messages() const { return messages_; }
  int planned_tokens() const { return tokens_ + kGenerationPrompt; }

 private:
  nlohmann::json messages_ = nlohmann::json::array();
  int tokens_ = 0;
};

}  // namespace prefixd::bench
