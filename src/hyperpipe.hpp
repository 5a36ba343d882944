// hyperpipe's public API in one include: <hyperpipe/hyperpipe.hpp>. What a
// program needs to pipeline its own model (runtime/pipeline.hpp: stages, the
// Pipeline that runs a schedule over them), to lay out and simulate schedules
// (schedule/), to talk over the job's process group (comm/), and to add a
// model family (family/model_family.hpp) or a schedule (schedule_table.hpp)
// of its own. Every header here is installed (cmake/public_headers.txt),
// none includes <torch/torch.h>, and the types they name are declared in
// installed headers, but for the VL and Hybrid configs FamilyOptions points
// at (their options are to move beside their families).
#pragma once

#include "comm/comm_error.hpp"
#include "comm/dist_env.hpp"
#include "comm/p2p.hpp"
#include "comm/process_group.hpp"
#include "comm/work.hpp"
#include "schedule/action.hpp"
#include "schedule/advise.hpp"
#include "schedule/schedule.hpp"
#include "schedule/schedule_table.hpp"
#include "schedule/simulate.hpp"
#include "runtime/executor.hpp"
#include "runtime/executor_options.hpp"
#include "runtime/microbatch.hpp"
#include "runtime/module_stage.hpp"
#include "runtime/pipeline.hpp"
#include "runtime/pipeline_stage.hpp"
#include "runtime/rank_model.hpp"
#include "runtime/tensor_shard.hpp"
#include "model/transformer_config.hpp"
#include "train/adamw.hpp"
#include "train/checkpoint.hpp"
#include "train/memory_estimate.hpp"
#include "train/named_params.hpp"
#include "train/task.hpp"
#include "infer/decode_model.hpp"
#include "family/model_family.hpp"
