// The hyperpipe binary as a user runs it: bad input fails fast with one clear
// line naming the option; plan's outputs are consistent with each other.
#include <gtest/gtest.h>

#include <regex>

#include <fstream>
#include <iterator>
#include <unistd.h>

#include "in_process.hpp"
#include "run_command.hpp"

namespace hp::testing {
namespace {

// A refusal before any rank starts, run in this process (in_process.hpp).
void expect_error(const std::string& args, const std::string& needle) {
  const auto r = run_in_process(args);
  EXPECT_NE(r.exit_code, 0) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
  // Nothing was launched: no rank printed anything.
  EXPECT_EQ(r.output.find("[rank"), std::string::npos) << args << "\n" << r.output;
  // Lower layers' option names reach the user as this command's flags.
  static const std::regex option_name(R"(\b(schedule|model|train|data|vision|costs|profile|launch)\.[a-z])");
  EXPECT_FALSE(std::regex_search(r.output, option_name)) << args << "\n" << r.output;
}

TEST(PlanCli, BadInputSaysWhatIsWrongAndWhatIsAllowed) {
  expect_error("plan --pp 0", "--pp");
  expect_error("plan --mb 0", "--mb");
  expect_error("plan --vpp 0", "--vpp");
  expect_error("plan --schedule zigzag", "--schedule: must be one of no-pipelining, gpipe, 1f1b, interleaved, mpipe");
  expect_error("plan --schedule mpipe --overflow most", "--overflow: must be one of full, min, auto, got 'most'");
  expect_error("plan --schedule mpipe --pp 4 --vpp 1 --layers 8 --transpose-layers 2", "--transpose-layers");
  expect_error("plan --schedule mpipe --pp 1 --vpp 1", "MPipe Transpose needs --pp >= 2");
  expect_error("plan --schedule mpipe --mpipe-body zigzag",
               "--mpipe-body: must be one of gpipe, 1f1b, interleaved, zb1p, zbv, dualpipev, got 'zigzag'");
  expect_error("plan --schedule mpipe --mpipe-body 1f1b --vpp 2",
               "--mpipe-body 1f1b runs one chunk per rank: use --vpp 1, or --mpipe-body interleaved for --vpp > 1");
  expect_error("plan --schedule no-pipelining --pp 2", "use --pp 1 --vpp 1");
  expect_error("plan --from-csv /nonexistent.csv", "/nonexistent.csv");
  const std::string dir = fresh_dir("badcsv");
  run_command("printf '0,0F0,0B0\\n1,1F0,1BOGUS\\n' > " + dir + "/bad.csv");
  expect_error("plan --from-csv " + dir + "/bad.csv", "1BOGUS");
  run_command("printf '0,0F0,0SEND_F0@1,0B0\\n1,1F0,1B0,1SEND_B0@0\\n' > " + dir + "/unmatched.csv");
  expect_error("plan --from-csv " + dir + "/unmatched.csv", "rank 1");
  // Rank 0 waits for a gradient before it sends the forward that makes it: the
  // reason is on the error's first line.
  run_command("printf '0,0F0,0RECV_B0@1,0B0,0SEND_F0@1\\n1,1RECV_F0@0,1F0,1B0,1SEND_B0@0\\n' > " + dir +
              "/deadlock.csv");
  const auto deadlock = run_in_process("plan --from-csv " + dir + "/deadlock.csv");
  EXPECT_NE(deadlock.exit_code, 0) << deadlock.output;
  const std::string first = deadlock.output.substr(0, deadlock.output.find('\n'));
  EXPECT_NE(first.find("the schedule is invalid: rank "), std::string::npos) << deadlock.output;
  EXPECT_NE(first.find("deadlock"), std::string::npos) << deadlock.output;
}

// What a bad-input campaign still found (issue 32, part 8): each refused in
// one line naming the flag the user typed, before anything starts.
TEST(Cli, TheCampaignsLeftoversAreRefusedInOneLine) {
  expect_error("launch --nproc 0 -- true", "--nproc: must be in [1, 1024], got '0'");
  expect_error("launch --nproc 2 --master-port 70000 -- true", "--master-port: must be in [0, 65535], got '70000'");
  expect_error("bench --schedules ''", "--schedules names no schedule; give one or more, comma-separated");
  expect_error("plan --schedule 1f1b --pp 4 --mb 8 --simulate --stage-cost 9:1:1",
               "--stage-cost: stage 9 is beyond the schedule's 4 stages (0..3)");
  const std::string dir = fresh_dir("campaign");
  run_command("printf 'mb = [2, 4]\n' > " + dir + "/array.toml");
  expect_error("plan --config " + dir + "/array.toml", "key 'mb' is an array of 2 values, but --mb takes one value");
  run_command("printf 'config = \"x.toml\"\n' > " + dir + "/nested.toml");
  expect_error("plan --config " + dir + "/nested.toml", "key 'config': a config file cannot name another");
  // A key the command has no flag for (train's depth is --nproc; plan's is --pp).
  run_command("printf 'pp = 4\n' > " + dir + "/pp.toml");
  expect_error("train --config " + dir + "/pp.toml", "key 'pp' is not a flag of hyperpipe train");
  // An array stays right for a flag that repeats.
  run_command("printf 'stage-cost = [\"0:1:2\", \"1:3:6\"]\n' > " + dir + "/costs.toml");
  const auto costs = run_command(hyperpipe() + " plan --schedule 1f1b --pp 2 --mb 1 --config " + dir +
                                 "/costs.toml --simulate --format json");
  EXPECT_EQ(costs.exit_code, 0) << costs.output;
  EXPECT_NE(costs.output.find("\"step_time\": 12.0"), std::string::npos) << costs.output;
  expect_error("train --data text:/proc/self/mem", "--data /proc/self/mem: reading the text file failed");
  expect_error("train --schedule zbv --vpp 3",
               "--schedule zbv runs two chunks per rank in V placement (rank r holds stages r and 2 x --nproc - 1 - r): "
               "use --vpp 2 (got --vpp 3)");
  expect_error("train --schedule dualpipev --nproc 4 --mb 6",
               "--schedule dualpipev needs --mb >= 2 x --nproc = 8 (one per stage; got --mb 6); use more micro-batches, "
               "or --schedule zbv, which takes any");
}

TEST(PlanCli, DataParallelPrintsTheMesh) {
  const auto r = run_command(hyperpipe() + " plan --schedule 1f1b --pp 2 --mb 2 --dp 2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"mesh: tp 1 x cp 1 x dp 2 x pp 2 = 4 ranks", "pp group 0: ranks 0 2", "pp group 1: ranks 1 3",
                           "dp group 0: ranks 0 1", "dp group 1: ranks 2 3"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  expect_error("plan --dp 0", "--dp: must be >= 1, got '0'");
}

TEST(PlanCli, CsvRoundTripsThroughTheCommandLine) {
  const std::string dir = fresh_dir("csv");
  for (const char* args : {"--schedule 1f1b --pp 4 --vpp 1 --mb 6", "--schedule interleaved --pp 3 --vpp 2 --mb 5",
                                   "--schedule mpipe --pp 4 --vpp 2 --mb 8 --layers 16 --transpose-layers 1 --owner-backward"}) {
    const auto a = run_command(hyperpipe() + " plan " + std::string(args) + " --format csv > " + dir + "/s.csv");
    ASSERT_EQ(a.exit_code, 0) << a.output;
    const auto b = run_command(hyperpipe() + " plan --from-csv " + dir + "/s.csv --format csv");
    ASSERT_EQ(b.exit_code, 0) << b.output;
    const auto c = run_command("cat " + dir + "/s.csv");
    EXPECT_EQ(b.output, c.output) << args;
  }
}

TEST(PlanCli, ForwardOnlyPrintsTheForwardsAlone) {
  const auto r = run_command(hyperpipe() + " plan --schedule 1f1b --pp 2 --mb 2 --forward-only --format actions");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "rank 0: 0F0 0SEND_F0@1 0F1 0SEND_F1@1\nrank 1: 1RECV_F0@0 1F0 1RECV_F1@0 1F1\n");
  const auto sim = run_command(hyperpipe() + " plan --schedule interleaved --pp 4 --mb 8 --forward-only --simulate "
                                             "--format json --cost-f 1 --cost-b 2");
  ASSERT_EQ(sim.exit_code, 0) << sim.output;
  const auto j = nlohmann::json::parse(sim.output);
  EXPECT_EQ(j.at("ranks")[0].at("peak_activations").get<int>(), 1);
}

TEST(PlanCli, SimulateJsonGivesTheTextbookOneFOneBStep) {
  const auto r = run_command(hyperpipe() + " plan --schedule 1f1b --pp 4 --vpp 1 --mb 8 --simulate --format json "
                                           "--cost-f 1 --cost-b 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_DOUBLE_EQ(j.at("step_time").get<double>(), (8 + 4 - 1) * 3.0);
  ASSERT_EQ(j.at("ranks").size(), 4u);
  EXPECT_EQ(j.at("ranks")[0].at("peak_activations").get<int>(), 4);
  EXPECT_TRUE(j.contains("bubble_fraction"));
}

TEST(PlanCli, OverflowAutoPrintsTheOwnersItChoseAndTheirStep) {
  const auto r = run_command(hyperpipe() + " plan --schedule mpipe --pp 2 --mb 7 --vpp 1 --overflow auto --cost-f 2"
                                           " --cost-b 4 --cost-pre-f 3 --cost-pre-b 0 --frozen-preprocess");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("overflow=auto"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("overflow auto: owners 0 1 0i 1 0 1 0 (0i: rank 0 inline); simulated step 57, full 60, min 60"),
            std::string::npos)
      << r.output;
}

// Issue 13 part 6: MPipe around a 1F1B body (one chunk per rank by default)
// keeps 1F1B's PP micro-batches in flight on rank 0, where the interleaved
// body at v 1 keeps 2(PP-1) + 1.
TEST(PlanCli, MPipeOverA1F1BBodyHoldsWhat1F1BHolds) {
  const std::string args = " plan --schedule mpipe --pp 4 --mb 8 --simulate";
  const auto body = run_command(hyperpipe() + args + " --mpipe-body 1f1b");
  ASSERT_EQ(body.exit_code, 0) << body.output;
  EXPECT_EQ(body.output.rfind("mpipe pp=4 v=1 mb=8 body=1f1b T=1 overflow=full |", 0), 0u) << body.output;
  EXPECT_NE(body.output.find("rank 0: busy 24  idle 9  peak_activations 4\n"), std::string::npos) << body.output;
  const auto spec = run_command(hyperpipe() + args + " --vpp 1");
  EXPECT_EQ(spec.output.rfind("mpipe pp=4 v=1 mb=8 T=1 overflow=full |", 0), 0u) << spec.output;
  EXPECT_NE(spec.output.find("peak_activations 7\n"), std::string::npos) << spec.output;
}

TEST(PlanCli, AdviseRanksTheLayoutsOfAModel) {
  const std::string frozen_tower = " plan --advise --pp 4 --mb 8 --layers 8 --tower-layers 4 --tower-f 2 --tower-b 4 "
                                   "--embed-f 0.2 --frozen-preprocess";
  const auto text = run_command(hyperpipe() + frozen_tower);
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("\n1    mpipe "), std::string::npos) << text.output;  // around any body
  EXPECT_NE(text.output.find(" wins: step "), std::string::npos) << text.output;
  const auto json = run_command(hyperpipe() + frozen_tower + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const auto ranked = nlohmann::json::parse(json.output).at("ranked");
  ASSERT_GT(ranked.size(), 8u);
  EXPECT_EQ(ranked[0].at("layout").get<std::string>().rfind("mpipe", 0), 0u) << ranked[0];
  for (size_t i = 1; i < ranked.size(); ++i)  // equal times (to rounding) go by peak memory
    EXPECT_LE(ranked[i - 1].at("step_time").get<double>(), ranked[i].at("step_time").get<double>() * (1 + 1e-9));
  expect_error("plan --advise --pp 4 --mb 8", "--layers must be >= 1, got 0");
  expect_error("plan --advise --pp 4 --mb 8 --layers 8 --tower-f -1", "--tower-f: must be >= 0, got '-1'");
  expect_error("plan --advise --pp 4 --mb 8 --layers 3", "no layout of the model can run on --pp 4");
}

TEST(PlanCli, WritesSvgAndTrace) {
  const std::string dir = fresh_dir("pics");
  const auto r = run_command(hyperpipe() + " plan --schedule mpipe --pp 4 --vpp 1 --mb 4 --layers 8 --svg " + dir +
                             "/t.svg --trace " + dir + "/t.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Every action of the schedule is an event of the trace, each compute a
  // span with a duration, drawn as one box of the timeline, rank by rank.
  const auto plan = run_command(hyperpipe() + " plan --schedule mpipe --pp 4 --vpp 1 --mb 4 --layers 8 --format json");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const auto planned = nlohmann::json::parse(plan.output);
  std::size_t actions = 0;
  for (const auto& rank : planned.at("ranks")) actions += rank.size();
  std::ifstream trace_file(dir + "/t.json");
  const auto trace = nlohmann::json::parse(trace_file);
  std::size_t events = 0, spans = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M") continue;
    ++events;
    if (e.at("ph") == "X") {
      ++spans;
      EXPECT_GT(e.at("dur").get<double>(), 0) << e;
    }
  }
  EXPECT_EQ(events, actions);
  EXPECT_GE(spans, 4u * 4 * 2);  // at least each rank's forwards and backwards
  std::ifstream svg_file(dir + "/t.svg");
  const std::string svg((std::istreambuf_iterator<char>(svg_file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 200);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  const std::string box = "<rect class=\"action\"";
  std::size_t boxes = 0;
  for (auto at = svg.find(box); at != std::string::npos; at = svg.find(box, at + 1)) ++boxes;
  EXPECT_EQ(boxes, spans);
}

TEST(PlanCli, TomlConfigUsesTheFlagNamesAndFlagsOverrideIt) {
  const std::string dir = fresh_dir("toml");
  run_command("printf 'schedule = \"1f1b\"\npp = 2\nvpp = 1\nmb = 3\n' > " + dir + "/plan.toml");
  const auto r = run_command(hyperpipe() + " plan --config " + dir + "/plan.toml --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "0,0F0,0SEND_F0@1,0F1,0SEND_F1@1,0RECV_B0@1,0B0,0F2,0SEND_F2@1,0RECV_B1@1,0B1,0RECV_B2@1,0B2\n"
                      "1,1RECV_F0@0,1F0,1B0,1SEND_B0@0,1RECV_F1@0,1F1,1B1,1SEND_B1@0,1RECV_F2@0,1F2,1B2,1SEND_B2@0\n");
  const auto o = run_command(hyperpipe() + " plan --config " + dir + "/plan.toml --mb 1 --format csv");
  EXPECT_EQ(o.output, "0,0F0,0SEND_F0@1,0RECV_B0@1,0B0\n1,1RECV_F0@0,1F0,1B0,1SEND_B0@0\n");
  run_command("printf 'hidden = 64\nheads = 3\nmicro-batch-size = 2\n' > " + dir + "/train.toml");
  expect_error("train --config " + dir + "/train.toml", "--heads");
}

TEST(Cli, VppDefaultsToWhatTheScheduleNeeds) {
  // 1 chunk per rank for no-pipelining, GPipe and 1F1B; 2 for interleaved.
  for (const auto& [args, header] : std::vector<std::pair<std::string, std::string>>{
           {"plan --schedule 1f1b --pp 4 --mb 8", "1f1b pp=4 v=1 mb=8 |"},
           {"plan --schedule no-pipelining --pp 1 --mb 2", "no-pipelining pp=1 v=1 mb=2 |"},
           {"plan --schedule interleaved --pp 2 --mb 4", "interleaved pp=2 v=2 mb=4 |"}}) {
    const auto r = run_command(hyperpipe() + " " + args, 60);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind(header, 0), 0u) << args << "\n" << r.output;
  }
  const auto json = nlohmann::json::parse(
      run_command(hyperpipe() + " plan --schedule interleaved --pp 2 --mb 4 --format json").output);
  EXPECT_EQ(json.at("vpp").get<int>(), 2) << json.dump();
  // Stage 2 is rank 0's second chunk: two chunks per rank were generated, not only announced.
  EXPECT_EQ(json.at("ranks").at(0).at(4).get<std::string>(), "2RECV_F0@1") << json.dump();
  const auto r = run_command(hyperpipe() + " train --nproc 1 --schedule no-pipelining --layers 2 --steps 1", 120);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no-pipelining pp=1 vpp=1"), std::string::npos) << r.output;
}

TEST(TrainCli, BadOptionsFailBeforeAnyRankStarts) {
  expect_error("train --hidden 64 --heads 3", "--heads");
  expect_error("train --layers 6 --vpp 2", "--layers");
  expect_error("train --mb 0", "--mb");
  expect_error("train --schedule zigzag", "--schedule");
  expect_error("train --schedule no-pipelining --vpp 1", "use --nproc 1 --vpp 1");  // 4 ranks by default
  expect_error("train --schedule 1f1b --vpp 2", "--schedule 1f1b runs one chunk per rank: use --vpp 1");
  expect_error("train --dtype float16", "--dtype");
  expect_error("train --seq-len 0", "--seq-len");
  expect_error("train --load /nonexistent/ckpt", "/nonexistent/ckpt");
  expect_error("train --data /nonexistent.txt", "/nonexistent.txt");
  expect_error("train --schedule mpipe --transpose-layers 9", "--transpose-layers");
  expect_error("train --mhc --mtp-layers 1 --nproc 2 --schedule 1f1b",
               "--mhc with --mtp-layers and --nproc 2: a pipelined GPT with mHC cannot run multi-token prediction");
  expect_error("train --model hybrid --hybrid-pattern 'M*x'", "--hybrid-pattern: 'M*x' has the symbol 'x'; accepted: M");
  expect_error("train --model hybrid --mhc --nproc 2 --schedule interleaved --hybrid-pattern 'M*|E|-|/-'",
               "standalone MTP stage");
  expect_error("train --mhc --mhc-streams 0", "--mhc-streams: must be >= 1, got '0'");
  expect_error("train --model hybrid --mhc --nproc 2 --schedule 1f1b --hybrid-pattern 'M*E|-M' --overlap-moe-expert-parallel-comm",
               "--overlap-moe-expert-parallel-comm with --mhc and --nproc 2: overlapping the expert all-to-all is not "
               "supported with mHC pipeline parallelism");
  expect_error("train --model hybrid --nproc 1 --schedule no-pipelining --hybrid-pattern 'M*E-' --overlap-moe-expert-parallel-comm",
               "--overlap-moe-expert-parallel-comm overlaps the all-to-all of expert parallelism, which hyperpipe does not have");
  // Sizes and numbers that used to run silently or fail late.
  expect_error("train --nproc 0", "--nproc: must be in [1, 1024], got '0'");
  expect_error("train --nproc -2", "--nproc: must be in [1, 1024], got '-2'");
  for (const char* t : {"0", "-1", "nan", "inf", "1e12"})
    expect_error(std::string("train --timeout ") + t, std::string("in (0, 604800], got '") + t + "'");
  expect_error("train --log-interval 0", "--log-interval: must be >= 1, got '0'");
  expect_error("train --inject-fault 1:x:exit", "--inject-fault '1:x:exit': RANK, STEP and START must be integers");
  expect_error("train --inject-fault 1:2:exit:-2", "--inject-fault '1:2:exit:-2': RANK, STEP and START must be integers");
  expect_error("train --inject-fault 1:2:boom", "--inject-fault: the kind must be exit, hang, kill, stop, nospace or killsave, got boom");
  expect_error("train --max-restarts -1", "--max-restarts: must be >= 0, got '-1'");
  expect_error("launch --max-restarts x -- true", "--max-restarts");
  expect_error("bench --steps 0", "--steps: must be >= 1, got '0'");
  expect_error("bench --schedules 1f1b,mpipe/zigzag", "--schedules: unknown schedule 'mpipe/zigzag'");
  expect_error("bench --schedules 1f1b/gpipe", "--schedules: unknown schedule '1f1b/gpipe'");
  expect_error("bench --schedules mpipe --overflow auto", "--overflow auto is chosen by plan and train");
  expect_error("bench --schedules mpipe/1f1b --nproc 2 --layers 4 --transpose-layers 2", "--transpose-layers must be < 2");
  // Issue 14: bench's mesh, refused before any process group.
  expect_error("bench --nproc 4 --dp 3", "--tp 1 x --dp 3 does not divide the job's 4 ranks (--nproc)");
  expect_error("bench --dp 0", "--dp: must be >= 1, got '0'");
  expect_error("bench --nproc 4 --dp 2 --schedules no-pipelining,1f1b",
               "--schedules no-pipelining runs the model on rank 0 alone: it does not combine with --dp or --tp");
  expect_error("bench --nproc 4 --tp 2 --model vl", "--tp 2: --model vl is not tensor-parallel");
  expect_error("bench --nproc 4 --tp 4 --heads 2", "--heads 2 is not divisible by --tp 4");
  // Issue 15 item 7: local ranks bounded by the machine's memory (about 64 MiB a process; the
  // CI machine has 24 GiB), before any process starts; every command that launches ranks.
  expect_error("train --nproc 1000", "--nproc 1000 local ranks need about 62.5 GiB for the processes alone");
  expect_error("bench --nproc 1000", "use at most");
  expect_error("bench --emulate-layer-ms 3,x", "--emulate-layer-ms: '3,x': expected F or F,B");
  expect_error("train --emulate-layer-ms -1", "expected F or F,B, each layer's forward and backward milliseconds");
  expect_error("train --emulate-only", "--emulate-only requires --emulate-layer-ms");
  expect_error("bench --nproc 0", "--nproc: must be in [1, 1024], got '0'");
  expect_error("plan --simulate --cost-f nan", "--cost-f: must be a number >= 0, got 'nan'");
  expect_error("plan --simulate --p2p-bw -1", "--p2p-bw: must be >= 0, got '-1'");
  expect_error("train --config /tmp", "--config /tmp: not a readable file");
  expect_error("train --eval-interval -1", "--eval-interval: must be >= 0, got '-1'");
  expect_error("train --nproc 4 --dp 3", "--tp 1 x --cp 1 x --dp 3 does not divide the job's 4 ranks (--nproc)");
  expect_error("train --nproc 4 --cp 2 --seq-len 30", "--seq-len 30 is not divisible by 2 x --cp 2");
  expect_error("train --cp 0", "--cp: must be >= 1, got '0'");
  expect_error("train --nproc 4 --cp 2 --tp 2 --sequence-parallel", "--sequence-parallel with --cp 2: not supported together yet");
  expect_error("train --nproc 2 --cp 2 --model vl", "--cp 2: --model vl is not context-parallel yet");
  expect_error("train --nproc 2 --cp 2 --variable-seq-len", "--variable-seq-len with --cp: the sequence is split into equal shards");
  expect_error("train --nproc 2 --model vl --variable-seq-len", "--variable-seq-len: --model vl's captions have one length");
  expect_error("train --nproc 4 --tp 2 --heads 3 --hidden 48",
               "--heads 3 is not divisible by --tp 2 (each tensor-parallel rank holds an equal share)");
  expect_error("train --nproc 2 --tp 2 --vocab 257", "--vocab 257 is not divisible by --tp 2");
  expect_error("train --nproc 2 --tp 2 --sequence-parallel --mtp-layers 1",
               "--mtp-layers with --sequence-parallel: multi-token prediction shifts the sequence");
  expect_error("train --nproc 2 --cp 2 --mtp-layers 1", "--mtp-layers with --cp 2: multi-token prediction is not context-parallel yet");
  expect_error("train --nproc 2 --tp 2 --model vl", "--tp 2: --model vl is not tensor-parallel yet");
  expect_error("train --nproc 2 --tp 2 --sequence-parallel --model hybrid",
               "--sequence-parallel: a Hybrid model's Mamba mixers scan the whole sequence");
  expect_error("train --tp 0", "--tp: must be >= 1, got '0'");
  expect_error("train --layers 64 --hidden 8192 --heads 64", "the model needs about 195 GiB per rank (parameters 48");
  // Every family estimates its own, and names the flags that size it (24 GiB on the CI machine).
  expect_error("train --model hybrid --moe-experts 512 --hidden 1024 --heads 8 --nproc 2 --schedule 1f1b",
               "the model needs about 64 GiB per rank (parameters 16");
  expect_error("bench --model hybrid --moe-experts 512 --hidden 1024 --heads 8 --nproc 2 --schedules 1f1b",
               "use a smaller model (--hybrid-pattern, --hidden, --moe-experts, --mamba-state, --vocab), fewer or "
               "smaller micro-batches or more machines");
  expect_error("train --model vl --vision-layers 24 --vision-hidden 2048 --vision-heads 8 --image-size 256 --patch-size 8",
               "use a smaller model (--layers, --hidden, --vision-layers, --vision-hidden, --image-size)");
  expect_error("train --mb 2147483647", "--mb 2147483647 x --nproc 4 x --vpp 2 forwards a step is more than 10000000");
  expect_error("train --data text:/dev/zero", "--data /dev/zero: not a regular file");
  expect_error("train --sequence-parallel", "--sequence-parallel needs --tp > 1");
  expect_error("train --nproc 2 --tp 2 --sequence-parallel --seq-len 15", "--seq-len 15 is not divisible by --tp 2");
  expect_error("train --dp 0", "--dp: must be >= 1, got '0'");
  expect_error("train --nproc 4 --dp 2 --mhc --mtp-layers 1 --schedule 1f1b",
               "--mhc with --mtp-layers and pp (--nproc / (--tp x --cp x --dp)) 2: a pipelined GPT with mHC cannot run multi-token");
  expect_error("train --eval-interval 5 --eval-iters 0", "--eval-iters: must be >= 1, got '0'");
  const std::string text = fresh_dir("eval") + "/corpus.txt";
  std::ofstream(text) << "some text to train on, long enough for a sequence of thirty-two tokens and more\n";
  expect_error("train --data " + text + " --eval-interval 5",
               "--eval-interval needs held-out data, and this --data has none of its own: give --eval-data PATH");
  expect_error("train --eval-data /nonexistent.txt", "--eval-data /nonexistent.txt");
}

}  // namespace
}  // namespace hp::testing
