#include "data/tokenize.hpp"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <stdexcept>
#include <thread>

#include "data/indexed_dataset.hpp"
#include "data/tokenizer.hpp"

namespace hp::data {
namespace {

namespace fs = std::filesystem;

// Documents are encoded this many at a time, spread over the workers.
constexpr std::size_t kChunk = 2048;
// A trained model sees at most this much of the input.
constexpr std::int64_t kTrainingBytes = std::int64_t{256} << 20;

void check(const TokenizeOptions& o) {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  if (o.inputs.empty()) fail("tokenize.inputs: no input file given");
  for (const auto& in : o.inputs) {
    struct stat st {};
    if (::stat(in.c_str(), &st) != 0) fail("tokenize.inputs " + in + ": no such file");
    if (!S_ISREG(st.st_mode)) fail("tokenize.inputs " + in + ": not a regular file");
  }
  if (o.output_prefix.empty()) fail("tokenize.output_prefix: not given (PREFIX.bin and PREFIX.idx are written under it)");
  const fs::path dir = fs::path(o.output_prefix).parent_path();
  if (!dir.empty() && !fs::is_directory(dir))
    fail("tokenize.output_prefix " + o.output_prefix + ": the directory " + dir.string() + " does not exist");
  if (o.tokenizer_model.empty() && (o.vocab_size < 16 || o.vocab_size > (1 << 24)))
    fail("tokenize.vocab_size " + std::to_string(o.vocab_size) + ": a trained vocabulary needs 16 to 16777216 pieces");
  if (o.workers < 0) fail("tokenize.workers " + std::to_string(o.workers) + ": give 0 (the cores) or more");
}

// Reads the inputs' documents in order, a line at a time.
class DocumentReader {
 public:
  explicit DocumentReader(const TokenizeOptions& o) : o_(o) {}
  // The next document into `doc`; false at the end of the last input.
  bool next(std::string& doc) {
    std::string line;
    while (true) {
      if (!in_.is_open()) {
        if (file_ >= o_.inputs.size()) return false;
        in_.open(o_.inputs[file_]);
        if (!in_) throw std::invalid_argument("tokenize.inputs " + o_.inputs[file_] + ": cannot open the file");
        line_ = 0;
      }
      if (!std::getline(in_, line)) {
        in_.close();
        ++file_;
        continue;
      }
      ++line_;
      bytes_ += static_cast<std::int64_t>(line.size()) + 1;
      if (o_.json_key.empty()) {
        doc = std::move(line);
        return true;
      }
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      const std::string where = "line " + std::to_string(line_) + " of " + o_.inputs[file_];
      if (j.is_discarded() || !j.is_object())
        throw std::invalid_argument("tokenize.json_key " + o_.json_key + ": " + where + " is not a JSON object");
      const auto it = j.find(o_.json_key);
      if (it == j.end() || !it->is_string())
        throw std::invalid_argument("tokenize.json_key " + o_.json_key + ": " + where + " has no string field \"" +
                                    o_.json_key + "\"");
      doc = it->get<std::string>();
      return true;
    }
  }
  std::int64_t bytes() const { return bytes_; }

 private:
  const TokenizeOptions& o_;
  std::size_t file_ = 0;
  std::ifstream in_;
  std::int64_t line_ = 0, bytes_ = 0;
};

std::string train_model(const TokenizeOptions& o) {
  DocumentReader reader(o);
  std::vector<std::string> docs;
  std::int64_t bytes = 0;
  for (std::string doc; bytes < kTrainingBytes && reader.next(doc);) {
    bytes += static_cast<std::int64_t>(doc.size());
    docs.push_back(std::move(doc));
  }
  if (bytes == 0) throw std::invalid_argument("tokenize.inputs: the input holds no document (every line is empty)");
  return train_sentencepiece(docs, o.output_prefix, o.vocab_size);
}

}  // namespace

TokenizeReport tokenize(const TokenizeOptions& o, const std::function<void(const TokenizeProgress&)>& progress) {
  check(o);
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  TokenizeReport report;
  report.tokenizer_model = o.tokenizer_model.empty() ? train_model(o) : o.tokenizer_model;
  const unsigned workers = o.workers > 0 ? static_cast<unsigned>(o.workers) : std::max(1u, std::thread::hardware_concurrency());
  // One tokenizer (one helper process) a worker.
  std::vector<std::unique_ptr<Tokenizer>> tokenizers;
  for (unsigned w = 0; w < workers; ++w) tokenizers.push_back(sentencepiece_tokenizer(report.tokenizer_model));
  const Tokenizer& tokenizer = *tokenizers[0];
  report.vocab_size = tokenizer.vocab_size();
  const TokenDtype dtype = optimal_dtype(report.vocab_size);
  report.dtype = dtype == TokenDtype::kUint16 ? "uint16" : "int32";
  const std::int64_t eod = tokenizer.end_of_document();

  DocumentReader reader(o);
  IndexedDatasetWriter writer(o.output_prefix, dtype);
  TokenizeProgress& done = report.done;
  double last_report = 0;
  std::vector<std::string> chunk;
  std::vector<std::vector<std::int64_t>> encoded;
  for (bool more = true; more;) {
    chunk.clear();
    for (std::string doc; chunk.size() < kChunk && (more = reader.next(doc));) chunk.push_back(std::move(doc));
    encoded.assign(chunk.size(), {});
    std::vector<std::future<void>> jobs;
    for (unsigned w = 0; w < workers; ++w)
      jobs.push_back(std::async(std::launch::async, [&, w] {
        for (std::size_t i = w; i < chunk.size(); i += workers) encoded[i] = tokenizers[w]->encode(chunk[i]);
      }));
    for (auto& j : jobs) j.get();
    for (auto& ids : encoded) {
      if (ids.empty()) continue;  // an empty line holds no document
      ids.push_back(eod);
      writer.add_document(ids);
      ++done.documents;
      done.tokens += static_cast<std::int64_t>(ids.size());
    }
    done.bytes = reader.bytes();
    done.seconds = seconds();
    if (progress && done.seconds - last_report >= 1.0) {
      last_report = done.seconds;
      progress(done);
    }
  }
  if (done.documents == 0)
    throw std::invalid_argument("tokenize.inputs: the input holds no document (every line is empty)");
  writer.finish();
  done.seconds = seconds();
  return report;
}

}  // namespace hp::data
