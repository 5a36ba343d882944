// Weights out and in: a checkpoint saved under a pipeline x tensor-parallel
// mesh is exported as torch and safetensors files, which Python's torch.load
// and a safetensors reader written from the specification read back bitwise
// (tests/cli/export_check.py, Debian's python3-torch); train --init-from
// starts the same model from either file under other layouts, the same loss.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "run_command.hpp"
#include "train/checkpoint.hpp"

namespace hp::testing {
namespace {

// The checkpoint's tensors as export_check.py reads them: name, dtype, shape, hex bytes.
void write_reference(const std::string& checkpoint, const std::string& path) {
  const train::CheckpointInfo info = train::read_checkpoint_info(checkpoint);
  train::NamedParams needed;
  for (const auto& e : info.params)
    needed[e.name] = at::empty(e.shape, at::TensorOptions().dtype(e.dtype == "Double" ? at::kDouble : at::kFloat));
  const auto loaded = train::load_checkpoint(checkpoint, needed);
  std::ofstream out(path);
  for (const auto& [name, t] : loaded.params) {
    const at::Tensor c = t.contiguous();
    std::string shape;
    for (auto d : c.sizes()) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    std::ostringstream hex;
    const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
    for (std::size_t i = 0; i < c.nbytes(); ++i) hex << std::hex << std::setw(2) << std::setfill('0') << int(bytes[i]);
    out << name << " " << (c.scalar_type() == at::kDouble ? "F64" : "F32") << " " << (shape.empty() ? "," : shape)
        << " " << hex.str() << "\n";
  }
}

// Step 1's loss of a run, from its metrics file.
double first_loss(const std::string& metrics) {
  std::ifstream in(metrics);
  std::string line;
  std::getline(in, line);
  return nlohmann::json::parse(line).at("loss").get<double>();
}

const std::string kExportModel = " --layers 4 --hidden 32 --heads 4 --dtype float64 --timeout 60 --log-interval 1";

TEST(ExportDist, PythonReadsBothFormatsBitwiseAndInitFromStartsAnyLayoutFromThem) {
  const std::string dir = fresh_dir("export");
  const auto trained = run_command(hyperpipe() + " train --nproc 4 --tp 2 --steps 6 --save " + dir + "/ck" + kExportModel, 240);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  for (const char* format : {"torch", "safetensors"}) {
    const std::string file = dir + "/model." + (std::string(format) == "torch" ? "pt" : "safetensors");
    const auto r = run_command(hyperpipe() + " checkpoint export " + dir + "/ck --output " + file + " --format " + format);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("step 6"), std::string::npos) << r.output;
  }
  write_reference(dir + "/ck", dir + "/reference.txt");
  const auto check = run_command("/usr/bin/python3 " + std::string(HP_SOURCE_DIR) + "/tests/cli/export_check.py " + dir +
                                 "/reference.txt " + dir + "/model.pt " + dir + "/model.safetensors");
  ASSERT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("tensors equal"), std::string::npos) << check.output;
  std::ifstream config(dir + "/model.json");
  EXPECT_EQ(nlohmann::json::parse(config).at("hidden"), 32);

  // The same weights under three other layouts and both formats: the same first loss.
  double reference = 0;
  int run = 0;
  for (const std::string& args : {"--nproc 1 --init-from " + dir + "/model.pt",
                                 "--nproc 2 --vpp 2 --init-from " + dir + "/model.safetensors",
                                 "--nproc 4 --vpp 1 --schedule 1f1b --init-from " + dir + "/model.safetensors"}) {
    const std::string metrics = dir + "/metrics-" + std::to_string(run++) + ".jsonl";
    const auto r = run_command(hyperpipe() + " train --steps 1 --metrics " + metrics + " " + args + kExportModel, 120);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    if (run == 1) reference = first_loss(metrics);
    EXPECT_NEAR(first_loss(metrics), reference, 1e-10 * reference) << args;
  }
  const auto fresh = run_command(hyperpipe() + " train --nproc 1 --steps 1 --metrics " + dir + "/fresh.jsonl" + kExportModel, 120);
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  EXPECT_GT(first_loss(dir + "/fresh.jsonl"), reference + 0.05) << "init-from did not change the start";

  // Another model's shapes are refused, naming the first parameter that differs.
  const auto other = run_command(hyperpipe() + " train --nproc 1 --steps 1 --hidden 64 --layers 4 --init-from " + dir +
                                 "/model.pt --timeout 60", 120);
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("--init-from " + dir + "/model.pt: parameter embedding.position.weight has shape [32, 32] "
                              "in the file but [32, 64] in this model"),
            std::string::npos)
      << other.output;
  // A torch file cut short is refused before any rank starts, from its zip
  // directory alone (the ranks read its tensors, once each).
  run_command("head -c 3000 " + dir + "/model.pt > " + dir + "/cut.pt");
  const auto cut = run_command(hyperpipe() + " train --nproc 2 --steps 1 --init-from " + dir + "/cut.pt", 60);
  EXPECT_EQ(cut.exit_code, 2) << cut.output;
  EXPECT_NE(cut.output.find("hyperpipe train: error: --init-from " + dir + "/cut.pt: a zip file that torch cannot load ("),
            std::string::npos)
      << cut.output;
  EXPECT_EQ(cut.output.find("[rank"), std::string::npos) << cut.output;
}

}  // namespace
}  // namespace hp::testing
