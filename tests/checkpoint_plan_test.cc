// The distributed checkpoint's plan (gt/checkpoint_plan.h): each line form
// round-trips, a metadata line keeps the text after it, malformed lines are
// errors naming the line, and ResolveUnder keeps every path inside the
// operator's checkpoint_root.
#include "gt/checkpoint_plan.h"

#include <gtest/gtest.h>

#include <string>

namespace gt::checkpoint {
namespace {

TEST(CheckpointPlanTest, LinesRoundTrip) {
  const std::string text =
      "write 3 /ckpt/run 1/a.0.bin\n"
      "read 1 2 4 6 1 2 0 0 3 4 /ckpt/run 1/a.1.bin\n"
      "read 0 0 /ckpt/scalar.bin\n";
  Result<Plan> plan = ParsePlan(text);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->lines.size(), 3u);
  EXPECT_EQ(plan->lines[0].kind, PlanLine::Kind::kWrite);
  EXPECT_EQ(plan->lines[0].piece, 3);
  EXPECT_EQ(plan->lines[0].path, "/ckpt/run 1/a.0.bin");  // a path may hold spaces
  const PlanLine& read = plan->lines[1];
  EXPECT_EQ(read.file_shape, (Shape{4, 6}));
  EXPECT_EQ(read.from, (Shape{1, 2}));
  EXPECT_EQ(read.to, (Shape{0, 0}));
  EXPECT_EQ(read.size, (Shape{3, 4}));
  EXPECT_TRUE(plan->lines[2].size.empty());  // a 0-d tensor's box
  EXPECT_EQ(FormatPlan(*plan), text);
}

TEST(CheckpointPlanTest, MetadataKeepsTheTextAfterIt) {
  Result<Plan> plan = ParsePlan("metadata /ckpt/.metadata\n{\"a\": 1}\nwrite 0 x\n");
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->lines.size(), 1u);
  EXPECT_EQ(plan->content, "{\"a\": 1}\nwrite 0 x\n");
  EXPECT_EQ(FormatPlan(*plan), "metadata /ckpt/.metadata\n{\"a\": 1}\nwrite 0 x\n");
}

TEST(CheckpointPlanTest, MalformedLinesNameTheLine) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c : {Case{"erase 0 /x\n", "line 1: unknown verb 'erase'"},
                        Case{"write 0 /x\nwrite -1 /y\n", "line 2: expected a number >= 0, got '-1'"},
                        Case{"write 0\n", "line 1: no path"},
                        Case{"read 0 2 4 6 3 0 0 0 2 6 /x\n", "the box leaves its file's shape"},
                        Case{"read 0 2 4 6 0\n", "expected a number"},
                        Case{"metadata\n", "no path"},
                        // Numbers near 2^63 whose sums would wrap into a box that looks inside.
                        Case{"read 0 2 64 16 0 0 9223372036854775744 0 64 16 p\n", "the box leaves its piece's shape"},
                        Case{"read 0 1 8 9223372036854775807 0 1 p\n", "the box leaves its file's shape"},
                        Case{"read 0 2 16777217 16777216 0 0 0 0 1 1 p\n", "more than 2^48 elements"}}) {
    Result<Plan> plan = ParsePlan(c.text);
    ASSERT_FALSE(plan.ok()) << c.text;
    EXPECT_NE(plan.status().message().find(c.says), std::string::npos) << plan.status().message();
  }
}

TEST(CheckpointPlanTest, APathWithAControlCharacterIsRefused) {
  // open() would stop at the NUL: "..\0/x" would be checked as one path and opened as another.
  for (std::string text : {std::string("write 0 ..\0/outside.txt\n", 24), std::string("write 0 a\tb\n")}) {
    Result<Plan> plan = ParsePlan(text);
    ASSERT_FALSE(plan.ok()) << text;
    EXPECT_NE(plan.status().message().find("control character"), std::string::npos) << plan.status().message();
  }
}

TEST(CheckpointPlanTest, PathsStayUnderTheRoot) {
  EXPECT_EQ(*ResolveUnder("/srv/ckpt", "run1/a.bin"), "/srv/ckpt/run1/a.bin");
  EXPECT_EQ(*ResolveUnder("/srv/ckpt/", "run1/./b/../a.bin"), "/srv/ckpt/run1/a.bin");
  EXPECT_EQ(*ResolveUnder("/srv/ckpt", "/srv/ckpt/run1/a.bin"), "/srv/ckpt/run1/a.bin");
  for (const char* outside : {"/etc/passwd", "../x", "run1/../../x", "/srv/ckpt2/a", "/srv"}) {
    Result<std::string> r = ResolveUnder("/srv/ckpt", outside);
    ASSERT_FALSE(r.ok()) << outside;
    EXPECT_NE(r.status().message().find("outside the dispatcher's checkpoint_root /srv/ckpt"), std::string::npos)
        << r.status().message();
  }
  Result<std::string> off = ResolveUnder("", "a");
  ASSERT_FALSE(off.ok());
  EXPECT_NE(off.status().message().find("checkpoints are off"), std::string::npos);
}

}  // namespace
}  // namespace gt::checkpoint
