// Text in, text out: `hyperpipe tokenize` trains a SentencePiece model on a
// text file made here and writes a Megatron indexed dataset, `train` trains
// on it with that tokenizer, and `generate` turns a text prompt into text.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>

#include "data/indexed_dataset.hpp"
#include "run_command.hpp"

namespace hp::testing {
namespace {

const char* const kSubjects[] = {"the cat", "a dog", "my sister", "the bird", "our king"};
const char* const kVerbs[] = {"sees", "likes", "paints", "follows"};
const char* const kObjects[] = {"a red ball", "the river", "two apples", "the moon"};

// `documents` lines of grammar sentences (and the same as JSON lines).
void write_corpus(const std::string& text, const std::string& jsonl, int documents) {
  std::mt19937 rng(7);
  std::ofstream t(text), j(jsonl);
  for (int d = 0; d < documents; ++d) {
    std::string doc;
    for (int s = 0, n = 2 + static_cast<int>(rng() % 4); s < n; ++s)
      doc += std::string(s ? " " : "") + kSubjects[rng() % 5] + " " + kVerbs[rng() % 4] + " " + kObjects[rng() % 4] + ".";
    t << doc << "\n";
    j << "{\"id\": " << d << ", \"text\": \"" << doc << "\"}\n";
  }
}

std::vector<std::vector<std::int64_t>> documents_of(const std::string& prefix) {
  const data::IndexedDataset d(prefix);
  std::vector<std::vector<std::int64_t>> out;
  for (std::size_t s = 0; s < d.sequences(); ++s) {
    out.emplace_back();
    for (std::int64_t j = 0; j < d.length(s); ++j) out.back().push_back(d.token(s, static_cast<std::size_t>(j)));
  }
  return out;
}

TEST(TokenizeDist, TrainsATokenizerTokenizesTrainsAndGeneratesTextBack) {
  const std::string dir = fresh_dir("tokenize");
  write_corpus(dir + "/corpus.txt", dir + "/corpus.jsonl", 1500);
  const auto made = run_command(hyperpipe() + " tokenize --input " + dir + "/corpus.txt --output-prefix " + dir +
                                "/text --vocab-size 400");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_NE(made.output.find("wrote " + dir + "/text.bin and .idx: 1500 documents"), std::string::npos) << made.output;
  const auto text = documents_of(dir + "/text");
  ASSERT_EQ(text.size(), 1500u);
  // SentencePiece's </s> (id 2) ends each document, and only there.
  int ended = 0;
  for (const auto& doc : text) ended += doc.size() > 2 && doc.back() == 2 && std::count(doc.begin(), doc.end(), 2) == 1;
  EXPECT_EQ(ended, 1500);
  // The same documents as JSON lines, with the trained model, encode alike.
  const auto json = run_command(hyperpipe() + " tokenize --input " + dir + "/corpus.jsonl --json-key text " +
                                "--tokenizer-model " + dir + "/text.model --workers 2 --output-prefix " + dir + "/json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  EXPECT_EQ(documents_of(dir + "/json"), text);

  const auto trained = run_command(hyperpipe() + " train --nproc 2 --timeout 60 --data " + dir + "/text --tokenizer-model " +
                                       dir + "/text.model --layers 4 --hidden 32 --heads 2 --steps 30 --log-interval 10 "
                                       "--lr 0.01 --save " + dir + "/ck",
                                   180);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("--vocab 400"), std::string::npos) << trained.output;
  const auto loss_at = [&](const std::string& step) {
    const std::string key = "step " + step + "/30  loss ";
    const auto at = trained.output.find(key);
    return at == std::string::npos ? -1.0 : std::stod(trained.output.substr(at + key.size()));
  };
  EXPECT_LT(loss_at("30"), loss_at("1") - 1.0) << trained.output;

  const auto out = run_command(hyperpipe() + " generate --timeout 60 --load " + dir + "/ck --prompt 'the cat' "
                               "--max-new-tokens 12", 120);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  const auto at = out.output.find("the cat");
  ASSERT_NE(at, std::string::npos) << out.output;
  const std::string continuation = out.output.substr(at + 7, out.output.find('\n', at) - at - 7);
  EXPECT_GE(continuation.size(), 12u) << continuation;  // pieces, not bytes: at least a character each
  EXPECT_EQ(continuation.find_first_not_of("abcdefghijklmnopqrstuvwxyz ."), std::string::npos)
      << "'" << continuation << "' is not text of the corpus's letters";
}

TEST(TokenizeDist, BadInputIsOneLineNamingTheFlag) {
  const std::string dir = fresh_dir("tokenize_bad");
  write_corpus(dir + "/corpus.txt", dir + "/corpus.jsonl", 20);
  auto refused = [&](const std::string& args, const std::string& text) {
    const auto r = run_command(hyperpipe() + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(text), std::string::npos) << args << "\n" << r.output;
  };
  refused("tokenize --input " + dir + "/none.txt --output-prefix " + dir + "/x", "--input " + dir + "/none.txt: no such file");
  refused("tokenize --input " + dir + "/corpus.txt --json-key text --output-prefix " + dir + "/x",
          "--json-key text: line 1 of " + dir + "/corpus.txt is not a JSON object");
  refused("tokenize --input " + dir + "/corpus.jsonl --json-key body --output-prefix " + dir + "/x",
          "--json-key body: line 1 of " + dir + "/corpus.jsonl has no string field \"body\"");
  refused("tokenize --input " + dir + "/corpus.txt --tokenizer-model " + dir + "/corpus.txt --output-prefix " + dir + "/x",
          "--tokenizer-model " + dir + "/corpus.txt: not a SentencePiece model");
  refused("train --tokenizer-model " + dir + "/none.model", "--tokenizer-model " + dir + "/none.model: no such file");
  EXPECT_FALSE(data::is_indexed_dataset(dir + "/x"));
}

}  // namespace
}  // namespace hp::testing
