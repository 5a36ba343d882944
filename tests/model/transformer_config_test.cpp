#include "model/transformer_config.hpp"

#include <gtest/gtest.h>

#include "model/test_util.hpp"

namespace hp::model {
namespace {

using testing::expect_invalid;

TEST(TransformerConfig, DefaultsValidateAndDerive) {
  TransformerConfig c;
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.num_layers, 8);
  EXPECT_EQ(c.ffn_hidden(), 4 * 64);
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_EQ(c.dtype, DType::Float32);
  c.ffn_hidden_size = 100;
  EXPECT_EQ(c.ffn_hidden(), 100);
}

TEST(TransformerConfig, PositiveIntegerFieldsNameTheirFlag) {
  struct Case {
    int TransformerConfig::*field;
    const char* flag;
  };
  const Case cases[] = {{&TransformerConfig::num_layers, "model.num_layers"},
                        {&TransformerConfig::hidden_size, "model.hidden_size"},
                        {&TransformerConfig::num_attention_heads, "model.num_attention_heads"},
                        {&TransformerConfig::vocab_size, "model.vocab_size"},
                        {&TransformerConfig::max_seq_len, "model.max_seq_len"}};
  for (const auto& k : cases) {
    for (int bad : {0, -3}) {
      TransformerConfig c;
      c.*k.field = bad;
      expect_invalid([&] { c.validate(); }, {k.flag, "positive", std::to_string(bad)});
    }
  }
}

TEST(TransformerConfig, HeadsMustDivideHidden) {
  TransformerConfig c;
  c.hidden_size = 64;
  c.num_attention_heads = 5;
  expect_invalid([&] { c.validate(); }, {"model.num_attention_heads 5", "model.hidden_size 64", "divide"});
  c.num_attention_heads = 8;
  EXPECT_NO_THROW(c.validate());
}

TEST(TransformerConfig, OtherFieldsAreChecked) {
  {
    TransformerConfig c;
    c.ffn_hidden_size = -1;
    expect_invalid([&] { c.validate(); }, {"model.ffn_hidden_size", "0 for 4 x model.hidden_size"});
  }
  {
    TransformerConfig c;
    c.dropout = 0.1;
    expect_invalid([&] { c.validate(); }, {"model.dropout", "must be 0"});
  }
  {
    TransformerConfig c;
    c.layernorm_eps = 0;
    expect_invalid([&] { c.validate(); }, {"model.layernorm_eps", "> 0"});
  }
  {
    TransformerConfig c;
    c.init_std = -0.02;
    expect_invalid([&] { c.validate(); }, {"model.init_std", "> 0"});
  }
  {
    TransformerConfig c;
    c.dtype = static_cast<DType>(7);
    expect_invalid([&] { c.validate(); }, {"model.dtype", "float32 or float64"});
  }
}

TEST(TransformerConfig, DTypeNamesRoundTrip) {
  for (DType d : {DType::Float32, DType::Float64}) {
    auto back = dtype_from_name(dtype_name(d));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, d);
  }
  EXPECT_EQ(dtype_from_name("fp64"), DType::Float64);
  EXPECT_EQ(dtype_from_name("bfloat16"), std::nullopt);
}

TEST(TransformerConfig, DescribeUsesFlagNames) {
  TransformerConfig c;
  c.dtype = DType::Float64;
  const std::string d = c.describe();
  EXPECT_NE(d.find("model.num_layers 8"), std::string::npos) << d;
  EXPECT_NE(d.find("model.ffn_hidden_size 256"), std::string::npos) << d;
  EXPECT_NE(d.find("model.dtype float64"), std::string::npos) << d;
}

}  // namespace
}  // namespace hp::model
