#include "api/prompt/cache_namespace.h"

#include <array>
#include <cstdint>

#include <blake3.h>
#include <xxhash.h>

namespace prefixd::api {
namespace {

// Incremental BLAKE3 over a domain separator and length-prefixed fields.
class FieldHasher {
 public:
  explicit FieldHasher(std::string_view domain) {
    blake3_hasher_init(&hasher_);
    field(domain);
  }

  FieldHasher& field(std::string_view bytes) {
    // Little-endian u64 length, written byte by byte so the encoding does not depend on the host.
    std::array<std::uint8_t, 8> length{};
    auto n = static_cast<std::uint64_t>(bytes.size());
    for (auto& b : length) {
      b = static_cast<std::uint8_t>(n & 0xFF);
      n >>= 8;
    }
    blake3_hasher_update(&hasher_, length.data(), length.size());
    blake3_hasher_update(&hasher_, bytes.data(), bytes.size());
    return *this;
  }

  std::string finish() const {
    std::string out(BLAKE3_OUT_LEN, '\0');
    blake3_hasher_finalize(&hasher_, reinterpret_cast<std::uint8_t*>(out.data()), out.size());
    return out;
  }

 private:
  blake3_hasher hasher_;
};

// The value as the template sees it: compact, keys in the order sent (which the template keeps).
// Null, absent, {} and [] are the same thing to a template, so they share one encoding.
std::string canonical(const nlohmann::ordered_json& value) {
  if (value.is_null() || ((value.is_object() || value.is_array()) && value.empty())) return {};
  return value.dump();
}

std::uint64_t digest64(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace

std::string field_digest(std::string_view domain, std::initializer_list<std::string_view> fields) {
  FieldHasher hasher(domain);
  for (std::string_view f : fields) hasher.field(f);
  return hasher.finish();
}

std::string namespace_digest(const NamespaceFields& fields) {
  // v3: the template signature left the namespace (DESIGN.md, "Namespace").
  return FieldHasher("prefixd.namespace.v3")
      .field(fields.model_id)
      .field(fields.lora_id)
      .field(fields.runtime_signature)
      .field(fields.multimodal_digest)
      .field(fields.tenant)
      .field(fields.cache_salt ? "present" : "absent")
      .field(fields.cache_salt.value_or(""))
      .finish();
}

std::vector<std::pair<std::string, std::uint64_t>> template_inputs(std::string_view template_source,
                                                                   const nlohmann::ordered_json& chat_template_kwargs,
                                                                   const nlohmann::ordered_json& tool_choice,
                                                                   const nlohmann::ordered_json& tools) {
  return {{"chat_template", digest64(template_source)},
          {"chat_template_kwargs", digest64(canonical(chat_template_kwargs))},
          {"tools", digest64(canonical(tools))},
          {"tool_choice", digest64(canonical(tool_choice))}};
}

std::vector<std::pair<std::string, std::uint64_t>> raw_completion_inputs() {
  return {{"chat_template", digest64("prefixd.raw-completion")}};
}


}  // namespace prefixd::api
