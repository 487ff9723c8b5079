// The segment service's lock-free index of tags by name (src/segment/tag_index.h): every item
// inserted is found by its name and by no other, across the tables' growth.
#include "segment/tag_index.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace flurry::internal {
namespace {

struct Named {
  std::string name;
  [[nodiscard]] const std::string& tag() const noexcept { return name; }
};

TEST(TagIndexTest, AnEmptyIndexFindsNothing) {
  TagIndex<Named> index;
  EXPECT_EQ(index.find("orders"), nullptr);
  EXPECT_EQ(index.find(""), nullptr);
  EXPECT_EQ(index.size(), 0u);
}

TEST(TagIndexTest, EveryItemIsFoundByItsNameAcrossGrowth) {
  std::vector<std::unique_ptr<Named>> items;
  TagIndex<Named> index;
  for (int i = 0; i < 1000; ++i) {
    items.push_back(std::make_unique<Named>(Named{"tag-" + std::to_string(i)}));
    index.insert(items.back().get());
    // What was there before is still found after each insertion (and each growth).
    for (int j = 0; j <= i; j += 1 + i / 16) {
      ASSERT_EQ(index.find("tag-" + std::to_string(j)), items[static_cast<std::size_t>(j)].get())
          << "after inserting " << i;
    }
  }
  EXPECT_EQ(index.size(), 1000u);
  for (std::size_t j = 0; j < items.size(); ++j) {
    EXPECT_EQ(index.find(items[j]->name), items[j].get());
  }
  EXPECT_EQ(index.find("tag-1000"), nullptr);
  EXPECT_EQ(index.find("tag-"), nullptr);
  EXPECT_EQ(index.find("tag-00"), nullptr);
}

TEST(TagIndexTest, NamesThatShareAPrefixOrDifferInCaseAreDistinct) {
  Named a{"a"}, ab{"ab"}, upper{"A"};
  TagIndex<Named> index;
  index.insert(&a);
  index.insert(&ab);
  index.insert(&upper);
  EXPECT_EQ(index.find("a"), &a);
  EXPECT_EQ(index.find("ab"), &ab);
  EXPECT_EQ(index.find("A"), &upper);
  EXPECT_EQ(index.find("abc"), nullptr);
}

}  // namespace
}  // namespace flurry::internal
