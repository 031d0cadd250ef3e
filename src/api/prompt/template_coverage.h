// prefixd api — what of a message a chat template actually renders.
//
// A template is a program: it may render a role's content, skip that role altogether, or ignore a
// message's `name`. Anything it skips would be dropped without a word, so TemplateCoverage renders
// a few probe conversations once, when the server starts, and remembers which roles' content and
// which roles' names reach the prompt text. A probe the template refuses to render (it raises on
// that shape of conversation) proves nothing, and the role is then taken as rendered: only a
// probe that renders without the probe's text counts as a drop.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/prompt/chat_template.h"
#include "api/errors.h"

namespace prefixd::api {

class TemplateCoverage {
 public:
  explicit TemplateCoverage(const ChatTemplate& chat_template);

  // Whether the content of a `role` message reaches the prompt (system, user, assistant, tool).
  bool renders_content(std::string_view role) const;
  // Whether a `name` on a `role` message reaches the prompt.
  bool renders_name(std::string_view role) const;

  // The 400 for the first message the template would drop silently: one of a role whose content
  // it never renders (`messages[i].role`). `messages` has been through the request parser (known
  // roles only). A `name` the template cannot express is not refused: OpenAI accepts it on every
  // message, and it is left out of the prompt (logged at debug level).
  std::optional<ApiError> check(const nlohmann::ordered_json& messages) const;

 private:
  std::map<std::string, bool, std::less<>> content_;
  std::map<std::string, bool, std::less<>> name_;
};

}  // namespace prefixd::api
