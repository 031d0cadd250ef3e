#include "api/prompt/template_coverage.h"

#include <format>

#include <spdlog/spdlog.h>

namespace prefixd::api {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kContentProbe = "PREFIXDCONTENTPROBE";
constexpr std::string_view kNameProbe = "PREFIXDNAMEPROBE";
constexpr const char* kRoles[] = {"system", "user", "assistant", "tool"};

// The smallest ordinary conversation in which a message of `role` appears, that message last but
// for a system one (which templates expect first, followed by a user turn).
ordered_json probe_conversation(std::string_view role, ordered_json message) {
  const ordered_json user = {{"role", "user"}, {"content", "Hi"}};
  if (role == "system") return ordered_json::array({std::move(message), user});
  if (role == "user") return ordered_json::array({std::move(message)});
  if (role == "assistant") return ordered_json::array({user, std::move(message)});
  const ordered_json call = {{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "probe_tool"}, {"arguments", "{}"}}}};
  const ordered_json caller = {{"role", "assistant"}, {"content", ""}, {"tool_calls", ordered_json::array({call})}};
  message["tool_call_id"] = "call_1";
  return ordered_json::array({user, caller, std::move(message)});
}

// False only when the template rendered the probe and `needle` is not in it.
bool renders(const ChatTemplate& chat_template, ordered_json messages, std::string_view needle) {
  ChatInput input;
  input.messages = std::move(messages);
  const auto text = chat_template.render(input);
  return !text || text->find(needle) != std::string::npos;
}

bool lookup(const std::map<std::string, bool, std::less<>>& table, std::string_view role) {
  const auto it = table.find(role);
  return it == table.end() || it->second;
}

}  // namespace

TemplateCoverage::TemplateCoverage(const ChatTemplate& chat_template) {
  for (const char* role : kRoles) {
    content_[role] = renders(chat_template, probe_conversation(role, {{"role", role}, {"content", kContentProbe}}),
                             kContentProbe);
    if (std::string_view(role) == "tool") continue;
    name_[role] = renders(chat_template,
                          probe_conversation(role, {{"role", role}, {"content", "Hi"}, {"name", kNameProbe}}), kNameProbe);
  }
}

bool TemplateCoverage::renders_content(std::string_view role) const { return lookup(content_, role); }

bool TemplateCoverage::renders_name(std::string_view role) const { return role == "tool" || lookup(name_, role); }

std::optional<ApiError> TemplateCoverage::check(const ordered_json& messages) const {
  if (!messages.is_array()) return std::nullopt;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ordered_json& message = messages[i];
    if (!message.is_object()) continue;
    const std::string role = message.value("role", "");
    if (!renders_content(role)) {
      return invalid_param(std::format("messages[{}].role", i),
                           std::format("the model's chat template does not render '{}' messages: messages[{}] would be "
                                       "dropped from the prompt",
                                       role, i));
    }
    // OpenAI accepts `name` on every message and multi-agent frameworks send it; a template that
    // has no place for it leaves it out, as other servers do, and the log says so.
    const auto name = message.find("name");
    if (name != message.end() && name->is_string() && !name->get_ref<const std::string&>().empty() &&
        !renders_name(role)) {
      spdlog::debug("messages[{}].name: the chat template does not render names on '{}' messages; left out", i, role);
    }
  }
  return std::nullopt;
}

}  // namespace prefixd::api
