// The options of a command that runs as a job of ranks (train, verify, bench,
// generate): how many local ranks to start, and how long a silent peer may be.
#pragma once

#include <string>

namespace hp::cli {

struct JobOptions {
  int nproc = 4;             // --nproc (--nproc-per-node): local ranks when not already a rank
  // Several hosts, as torchrun names them (launch/launcher.hpp): this node's
  // launcher starts its --nproc ranks of nnodes x nproc.
  int nnodes = 1;                        // --nnodes
  int node_rank = 0;                     // --node-rank
  std::string master_addr = "127.0.0.1"; // --master-addr: node 0's address
  int master_port = 0;                   // --master-port: 0 = a free one (one node only)
  bool nproc_given = false;  // as a rank, a given --nproc must equal WORLD_SIZE
  double timeout_s = 300;    // --timeout: every collective and P2P operation
  int max_restarts = 0;      // --max-restarts: group restarts after a rank fails (train)
  double rendezvous_timeout_s = 600;  // --rendezvous-timeout: launchers wait for each other (--nnodes)
};

}  // namespace hp::cli
