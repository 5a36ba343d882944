// --data's Megatron forms and --split (Megatron's --data-path and --split):
//   PREFIX                       an indexed dataset (PREFIX.bin + PREFIX.idx)
//   "W1 PREFIX1 W2 PREFIX2 ..."  a weighted blend of them (weights > 0)
// --split "969,30,1" (the default) divides each dataset's documents into
// train, validation and test parts in proportion (Megatron's
// get_split_indices); the blend's weights apply to each part alike.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "data/corpus.hpp"

namespace hp::data {

inline constexpr const char* kDefaultSplit = "969,30,1";

// True for a blend (text with blanks) or an existing indexed-dataset prefix.
bool is_megatron_data(const std::string& spec);

// The document boundaries {0, a, b, documents} of the train [0, a),
// validation [a, b) and test [b, documents) parts, as Megatron computes them:
// weights normalised, each part round(weight x documents) (half to even), the
// surplus taken from the ends. Throws std::invalid_argument naming data.split.
std::array<std::size_t, 4> split_documents(const std::string& split, std::size_t documents);

// The train, validation and test corpora of GPT samples of seq_len + 1
// tokens; a held-out part that no dataset has a sample's worth of documents
// in is null (the train part never: that throws). Throws std::invalid_argument naming data.data or data.split.
std::array<std::shared_ptr<const SampledCorpus>, 3> open_megatron_data(const std::string& spec,
                                                                       const std::string& split, int seq_len);

}  // namespace hp::data
