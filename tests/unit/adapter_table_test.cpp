// LoRA adapter choices (api/adapters/adapter_table.h): a `lora` list parses or is refused naming
// the field; a list says the whole set (an adapter it leaves out applies at 0, the last entry of an
// id wins); what applies to a request, and its namespace field, changes with every adapter and
// every bit of a scale, is empty under none (the base model's namespace), and follows POST's scales.
#include <gtest/gtest.h>

#include "api/adapters/adapter_table.h"

namespace prefixd::api {
namespace {

using nlohmann::ordered_json;

std::vector<engine::AdapterInfo> two_adapters() {
  return {engine::AdapterInfo{.path = "/m/a.gguf", .name = "a", .fingerprint = "fa"},
          engine::AdapterInfo{.path = "/m/b.gguf", .name = "b", .fingerprint = "fb"}};
}

TEST(AdapterChoice, ParsesIdsAndScalesAndNamesTheBadField) {
  const auto ok = parse_adapter_choice(ordered_json::parse(R"([{"id": 1, "scale": 0.5}, {"id": 0, "scale": 2}])"), "lora");
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, (AdapterChoice{{1, 0.5f}, {0, 2.0f}}));
  const auto empty = parse_adapter_choice(ordered_json::array(), "lora");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"id": 0, "scale": 1})", "lora"},
      {R"("a")", "lora"},
      {R"([1])", "lora[0]"},
      {R"([{"scale": 1}])", "lora[0].id"},
      {R"([{"id": -1, "scale": 1}])", "lora[0].id"},
      {R"([{"id": 0.5, "scale": 1}])", "lora[0].id"},
      {R"([{"id": "0", "scale": 1}])", "lora[0].id"},
      {R"([{"id": 0, "scale": 1}, {"id": 1}])", "lora[1].scale"},
      {R"([{"id": 0, "scale": "1"}])", "lora[0].scale"},
      {R"([{"id": 0, "scale": 1e300}])", "lora[0].scale"},
  };
  for (const auto& [body, param] : bad) {
    const auto refused = parse_adapter_choice(ordered_json::parse(body), "lora");
    ASSERT_FALSE(refused) << body;
    EXPECT_EQ(refused.error().status, 400) << body;
    EXPECT_EQ(refused.error().param, param) << body;
  }
}

TEST(AdapterTable, AListSaysTheWholeSetAndItsNamespaceFieldEveryScale) {
  AdapterTable table(two_adapters(), {1.0f, 0.0f});
  const auto server = table.resolve(std::nullopt);
  ASSERT_TRUE(server);
  EXPECT_EQ(server->adapters, (std::vector<engine::AdapterScale>{{0, 1.0f}}));
  EXPECT_EQ(server->label, "a");
  EXPECT_EQ(table.resolve(AdapterChoice{})->namespace_field, server->namespace_field) << "empty: the server's scales";

  const auto only_b = table.resolve(AdapterChoice{{1, 0.5f}});
  ASSERT_TRUE(only_b);
  EXPECT_EQ(only_b->adapters, (std::vector<engine::AdapterScale>{{1, 0.5f}})) << "a left out: 0";
  EXPECT_EQ(only_b->label, "b@0.5");
  const auto both = table.resolve(AdapterChoice{{1, 0.25f}, {0, 3.0f}, {1, 0.5f}});
  ASSERT_TRUE(both);
  EXPECT_EQ(both->adapters, (std::vector<engine::AdapterScale>{{0, 3.0f}, {1, 0.5f}})) << "sorted; the last of an id wins";
  EXPECT_EQ(both->label, "a@3+b@0.5");

  const auto none = table.resolve(AdapterChoice{{0, 0.0f}});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->adapters.empty());
  EXPECT_EQ(none->namespace_field, "") << "the base model's namespace";
  EXPECT_EQ(none->label, "");

  // Every adapter and every bit of a scale is another namespace.
  const std::vector<std::string> fields = {
      server->namespace_field, only_b->namespace_field, both->namespace_field,
      table.resolve(AdapterChoice{{0, std::nextafter(1.0f, 2.0f)}})->namespace_field,
      table.resolve(AdapterChoice{{1, 1.0f}})->namespace_field};
  for (size_t i = 0; i < fields.size(); ++i) {
    for (size_t j = i + 1; j < fields.size(); ++j) EXPECT_NE(fields[i], fields[j]) << i << " and " << j;
  }

  const auto unknown = table.resolve(AdapterChoice{{0, 1.0f}, {2, 1.0f}});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().param, "lora[1].id");
}

TEST(AdapterTable, SettingScalesChangesWhatLaterRequestsApply) {
  AdapterTable table(two_adapters(), {1.0f, 1.0f});
  EXPECT_EQ(table.resolve(std::nullopt)->adapters.size(), 2u);
  ASSERT_FALSE(table.set_scales(AdapterChoice{{1, 0.75f}}));
  const auto list = table.list();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].scale, 0.0f) << "left out of the list";
  EXPECT_EQ(list[1].scale, 0.75f);
  EXPECT_EQ(table.resolve(std::nullopt)->adapters, (std::vector<engine::AdapterScale>{{1, 0.75f}}));
  const auto refused = table.set_scales(AdapterChoice{{5, 1.0f}}, "body");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->param, "body[0].id");
  EXPECT_EQ(table.list()[1].scale, 0.75f) << "a refused list changes nothing";

  AdapterTable none({}, {});
  EXPECT_TRUE(none.empty());
  const auto refused_none = none.resolve(AdapterChoice{{0, 1.0f}});
  ASSERT_FALSE(refused_none);
  EXPECT_NE(refused_none.error().message.find("--lora"), std::string::npos);
}

}  // namespace
}  // namespace prefixd::api
