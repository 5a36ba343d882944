// A Schedule: one ordered action list per physical rank, plus the layout it
// was built for. Generators fill it; validation, the simulator, the renderers
// and the runtime executor only read it. Value type, no threading concerns.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "schedule/action.hpp"

namespace hp::schedule {

// The built-in schedules (their rows: schedule_table.hpp). ZeroBubble1P:
// ZB-H1 at v 1, PyTorch's ScheduleInterleavedZeroBubble at any v;
// ZeroBubbleV: PyTorch's ScheduleZBVZeroBubble, two chunks per rank in V
// placement; DualPipeV: PyTorch's ScheduleDualPipeV (DeepSeek's DualPipeV),
// V placement, MB >= 2 PP, overlapped F&B pairs in its steady phase. All
// three split the backward into BWD_I and BWD_W (action.hpp), DualPipeV only
// in its warm-up and cool-down. A schedule a program registers gets the next
// integer as its kind (register_schedule).
enum class ScheduleKind : int { NoPipelining, GPipe, OneFOneB, Interleaved, MPipe, ZeroBubble1P, ZeroBubbleV, DualPipeV };

// What the schedule table says of a kind (schedule_table.hpp):
bool splits_backward(ScheduleKind k);        // runs backwards as BWD_I then BWD_W
bool placed_in_v(ScheduleKind k);            // two chunks per rank in V placement
std::string_view kind_name(ScheduleKind k);  // "no-pipelining", "gpipe", "1f1b", ...
// The one name parser: a row's name or one of its aliases.
bool kind_from_name(std::string_view name, ScheduleKind* out);
// Every kind's name, comma-separated, for help texts and refusals; and as a list.
std::string kind_names();
std::vector<std::string> kind_name_list();
std::vector<std::string> kind_names_and_aliases();  // every value kind_from_name takes

// Where the stages run. Loop: stage = chunk * pp + rank, so rank r holds
// r, r + pp, ... (Megatron's and PyTorch's interleaving). V: two chunks per
// rank, rank r holding stages r and 2 pp - 1 - r, so rank 0 holds the first
// and the last stage and a micro-batch's forward turns round on rank pp - 1
// without a message (PyTorch's style "v": ZBV, DualPipeV).
enum class Placement { Loop, V };
// A rank's chunk as a global stage under a placement, and the stage's rank.
inline int placed_stage(Placement p, int pp, int rank, int chunk) {
  return p == Placement::V && chunk == 1 ? 2 * pp - 1 - rank : chunk * pp + rank;
}
inline int placed_rank(Placement p, int pp, int stage) {
  return p == Placement::V && stage >= pp ? 2 * pp - 1 - stage : stage % pp;
}

// Owners of the micro-batches beyond the first round (spec section 2):
// "full" round-robin, "min" rank 0 inline; "auto" an explicit owner per
// micro-batch (MPipeOptions::owners), chosen by choose_owners (owner_search.hpp).
enum class Overflow { Full, Min, Auto };

// MPipe Transpose options (spec sections 2-4, DESIGN.md section 2).
struct MPipeOptions {
  int transpose_layers = 1;   // T; 0 = transpose only the data load
  Overflow overflow = Overflow::Full;
  bool owner_backward = false;
  bool frozen_preprocess = false;  // no parameter of the preprocess requires grad
  // Auto only: one entry per micro-batch: r >= 0, rank r transposes it in its
  // prefix (as under full); -1, rank 0 transposes it inline right before
  // FWD(0, m) (as min does the overflow).
  std::vector<int> owners;
  // The pipeline MPipe transposes around (spec section 4 builds it on
  // interleaved 1F1B); OneFOneB or GPipe run one chunk per rank. At v 1
  // OneFOneB keeps fewer activations in flight (rank 0 warms up PP-1 deep,
  // not 2(PP-1)); GPipe runs every forward before any backward. The
  // zero-bubble schedules (zb1p, zbv, dualpipev) keep stage 0 on rank 0 as
  // the others do, so the transposed warm-up is the same around them; the
  // preprocess backward follows stage 0's input backward (B or I).
  ScheduleKind body = ScheduleKind::Interleaved;
};

// Everything a generator needs. Defaults give a small valid interleaved run.
struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::Interleaved;
  int pp = 4;           // physical ranks
  int vpp = 1;          // chunks (virtual stages) per rank
  int micro_batches = 8;
  int group_size = 0;   // G, micro-batch group size per virtual stage; 0 = default (below)
  int layers = 0;       // model layers split evenly over pp*vpp chunks; 0 = unknown
  MPipeOptions mpipe;
  // Forwards only (evaluation, generation; Megatron's forward_only): each
  // rank runs its forwards in the schedule's order and nothing else of the
  // backward (no BWD, no gradient messages; under MPipe no graph shipping,
  // preprocess backward or gradient reduce).
  bool forward_only = false;

  int num_stages() const { return pp * vpp; }
  // The schedule's placement (its body's under MPipe): V for zbv and dualpipev, else Loop.
  Placement placement() const {
    return placed_in_v(kind == ScheduleKind::MPipe ? mpipe.body : kind) ? Placement::V : Placement::Loop;
  }
  // A rank's chunk as a global stage, and back; every stage-to-rank question
  // of the engine and the runtime goes through these three.
  int stage_of(int rank, int chunk) const { return placed_stage(placement(), pp, rank, chunk); }
  int rank_of(int stage) const { return placed_rank(placement(), pp, stage); }
  int chunk_of(int stage) const { return stage / pp; }
  // G as the interleaved schedule uses it. The default is PP; when MB > PP is
  // not a multiple of PP it is the smallest G > PP whose last group is empty
  // or holds at least PP micro-batches (Megatron's condition: a shorter last
  // group deadlocks the interleaved pipeline), e.g. MB 10 over PP 4 gives 5,
  // torch.distributed.pipelining's per-round size.
  int effective_group_size() const {
    if (group_size > 0) return group_size;
    // Fewer micro-batches than ranks: one round of all of them (the per-round
    // layout of PyTorch's ScheduleInterleaved1F1B), so no rank warms up on a
    // micro-batch that does not exist.
    if (micro_batches < pp) return micro_batches;
    int g = pp;
    while (g < micro_batches && micro_batches % g != 0 && micro_batches % g < pp) ++g;
    return g;
  }
  // T as the schedule runs it: mpipe.transpose_layers under MPipe, else 0.
  int transposed_layers() const { return kind == ScheduleKind::MPipe ? mpipe.transpose_layers : 0; }
  // NT = min(PP, MB): micro-batches transposed in the first round.
  int nt() const { return pp < micro_batches ? pp : micro_batches; }
};

// The chunks per rank a schedule runs when the user names none (its row's,
// its body's under MPipe): 2 for interleaved 1F1B, zbv, dualpipev and MPipe
// over them; 1 for every other built-in schedule and body.
int default_vpp(const ScheduleOptions& o);

struct Schedule {
  ScheduleOptions options;  // the layout; for a schedule read from CSV, inferred
  std::vector<std::vector<Action>> ranks;

  int pp() const { return static_cast<int>(ranks.size()); }
  int num_stages() const { return options.num_stages(); }
  int stage_rank(int stage) const { return options.rank_of(stage); }
  int stage_chunk(int stage) const { return options.chunk_of(stage); }
};

// Whether MPipe transposes around the kind (its row's mpipe_body), and those
// kinds' names, comma-separated.
bool is_mpipe_body(ScheduleKind k);
std::string mpipe_body_names();
std::vector<std::string> mpipe_body_name_list();

// Owner rank of micro m's preprocess forward under MPipe (spec section 2):
// "full": m % NT; "min": m for m < NT, rank 0 for the overflow; "auto": owners[m].
int mpipe_owner(const ScheduleOptions& o, int micro);
// "full", "min", "auto".
const char* overflow_name(Overflow overflow);
std::vector<std::string> overflow_name_list();

// Whether rank 0 transposes micro m inline, right before FWD(0, m), rather
// than in its prefix: min's overflow, and auto's owners of -1.
bool mpipe_inline_on_rank0(const ScheduleOptions& o, int micro);

}  // namespace hp::schedule
