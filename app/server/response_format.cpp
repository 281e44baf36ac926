// response_format: the OpenAI shapes checked, the schema compiled by sampling::json_schema_grammar.
#include "app/server/response_format.h"

#include <string>
#include <vector>

#include "core/sampling/json_schema_grammar.h"

namespace kvc::server {

namespace {

// The member, or null when `o` is not an object or lacks it (JSON null counts as absent).
const nlohmann::json* member(const nlohmann::json& o, const char* name) {
  if (!o.is_object()) return nullptr;
  const auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

// `text` as grammar pieces: the control tokens the tokenizer finds in it, and the text between.
std::vector<sampling::GrammarPiece> pieces_of(std::string_view text, const tokenizer::Tokenizer& tok) {
  std::vector<sampling::GrammarPiece> out;
  size_t pos = 0;
  for (const int32_t id : tok.encode_continuation(text, /*parse_special=*/true)) {
    if (!tok.is_control(id)) continue;
    const std::string_view spelled = tok.piece(id);
    const size_t at = text.find(spelled, pos);
    if (spelled.empty() || at == std::string_view::npos) continue;
    if (at > pos) out.push_back({std::string(text.substr(pos, at - pos)), -1});
    out.push_back({"", id});
    pos = at + spelled.size();
  }
  if (pos < text.size()) out.push_back({std::string(text.substr(pos)), -1});
  return out;
}

}  // namespace

Result<std::shared_ptr<const sampling::Grammar>> tool_call_grammar(const chat::ToolConstraints& constraints,
                                                                   const tokenizer::Tokenizer& tok) {
  std::vector<sampling::FramedSchema> alternatives;
  bool ends_generation = false;
  for (const chat::ToolConstraint& c : constraints.alternatives) {
    std::vector<sampling::GrammarPiece> suffix = pieces_of(c.suffix, tok);
    // A call closed by an end-of-generation token (harmony's <|call|>): the grammar ends before
    // it, and the sampler allows end tokens only once the grammar is complete, so the reply ends
    // right after the call (the matcher never takes an end token as a grammar element).
    if (!suffix.empty() && suffix.back().special_token >= 0 && tok.is_end_of_generation(suffix.back().special_token)) {
      suffix.pop_back();
      ends_generation = true;
    }
    alternatives.push_back({pieces_of(c.prefix, tok), c.schema_json, std::move(suffix)});
  }
  const std::vector<sampling::GrammarPiece> separator = pieces_of(constraints.separator, tok);
  // Nothing follows an end token: one call (harmony's parallel calls are separate replies).
  return sampling::json_schema_choice_grammar(alternatives, constraints.repeat && !ends_generation, separator);
}

std::optional<ApiError> read_response_format(const nlohmann::json& body,
                                             std::shared_ptr<const sampling::Grammar>& grammar) {
  grammar.reset();
  const nlohmann::json* format = member(body, "response_format");
  if (!format) return std::nullopt;
  const char* param = "response_format";
  const nlohmann::json* type = member(*format, "type");
  if (!type || !type->is_string())
    return bad_request("response_format must be an object with a string \"type\"", param);
  const std::string t = type->get<std::string>();
  if (t == "text") return std::nullopt;
  if (t == "json_object") {
    grammar = sampling::json_object_grammar();
    return std::nullopt;
  }
  if (t != "json_schema") {
    return bad_request("response_format.type must be \"text\", \"json_object\" or \"json_schema\", not \"" + t + "\"",
                       param);
  }
  const nlohmann::json* spec = member(*format, "json_schema");
  if (!spec || !spec->is_object()) {
    return bad_request("response_format.json_schema must be an object with name and schema", param);
  }
  const nlohmann::json* schema = member(*spec, "schema");
  if (!schema || !(schema->is_object() || schema->is_boolean())) {
    return bad_request("response_format.json_schema.schema must be a JSON Schema object", param);
  }
  auto g = sampling::json_schema_grammar(schema->dump());
  if (!g.ok()) return bad_request("response_format.json_schema: " + g.error().message, param);
  grammar = *g;
  return std::nullopt;
}

}  // namespace kvc::server
