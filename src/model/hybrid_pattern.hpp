// HybridPattern: the layer layout of a Hybrid model, from a pattern string as
// Megatron-LM's hybrid models take it:
//   M  a Mamba-style selective state-space mixer     *  causal self-attention
//   -  an MLP                                         E  a mixture-of-experts MLP
//   |  a pipeline segment boundary                    /  starts a multi-token-prediction part
// e.g. "M*-|ME-|M*-|E-" (four pipeline segments), "M*-E/*-/*-" (two MTP depths
// of "*-" each). Decoder layers are numbered 0.. across the segments.
//
// Segments: with `|`, segment s is global stage s = vp_stage * PP + pp_rank
// and their count must be PP * v; empty segments are allowed (a stage with no
// layer). With PP * v = 1 the boundaries are ignored, so one pattern is also
// its own single-process reference. Without `|`, the layers are split evenly
// (the first stages get the remainder).
//
// MTP: every `/`-separated part after the decoder must be the same symbols;
// their count is the MTP depth. Free of LibTorch.
#pragma once

#include <string>
#include <vector>

namespace hp::model {

enum class LayerKind : char { Mamba = 'M', Attention = '*', MLP = '-', MoE = 'E' };

struct HybridPattern {
  std::vector<LayerKind> layers;         // the decoder, in order
  std::vector<int> segment_sizes;        // layers per `|` segment; one entry without `|`
  std::vector<LayerKind> mtp_layers;     // the layers of one MTP depth
  int mtp_depth = 0;

  // Throws std::invalid_argument naming model.hybrid_pattern and what is
  // wrong: an unknown symbol (listing the accepted ones), MTP parts that
  // differ, an empty MTP part, `|` inside the MTP part.
  static HybridPattern parse(const std::string& pattern);

  // Layers per global stage for pp * vpp stages (see above). Throws
  // std::invalid_argument when the segment count is neither 1 nor pp * vpp, or
  // the decoder has fewer layers than stages without explicit segments.
  std::vector<int> stage_layer_counts(int pp, int vpp) const;
};

}  // namespace hp::model
