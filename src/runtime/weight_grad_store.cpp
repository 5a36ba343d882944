#include "runtime/weight_grad_store.hpp"

#include <utility>

namespace hp::runtime {
namespace {
thread_local WeightGradWork* current = nullptr;
}  // namespace

DeferWeightGrads::DeferWeightGrads(WeightGradWork* into) : previous_(current) { current = into; }

DeferWeightGrads::~DeferWeightGrads() { current = previous_; }

bool defer_weight_grad(std::function<void()> work) {
  if (!current) return false;
  current->push_back(std::move(work));
  return true;
}

}  // namespace hp::runtime
