// ExecutorOptions: how the executor (runtime/executor.hpp) runs a rank's
// action list, as PipelineOptions carries them. A value type.
#pragma once

namespace hp::runtime {

struct ExecutorOptions {
  // Megatron's deallocate_output_tensor: replace a sent output's storage by
  // one element (the graph stays usable for backward).
  bool pseudo_deallocate = false;
  // Ship every activation and gradient with a shape/dtype meta message, for
  // micro-batches whose shapes (sequence lengths) differ from step to step.
  bool variable_seq_len = false;
  // Activation and gradient receives (RECV_F, RECV_B) posted ahead of where
  // the list has them, in list order, while fewer than this many receives are
  // outstanding. Gloo moves a message's data only once its receive is posted:
  // posted where the data is needed, each message costs a round trip between
  // the two ranks' transport threads just then; posted ahead, the sender writes
  // it at once and it arrives while this rank computes. Each costs its buffer
  // early. 0: each where the list has it.
  int recv_lookahead = 4;
};

}  // namespace hp::runtime
