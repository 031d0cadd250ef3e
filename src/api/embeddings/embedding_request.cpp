#include "api/embeddings/embedding_request.h"

#include <format>
#include <utility>

#include "api/body/common_fields.h"
#include "api/body/field_reader.h"

namespace prefixd::api {
namespace {

using fields::FieldReader;
using fields::ordered_json;
using fields::reject;

TokenPrompt read_token_ids(const ordered_json& ids, const std::string& param, std::int32_t vocab_size) {
  TokenPrompt tokens;
  tokens.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::string at = std::format("{}[{}]", param, i);
    const std::int64_t hi = vocab_size > 0 ? vocab_size - 1 : fields::kInt32Max;
    tokens.push_back(static_cast<engine::Token>(FieldReader::to_integer(ids[i], at, 0, hi)));
  }
  return tokens;
}

// The inputs of `value`: one text, one list of ids, or a list of texts and id lists.
std::vector<std::variant<std::string, TokenPrompt>> read_inputs(const ordered_json& value, const std::string& param,
                                                                std::int32_t vocab_size) {
  std::vector<std::variant<std::string, TokenPrompt>> inputs;
  if (value.is_string()) {
    inputs.emplace_back(value.get<std::string>());
    return inputs;
  }
  if (!value.is_array() || value.empty()) {
    reject(param, std::format("'{}' must be a string or a non-empty array of strings or token ids", param));
  }
  if (value.front().is_number()) {
    inputs.emplace_back(read_token_ids(value, param, vocab_size));
    return inputs;
  }
  if (value.size() > kMaxEmbeddingInputs) {
    reject(param, std::format("'{}' holds {} inputs; at most {} are taken in one request", param, value.size(),
                              kMaxEmbeddingInputs));
  }
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string at = std::format("{}[{}]", param, i);
    const ordered_json& item = value[i];
    if (item.is_string()) {
      inputs.emplace_back(item.get<std::string>());
    } else if (item.is_array() && !item.empty()) {
      inputs.emplace_back(read_token_ids(item, at, vocab_size));
    } else {
      reject(at, std::format("'{}' must be a string or a non-empty array of token ids", at));
    }
  }
  return inputs;
}

}  // namespace

std::expected<EmbeddingsRequest, ApiError> parse_embeddings_request(std::string_view body, const ParseOptions& options,
                                                                    EmbeddingsEndpoint endpoint,
                                                                    std::int32_t default_normalize) {
  auto root = parse_json_object(body, options.max_json_nodes);
  if (!root) return std::unexpected(root.error());
  return fields::guarded([&] {
    const FieldReader in(*root);
    fields::check_served_model(in, options.model_names, /*required=*/false);
    EmbeddingsRequest request;
    request.param = "input";
    const ordered_json* input = in.find("input");
    if (input == nullptr && endpoint == EmbeddingsEndpoint::native && in.find("content") != nullptr) {
      request.param = "content";
      input = in.find("content");
    }
    if (input == nullptr) {
      reject(request.param, endpoint == EmbeddingsEndpoint::native ? "'input' (or 'content') is required"
                                                                    : "'input' is required");
    }
    request.inputs = read_inputs(*input, request.param, options.vocab_size);
    if (const auto format = in.string("encoding_format")) {
      if (*format != "float" && *format != "base64") {
        reject("encoding_format", std::format("'encoding_format' must be \"float\" or \"base64\", not \"{}\"", *format));
      }
      request.base64 = *format == "base64";
    }
    request.dimensions = in.integer("dimensions", 1, fields::kInt32Max);
    request.normalize = static_cast<std::int32_t>(in.integer("embd_normalize", -1, 1 << 20).value_or(default_normalize));
    request.cache = fields::read_cache_fields(in, options.cache_prompt_default, in.string("user"));
    return request;
  });
}

std::expected<RerankRequest, ApiError> parse_rerank_request(std::string_view body, const ParseOptions& options) {
  auto root = parse_json_object(body, options.max_json_nodes);
  if (!root) return std::unexpected(root.error());
  return fields::guarded([&] {
    const FieldReader in(*root);
    fields::check_served_model(in, options.model_names, /*required=*/false);
    RerankRequest request;
    const auto query = in.string("query");
    if (!query) reject("query", "'query' is required: the text the documents are ranked against");
    request.query = *query;
    const ordered_json* documents = in.find("documents");
    std::string param = "documents";
    if (documents == nullptr && in.find("texts") != nullptr) {
      documents = in.find("texts");
      param = "texts";
      request.tei = true;
    }
    if (documents == nullptr) reject("documents", "'documents' is required: the texts to rank");
    if (!documents->is_array() || documents->empty()) {
      reject(param, std::format("'{}' must be a non-empty array of strings", param));
    }
    if (documents->size() > kMaxEmbeddingInputs) {
      reject(param, std::format("'{}' holds {} documents; at most {} are ranked in one request", param,
                                documents->size(), kMaxEmbeddingInputs));
    }
    for (std::size_t i = 0; i < documents->size(); ++i) {
      const ordered_json& item = (*documents)[i];
      const std::string at = std::format("{}[{}]", param, i);
      if (item.is_string()) {
        request.documents.push_back(item.get<std::string>());
      } else if (item.is_object() && item.contains("text") && item.at("text").is_string()) {
        request.documents.push_back(item.at("text").get<std::string>());  // Cohere's {"text": ...}
      } else {
        reject(at, std::format("'{}' must be a string (or an object with a string 'text')", at));
      }
    }
    if (const auto n = in.integer("top_n", 1, fields::kInt32Max)) request.top_n = static_cast<std::size_t>(*n);
    request.return_documents = in.boolean(request.tei ? "return_text" : "return_documents").value_or(false);
    request.sort = in.boolean("sort").value_or(true);
    request.cache = fields::read_cache_fields(in, options.cache_prompt_default, in.string("user"));
    return request;
  });
}

}  // namespace prefixd::api
