// The option schema against what uses it: every command takes exactly its
// schema options; the docs show only flags their command takes; library code
// names options, never flags, and every name it uses is the schema's.
#include <CLI/CLI.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/option_schema.hpp"
#include "family/model_family.hpp"
#include "model/hybrid.hpp"
#include "model/vision_config.hpp"
#include "train/lm_data.hpp"
#include "train/task.hpp"

namespace fs = std::filesystem;
using hp::cli::Command;

namespace {

const std::vector<Command> kCommands = {hp::cli::kPlan,     hp::cli::kTrain,  hp::cli::kVerify,
                                        hp::cli::kBench,    hp::cli::kGenerate, hp::cli::kLaunch,
                                        hp::cli::kTokenize, hp::cli::kCheckpoint};

// The binary's app, as main.cpp builds it.
struct App {
  CLI::App app{"hyperpipe"};
  int exit_code = 0;
  App() { hp::cli::add_commands(app, &exit_code); }

  bool has(const std::string& command) {
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->get_name() == command) return true;
    return false;
  }
  // The long flags a subcommand accepts ("--mb"), --help aside; with those of
  // its own subcommands (checkpoint export's).
  std::set<std::string> flags(const std::string& command) {
    std::set<std::string> out;
    const CLI::App* cmd = app.get_subcommand(command);
    std::vector<const CLI::App*> apps = {cmd};
    for (const CLI::App* sub : cmd->get_subcommands({})) apps.push_back(sub);
    for (const CLI::App* a : apps)
      for (const CLI::Option* o : a->get_options())
        for (const std::string& name : o->get_lnames())
          if (name != "help") out.insert("--" + name);
    return out;
  }
};

std::set<std::string> schema_flags_of(Command c) {
  std::set<std::string> out;
  for (const auto& o : hp::cli::option_schema())
    if (o.commands & c) out.insert(o.flag);
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every `hyperpipe COMMAND --flag ...` in a markdown file: (command, flag,
// line). Continued lines (a trailing backslash) are joined; a command's flags
// end at `--`, a pipe, a redirection, a comment or the end of a code span.
struct FlagUse {
  std::string command, flag;
  int line;
};
std::vector<FlagUse> documented_flags(const std::string& text) {
  std::vector<FlagUse> out;
  std::istringstream in(text);
  std::string line, logical;
  int number = 0, start = 0;
  while (std::getline(in, line)) {
    ++number;
    if (logical.empty()) start = number;
    if (!line.empty() && line.back() == '\\') {
      logical += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    logical += line;
    std::istringstream words(logical);
    std::string word, command;
    bool expect_command = false;
    while (words >> word) {
      const bool ends_span = word.find('`') != std::string::npos && word.front() != '`';
      if (expect_command) {
        command = word;
        expect_command = false;
      } else if (word == "hyperpipe" || word == "`hyperpipe" || (word.size() > 10 && word.substr(word.size() - 10) == "/hyperpipe")) {
        expect_command = true;
        command.clear();
      } else if (word == "--" || word == "|" || word == ">" || word == "&&" || word == ";" || word == "#" ||
                 word.front() == '>') {
        command.clear();
      } else if (!command.empty() && word.rfind("--", 0) == 0 && word.size() > 2) {
        std::string flag = word.substr(0, word.find_first_of("=`,.;:)'\""));
        out.push_back({command, flag, start});
      }
      if (ends_span) command.clear();
    }
    logical.clear();
  }
  return out;
}

// Files of src/ whose code sits below the CLI.
std::vector<fs::path> library_sources() {
  std::vector<fs::path> out;
  for (const char* folder : {"schedule", "runtime", "model", "train", "data", "infer", "comm", "launch", "family", "bench"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path(HP_SOURCE_DIR) / "src" / folder))
      if (e.path().extension() == ".cpp" || e.path().extension() == ".hpp") out.push_back(e.path());
  return out;
}

// The string literals of a C++ source, comments and preprocessor lines left out.
std::vector<std::pair<int, std::string>> string_literals(const std::string& code) {
  std::vector<std::pair<int, std::string>> out;
  std::istringstream in(code);
  std::string line;
  int number = 0;
  static const std::regex literal(R"re("((?:[^"\\]|\\.)*)")re");
  while (std::getline(in, line)) {
    ++number;
    const auto first = line.find_first_not_of(" \t");
    if (first != std::string::npos && (line.compare(first, 2, "//") == 0 || line.compare(first, 1, "#") == 0)) continue;
    for (std::sregex_iterator it(line.begin(), line.end(), literal), end; it != end; ++it)
      out.emplace_back(number, (*it)[1].str());
  }
  return out;
}

}  // namespace

TEST(OptionSchema, EveryCommandTakesExactlyItsSchemaOptions) {
  App app;
  for (Command c : kCommands) {
    const std::set<std::string> taken = app.flags(hp::cli::command_name(c)), declared = schema_flags_of(c);
    for (const auto& f : taken)
      EXPECT_TRUE(declared.count(f)) << "hyperpipe " << hp::cli::command_name(c) << " takes " << f
                                     << ", which the schema does not declare for it";
    for (const auto& f : declared)
      EXPECT_TRUE(taken.count(f)) << "the schema declares " << f << " for hyperpipe " << hp::cli::command_name(c)
                                  << ", which does not take it";
  }
}

TEST(OptionSchema, NamesAreUniqueAndNoCommandHasAFlagTwice) {
  std::set<std::string> names;
  for (const auto& o : hp::cli::option_schema()) {
    EXPECT_TRUE(names.insert(o.name).second) << "option name " << o.name << " declared twice";
    EXPECT_EQ(std::string(o.flag).rfind("--", 0), 0u) << o.name;
    EXPECT_NE(o.commands, 0u) << o.name << " belongs to no command";
    EXPECT_FALSE(o.help.empty()) << o.name;
  }
  for (Command c : kCommands) {
    std::map<std::string, std::string> by_flag;
    for (const auto& o : hp::cli::option_schema()) {
      if (!(o.commands & c)) continue;
      EXPECT_TRUE(by_flag.emplace(o.flag, o.name).second)
          << hp::cli::command_name(c) << ": " << o.flag << " is both " << by_flag[o.flag] << " and " << o.name;
    }
  }
}

TEST(OptionSchema, ErrorLinesNameFlags) {
  using hp::cli::with_flags;
  EXPECT_EQ(with_flags("schedule.micro_batches must be >= 1", hp::cli::schema_flags(hp::cli::kTrain)),
            "--mb must be >= 1");
  // train has no --pp: its pipeline depth is its ranks.
  EXPECT_EQ(with_flags("schedule.pp 3 < 4", hp::cli::schema_flags(hp::cli::kTrain)), "--nproc 3 < 4");
  EXPECT_EQ(with_flags("schedule.pp 3 < 4", hp::cli::schema_flags(hp::cli::kPlan)), "--pp 3 < 4");
  // An alias: the Hybrid model's name for the MTP weight; the longest name wins.
  EXPECT_EQ(with_flags("model.mtp_loss_scaling 2; model.mtp_loss_scaling_factor 3",
                       hp::cli::schema_flags(hp::cli::kTrain)),
            "--mtp-loss-scaling 2; --mtp-loss-scaling 3");
  EXPECT_EQ(with_flags("train.save_interval needs train.save DIR", hp::cli::schema_flags(hp::cli::kTrain)),
            "--save-interval needs --save DIR");
}

TEST(OptionSchema, RulesCheckValuesAndSayWhatIsAllowed) {
  using hp::cli::ValueRule;
  const ValueRule count = hp::cli::at_least(1);
  EXPECT_EQ(count.check("1"), "");
  EXPECT_EQ(count.check("0"), "must be >= 1, got '0'");
  EXPECT_EQ(count.check("x"), "must be a number >= 1, got 'x'");
  EXPECT_EQ(count.check("inf"), "must be a number >= 1, got 'inf'");
  const ValueRule beta = hp::cli::at_least(0).below(1);
  EXPECT_EQ(beta.describe(), "in [0, 1)");
  EXPECT_EQ(beta.check("0"), "");
  EXPECT_EQ(beta.check("0.999"), "");
  EXPECT_EQ(beta.check("1"), "must be in [0, 1), got '1'");
  EXPECT_EQ(beta.check("-0.1"), "must be in [0, 1), got '-0.1'");
  const ValueRule seconds = hp::cli::greater_than(0).at_most(604800);
  EXPECT_EQ(seconds.describe(), "in (0, 604800]");
  EXPECT_EQ(seconds.check("604800"), "");
  EXPECT_EQ(seconds.check("0"), "must be in (0, 604800], got '0'");
  const ValueRule format = hp::cli::one_of({"text", "csv"});
  EXPECT_EQ(format.describe(), "{text,csv}");
  EXPECT_EQ(format.check("csv"), "");
  EXPECT_EQ(format.check("svg"), "must be one of text, csv, got 'svg'");
  // A registry's names are read when a value is checked.
  const ValueRule family = hp::cli::one_of(hp::family::family_names);
  EXPECT_EQ(family.check("gpt"), "");
  EXPECT_NE(family.check("llama").find("must be one of gpt"), std::string::npos);
}

// Each rule refuses a value outside it as the command line is parsed, before
// any command runs, naming the flag; --help prints it beside the flag.
TEST(OptionSchema, EveryRuleRefusesABadValueAtParseAndIsShownByHelp) {
  using Kind = hp::cli::ValueRule::Kind;
  int refused = 0;
  for (const auto& o : hp::cli::option_schema()) {
    std::string bad;
    switch (o.rule.kind) {
      case Kind::Any: continue;
      case Kind::OneOf: bad = "no-such-value"; break;
      case Kind::Custom: bad = "1,2,3"; break;
      case Kind::Range: bad = std::to_string(o.rule.low - (o.rule.low_open ? 0 : 1)); break;
    }
    for (Command c : kCommands) {
      if (!(o.commands & c)) continue;
      App app;
      const std::string line = std::string(hp::cli::command_name(c)) + (c == hp::cli::kCheckpoint ? " export " : " ") +
                               o.flag + " " + bad;
      try {
        app.app.parse(line);
        ADD_FAILURE() << line << " was accepted";
      } catch (const CLI::ValidationError& e) {
        ++refused;
        EXPECT_EQ(std::string(e.what()), std::string(o.flag) + ": " + o.rule.check(bad));
      }
      const CLI::App* cmd = app.app.get_subcommand(hp::cli::command_name(c));
      if (c == hp::cli::kCheckpoint) cmd = cmd->get_subcommand("export");
      const std::string help = cmd->help();
      EXPECT_NE(help.find(std::string(o.flag) + " "), std::string::npos) << line;
      EXPECT_NE(help.find(":" + o.rule.describe()), std::string::npos) << line << "\n" << help;
    }
  }
  EXPECT_GT(refused, 100);
}

// A command neither checks a range nor lists allowed values by hand: the
// schema's rules do both, and RegisteredFlags::given takes a field, not a
// flag's spelling (a string does not compile).
TEST(OptionSchema, CommandsCheckNoValueByHand) {
  static const std::regex by_hand(R"(^--[a-z0-9-]+ (must be (>=|at least|in |a number)|.*: allowed: ))");
  int literals = 0;
  for (const auto& e : fs::directory_iterator(fs::path(HP_SOURCE_DIR) / "src" / "cli")) {
    if (e.path().extension() != ".cpp") continue;
    for (const auto& [line, text] : string_literals(read(e.path()))) {
      ++literals;
      EXPECT_FALSE(std::regex_search(text, by_hand))
          << e.path().filename().string() << ":" << line << ": \"" << text << "\" checks a value by hand; give the "
          << "option a rule in the schema";
    }
  }
  EXPECT_GT(literals, 100);
}

TEST(OptionSchema, TheDocsShowOnlyFlagsTheirCommandTakes) {
  App app;
  std::vector<fs::path> docs = {fs::path(HP_SOURCE_DIR) / "README.md"};
  for (const auto& e : fs::directory_iterator(fs::path(HP_SOURCE_DIR) / "docs"))
    if (e.path().extension() == ".md") docs.push_back(e.path());
  int checked = 0;
  for (const auto& doc : docs) {
    for (const FlagUse& use : documented_flags(read(doc))) {
      if (!app.has(use.command)) continue;  // not a command ("hyperpipe's")
      if (use.flag == "--help") continue;
      ++checked;
      EXPECT_TRUE(app.flags(use.command).count(use.flag))
          << doc.filename().string() << ":" << use.line << ": hyperpipe " << use.command << " " << use.flag
          << " is not a flag of that command";
    }
  }
  EXPECT_GT(checked, 100) << "the docs' command lines were not found";
}

TEST(OptionSchema, LibraryCodeNamesOptionsNotFlags) {
  // A name lower layers may use: an option's name or alias in some command.
  std::set<std::string> known;
  for (Command c : kCommands)
    for (const auto& [name, flag] : hp::cli::schema_flags(c)) known.insert(name);
  // Names of the options structs that no flag sets, and why.
  const std::map<std::string, std::string> not_options = {
      {"train.lr.decay_steps", "--steps decides it"},
      {"schedule.mpipe.owners", "--overflow auto chooses them"},
      {"model.tensor_parallel.rank", "the builder of a rank's model sets it"},
      {"model.tensor_parallel.group", "the builder of a rank's model sets it"},
      {"model.context_parallel.rank", "the builder of a rank's model sets it"},
      {"model.context_parallel.group", "the builder of a rank's model sets it"},
      {"model.mtp_depth", "an MTP depth's index, built from --mtp-layers"},
      {"model.layernorm_eps", "fixed for command-line runs (checkpoints do not record it)"},
      {"model.init_std", "fixed for command-line runs"},
      {"model.dropout", "must stay 0: runs are deterministic"},
      {"costs.tp", "bench prices its mesh from the measured job"},
      {"costs.dp", "bench prices its mesh from the measured job"},
      {"costs.bucket_bytes", "bench prices its mesh from the measured job"},
      {"generate.prompts", "--prompt or --prompts (generate names both)"},
      {"data.pkl", "a record of torch.save's zip archive, not an option"}};
  static const std::regex flag(R"(--[a-z][a-z0-9-]+)");
  static const std::regex name(R"(\b(?:schedule|model|train|data|vision|costs|profile|launch|generate|sampling|mesh|job|bench)\.[a-z_][a-z_.0-9]*[a-z_0-9])");
  int names = 0;
  for (const auto& file : library_sources()) {
    const std::string where = fs::relative(file, HP_SOURCE_DIR).string();
    for (const auto& [line, text] : string_literals(read(file))) {
      std::smatch m;
      EXPECT_FALSE(std::regex_search(text, m, flag))
          << where << ":" << line << ": \"" << text << "\" spells the flag " << m.str()
          << "; name the option (train.lr), which each command maps to its flag";
      for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) {
        ++names;
        EXPECT_TRUE(known.count(it->str()) || not_options.count(it->str()))
            << where << ":" << line << ": \"" << text << "\" names " << it->str() << ", which no command's schema has";
      }
    }
  }
  EXPECT_GT(names, 50) << "the library's option names were not found";
}

// A checkpoint records its model under train's flag names (without "--"),
// which a mismatch on --load then prints as flags.
TEST(OptionSchema, CheckpointMetadataKeysAreTrainFlags) {
  const std::set<std::string> train = schema_flags_of(hp::cli::kTrain);
  hp::train::LmDataOptions data;
  hp::model::VisionConfig vision;
  hp::model::HybridConfig hybrid;
  for (const auto& name : hp::family::family_names()) {
    hp::family::FamilyOptions o;
    o.data = &data, o.vision = &vision, o.hybrid = &hybrid;
    o.model.enable_mhc_connections = name != "vl";  // every key a family can record
    o.model.mtp_num_layers = name == "gpt" ? 1 : 0;
    const auto task = hp::family::find_family(name).make_task(o);
    const auto metadata = nlohmann::json::parse(task->checkpoint_metadata());
    ASSERT_TRUE(metadata.is_object()) << name;
    for (auto it = metadata.begin(); it != metadata.end(); ++it)
      EXPECT_TRUE(train.count("--" + it.key())) << name << "'s checkpoint key '" << it.key() << "' is no flag of train";
  }
}
