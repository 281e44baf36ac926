// JSON Schema → Grammar: the strict subset OpenAI's structured outputs allow, compiled to a
// byte-level grammar whose every complete match is JSON that validates against the schema.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/sampling/grammar.h"
#include "core/util/result.h"

namespace kvc::sampling {

// Text around the JSON: literal bytes, or one special token by id (e.g. Qwen's <tool_call>).
struct GrammarPiece {
  std::string text;
  int32_t special_token = -1;  // >= 0: this token instead of text
};

// Supported: type (string, number, integer, boolean, null, object, array, or an array of them),
// properties / required / additionalProperties (false, or a schema when there are no
// properties), items / minItems / maxItems / prefixItems, enum, const, anyOf, $ref to "#",
// "#/$defs/..." or "#/definitions/..." (recursion included), minLength / maxLength, simple
// patterns (anchored sequences of literals, classes, ., \d, \w, \s with ?, *, +, {m,n}), minimum
// 0 / exclusiveMinimum -1 on numbers, and annotations (title, description, default, examples,
// $schema, $id, strict). Properties come in the schema's order. Between tokens at most one space.
// Anything else: ErrorCode::unsupported naming the keyword and where it is
// ("json schema: keyword \"oneOf\" at /properties/a is not supported"); invalid_argument for
// text that is not JSON or a schema that is not an object.
Result<std::shared_ptr<const Grammar>> json_schema_grammar(std::string_view schema_json,
                                                           std::span<const GrammarPiece> prefix = {},
                                                           std::span<const GrammarPiece> suffix = {});

// One way a constrained output may go: prefix, JSON the schema allows, suffix.
struct FramedSchema {
  std::vector<GrammarPiece> prefix;
  std::string schema_json;
  std::vector<GrammarPiece> suffix;
};

// Output that is one of `alternatives` (a forced tool call: one per function the model may call),
// and with `repeat`, any number more after `separator` each (parallel calls). Errors as
// json_schema_grammar's.
Result<std::shared_ptr<const Grammar>> json_schema_choice_grammar(std::span<const FramedSchema> alternatives,
                                                                  bool repeat = false,
                                                                  std::span<const GrammarPiece> separator = {});

// Any JSON object (response_format json_object).
std::shared_ptr<const Grammar> json_object_grammar();

}  // namespace kvc::sampling
