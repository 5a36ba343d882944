// The options of a command that runs as a job of ranks (train, verify, bench,
// generate): how many local ranks to start, and how long a silent peer may be.
#pragma once

namespace hp::cli {

struct JobOptions {
  int nproc = 4;             // --nproc: local ranks when not already a rank
  bool nproc_given = false;  // as a rank, a given --nproc must equal WORLD_SIZE
  double timeout_s = 300;    // --timeout: every collective and P2P operation
  int max_restarts = 0;      // --max-restarts: group restarts after a rank fails (train)
};

}  // namespace hp::cli
