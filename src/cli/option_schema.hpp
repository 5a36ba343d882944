// The option schema: every user-facing option, declared once.
//
// An option has a name (where lower layers' messages place it: "train.lr",
// "schedule.micro_batches"), a flag ("--lr", also its TOML key "lr" and its
// key in checkpoint metadata), a help line, the commands that take it, and the
// field it sets. Its default is that field's initial value in the command's
// structs: the library's options structs hold the one set of defaults.
// From this table come each command's CLI11 registrations, the TOML keys
// `--config` accepts, and the flag names that replace option names in error
// lines (with_flags). tests/cli/option_schema_test.cpp walks it against the
// commands, the docs and the sources.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "cli/option_flags.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace hp::schedule {
struct ScheduleOptions;
struct CostModel;
struct ModelProfile;
}  // namespace hp::schedule
namespace hp::model {
struct TransformerConfig;
struct VisionConfig;
struct HybridConfig;
}  // namespace hp::model
namespace hp::train {
struct TrainOptions;
struct LmDataOptions;
struct ExportOptions;
}  // namespace hp::train
namespace hp::infer {
struct GenerateOptions;
}
namespace hp::launch {
struct LaunchOptions;
}
namespace hp::data {
struct TokenizeOptions;
}
namespace hp::runtime {
struct ExecutorOptions;
}

namespace hp::cli {

struct JobOptions;

// The subcommands, as bits of an option's `commands`.
enum Command : unsigned {
  kPlan = 1u << 0,
  kTrain = 1u << 1,
  kVerify = 1u << 2,
  kBench = 1u << 3,
  kGenerate = 1u << 4,
  kLaunch = 1u << 5,
  kTokenize = 1u << 6,
  kCheckpoint = 1u << 7,  // checkpoint export
};
inline constexpr unsigned kAllCommands = kPlan | kTrain | kVerify | kBench | kGenerate | kLaunch | kTokenize | kCheckpoint;
// The command's name as the user types it ("train").
const char* command_name(Command c);

// What a command line says beyond the library's options structs: the values a
// command reads as text and turns into options itself (a schedule's name, a
// model family, a file), and the commands' own switches.
struct CommandValues {
  std::string schedule;    // --schedule: ScheduleOptions' default kind's name
  std::string overflow;    // --overflow: MPipeOptions' default
  std::string mpipe_body;  // --mpipe-body: MPipeOptions' default
  std::string layers_per_stage;  // --layers-per-stage "3,1,2,2"; "" = even
  int dp = 1;                    // plan and bench --dp (train's is TrainOptions::dp)
  std::string model = "gpt";     // --model
  std::string dtype = "float32"; // --dtype
  std::string fault;             // --inject-fault RANK:STEP:KIND
  std::string emulate_layer_ms;  // --emulate-layer-ms F[,B]
  double tolerance = 1e-10;      // verify --tolerance
  // plan
  bool compute_only = false;
  std::string format = "text";
  std::string from_csv;
  bool simulate = false;
  std::vector<std::string> stage_costs;  // STAGE:F:B[:I:W]
  std::string svg, trace;
  bool advise = false;
  int advise_top = 10;
  // bench
  std::string schedules = "gpipe,1f1b,interleaved";
  int bench_steps = 4;
  bool overhead = false;
  int profile_ops = 0;
  bool comm = false;
  int comm_rounds = 15;
  std::string json;
  // generate
  std::string load;
  std::string prompt, prompts_file;
  std::vector<std::string> images;
  bool no_kv_cache = false;

  CommandValues();
};

// Where a command's options land: each command points the roots it has at its
// own structs (null: it takes no option of that root). Every pointer must
// outlive the command's parsing.
struct OptionRoots {
  CommandValues* values = nullptr;
  JobOptions* job = nullptr;
  schedule::ScheduleOptions* schedule = nullptr;
  schedule::CostModel* costs = nullptr;
  schedule::ModelProfile* profile = nullptr;
  train::TrainOptions* train = nullptr;
  train::LmDataOptions* data = nullptr;
  model::TransformerConfig* model = nullptr;
  model::VisionConfig* vision = nullptr;
  model::HybridConfig* hybrid = nullptr;
  runtime::ExecutorOptions* executor = nullptr;
  infer::GenerateOptions* generate = nullptr;
  launch::LaunchOptions* launch = nullptr;
  data::TokenizeOptions* tokenize = nullptr;
  train::ExportOptions* exporting = nullptr;
};

// The field an option sets: a value of the CLI's kinds, or nothing (--config,
// which main.cpp expands before parsing).
using Field = std::variant<std::monostate, int*, std::int64_t*, std::uint64_t*, double*, bool*, std::string*,
                           std::vector<std::string>*>;

// The values an option takes: checked as the command line and --config are
// parsed (a bad value is one line naming the flag, before anything starts)
// and printed by --help beside the flag. Lower layers keep their own checks
// for callers of the C++ API; a command checks nothing by hand that a rule
// can say.
struct ValueRule {
  enum class Kind { Any, OneOf, Range, Custom };
  Kind kind = Kind::Any;
  // OneOf: the allowed values, fixed or from a function (schedules and model
  // families are read from their registries when a value is checked).
  std::vector<std::string> names;
  std::vector<std::string> (*names_of)() = nullptr;
  // Range: [low, high], either end open or absent.
  double low = 0, high = 0;
  bool has_low = false, has_high = false, low_open = false, high_open = false;
  // Custom: "" when the value is good, else what is wrong; its form for --help.
  std::string (*custom)(const std::string& value) = nullptr;
  const char* form = "";

  // "" when `value` is allowed, else what is wrong with it ("must be >= 1, got '0'").
  std::string check(const std::string& value) const;
  // What --help prints: "{text,csv,json,actions}", ">= 1", "in [0, 1)".
  std::string describe() const;
  std::vector<std::string> allowed() const;
  // This range with an upper end: at_least(0).below(1) is [0, 1).
  ValueRule at_most(double high) const;
  ValueRule below(double high) const;
};

ValueRule one_of(std::vector<std::string> names);
ValueRule one_of(std::vector<std::string> (*names)());
ValueRule at_least(double low);      // [low, inf)
ValueRule greater_than(double low);  // (low, inf)
ValueRule custom(std::string (*check)(const std::string& value), const char* form);

struct OptionSpec {
  const char* name;  // "train.lr": how lower layers name it
  const char* flag;  // "--lr"
  unsigned commands; // Command bits
  std::string help;
  Field (*field)(const OptionRoots&);
  ValueRule rule = {};  // the values it takes (default: any its field's type parses)
  // Other names lower layers use for this option in these commands
  // ("schedule.layers" is --layers in train), comma-separated.
  const char* aliases = "";
  bool show_default = true;  // print the field's initial value in --help
  const char* needs = "";    // a flag this one is meaningless without
};

// The whole table, in --help order: the layout's options (option_schema.cpp),
// then, in a build with LibTorch, the model's and the training loop's
// (option_schema_model.cpp, model_options()).
const std::vector<OptionSpec>& option_schema();
std::vector<OptionSpec> model_options();
// The model families registered (option_schema_model.cpp): their names are in the table's help.
std::size_t model_registry_size();

// For the tables: the field an option sets, through the command's roots.
#define HP_OPTION_FIELD(expr) [](const hp::cli::OptionRoots& r) -> hp::cli::Field { return &(expr); }

// Groups of commands in the tables.
inline constexpr unsigned kJobCommands = kTrain | kVerify;             // train and verify take the same flags
inline constexpr unsigned kRunCommands = kJobCommands | kBench;        // commands that run a model
inline constexpr unsigned kLayoutCommands = kPlan | kRunCommands;      // commands that lay out a schedule
inline constexpr unsigned kRankCommands = kRunCommands | kGenerate;    // commands that start ranks

// The options a command registered, by the address of the field each sets.
// Not copyable: a copy of the struct holding the fields would hold other
// addresses, so a command's argument struct that holds its RegisteredFlags
// cannot be copied either.
struct RegisteredFlags {
  RegisteredFlags() = default;
  RegisteredFlags(RegisteredFlags&&) = default;
  RegisteredFlags& operator=(RegisteredFlags&&) = default;
  RegisteredFlags(const RegisteredFlags&) = delete;
  RegisteredFlags& operator=(const RegisteredFlags&) = delete;

  std::map<const void*, std::vector<CLI::Option*>> by_field;
  // Whether the user gave the option that sets `field` (any of its flags, on
  // the command line or in a --config file). A field the command registered
  // no option for is a programming error (std::logic_error).
  template <typename T>
  bool given(const T& field) const {
    static_assert(!std::is_array_v<T> && !std::is_pointer_v<T>,
                  "given() takes the field an option sets (a.job.nproc), not a flag's spelling");
    return given_field(static_cast<const void*>(&field));
  }

 private:
  bool given_field(const void* field) const;
};

// The command's options, registered on `cmd` from the schema.
RegisteredFlags add_schema_options(CLI::App* cmd, Command c, const OptionRoots& roots);

// (option name, flag) for every option `c` takes, aliases included, longest
// name first: with_flags(message, schema_flags(c)). pp_flag names the
// pipeline depth where the command has no --pp (train: --nproc).
FlagNames schema_flags(Command c, const std::string& pp_flag = "--nproc");

}  // namespace hp::cli
