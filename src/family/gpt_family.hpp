// The GPT family (--model gpt): train::GptTask on a token source, decoded by
// infer's GPT decode model from byte prompts.
#pragma once

#include "family/model_family.hpp"

namespace hp::family {

ModelFamily gpt_family();

// What every family but VL refuses: the tower's options.
void refuse_vision(const FamilyOptions& o, const std::string& family);

}  // namespace hp::family
