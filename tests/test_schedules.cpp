// Schedules: every registered mapping is a bijection onto the pixels, and
// each family visits pixels in the order its definition states, checked
// against orders built independently with nested loops.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "schedules/registry.hpp"

namespace cbi {
namespace {

struct Size {
    int width, height;
};
const Size kSizes[] = {{1, 1}, {1, 17}, {17, 1}, {31, 7}, {257, 129}, {1000, 3}, {64, 64}, {33, 2}};

// The visit order a schedule produces: order[i] = y * width + x.
std::vector<int> visit_order(const ScheduleSpec& spec, int width, int height) {
    std::vector<int> order(static_cast<std::size_t>(width) * height);
    with_schedule(spec, [&](auto schedule) {
        for (std::uint32_t i = 0; i < order.size(); ++i) {
            const Pixel p = schedule.map(i, width, height);
            order[i] = p.x >= 0 && p.x < width && p.y >= 0 && p.y < height ? p.y * width + p.x : -1;
        }
    });
    return order;
}

// Tiles of tw x th in row-major tile order, row-major (or zigzag) inside.
std::vector<int> loop_order(int width, int height, int tw, int th, bool zigzag) {
    std::vector<int> order;
    for (int ty = 0; ty < height; ty += th)
        for (int tx = 0; tx < width; tx += tw) {
            const int w = std::min(tw, width - tx), h = std::min(th, height - ty);
            for (int y = 0; y < h; ++y)
                for (int k = 0; k < w; ++k) {
                    const int x = zigzag && (y % 2 == 1) ? w - 1 - k : k;
                    order.push_back((ty + y) * width + tx + x);
                }
        }
    return order;
}

TEST(Schedules, EveryRegisteredScheduleIsABijection) {
    const auto examples = example_schedules();
    ASSERT_GE(examples.size(), 4u);
    for (const ScheduleSpec& spec : examples) {
        const std::string text = spec.to_string();
        for (const Size s : kSizes) {
            SCOPED_TRACE(text + " on " + std::to_string(s.width) + "x" + std::to_string(s.height));
            const auto order = visit_order(spec, s.width, s.height);
            std::vector<int> hits(order.size(), 0);
            for (int p : order) {
                ASSERT_GE(p, 0) << "mapped outside the image";
                ++hits[p];
            }
            for (std::size_t p = 0; p < hits.size(); ++p) ASSERT_EQ(hits[p], 1) << "pixel " << p;
        }
    }
}

TEST(Schedules, NaiveIsRowMajor) {
    const auto order = visit_order(parse_schedule("naive"), 31, 7);
    for (int i = 0; i < 31 * 7; ++i) EXPECT_EQ(order[i], i);
}

TEST(Schedules, ColumnMatchesStripsTopToBottom) {
    for (const Size s : kSizes)
        for (int w : {1, 2, 3, 8, 32, 33, 2000}) {
            SCOPED_TRACE("column:" + std::to_string(w));
            EXPECT_EQ(visit_order(parse_schedule("column:" + std::to_string(w)), s.width, s.height),
                      loop_order(s.width, s.height, w, s.height, false));
        }
}

TEST(Schedules, ColumnFollowsThesisListing5) {
    // Listing 5 verbatim (col_size = height * col_w, min for the last column).
    const int width = 37, height = 5, col_w = 8;
    const auto order = visit_order(parse_schedule("column:8"), width, height);
    for (int tid = 0; tid < width * height; ++tid) {
        const int col_size = height * col_w;
        const int col_id = tid / col_size;
        const int col_tid = tid % col_size;
        const int col_off = col_id * col_w;
        const int col_tw = std::min(width - col_id * col_w, col_w);
        const int x = col_tid % col_tw + col_off, y = col_tid / col_tw;
        EXPECT_EQ(order[tid], x + y * width) << "tid " << tid;
    }
}

TEST(Schedules, ZigzagReversesOddRowsOfEachStrip) {
    for (const Size s : kSizes)
        for (int w : {1, 4, 5, 32, 4096}) {
            SCOPED_TRACE("zigzag:" + std::to_string(w));
            EXPECT_EQ(visit_order(parse_schedule("zigzag:" + std::to_string(w)), s.width, s.height),
                      loop_order(s.width, s.height, w, s.height, true));
        }
    // A hand-written case: 5x3 image, strips of 3: rows 0 and 2 forwards, row 1 backwards.
    const std::vector<int> expected = {0, 1, 2, 7, 6, 5, 10, 11, 12, 3, 4, 9, 8, 13, 14};
    EXPECT_EQ(visit_order(parse_schedule("zigzag:3"), 5, 3), expected);
}

TEST(Schedules, TileIsRowMajorTilesWithClippedEdges) {
    for (const Size s : kSizes)
        for (auto [tw, th] : {std::pair{1, 1}, {4, 3}, {32, 8}, {5000, 2}, {3, 5000}}) {
            SCOPED_TRACE("tile:" + std::to_string(tw) + "x" + std::to_string(th));
            EXPECT_EQ(
                visit_order(parse_schedule("tile:" + std::to_string(tw) + "x" + std::to_string(th)), s.width, s.height),
                loop_order(s.width, s.height, tw, th, false));
        }
}

// The tiled CUDA schedules (smem:WxH, sep:WxH, stream:WxH) visit tile:WxH order on the CPU.
TEST(Schedules, SharedMemorySchedulesVisitTileOrder) {
    for (const Size s : kSizes)
        for (const char* family : {"smem", "sep", "stream"})
            for (auto [tw, th] : {std::pair{1, 1}, {7, 5}, {64, 32}, {13, 40}}) {
                const std::string text = std::string(family) + ":" + std::to_string(tw) + "x" + std::to_string(th);
                SCOPED_TRACE(text);
                EXPECT_EQ(visit_order(parse_schedule(text), s.width, s.height),
                          loop_order(s.width, s.height, tw, th, false));
            }
}

// parse_schedule(bad) throws, and the message names `form` and every valid form.
void expect_refused(const std::string& bad, const std::string& form) {
    SCOPED_TRACE(bad);
    try {
        parse_schedule(bad);
        ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(form), std::string::npos) << what;
        EXPECT_NE(what.find("naive, column:W, zigzag:W, tile:WxH, smem:WxH, sep:WxH, stream:WxH, vec:N"),
                  std::string::npos)
            << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << "not one line: " << what;
    }
}

TEST(Schedules, SepParsesWxHAndRefusesBadOrHugeTiles) {
    EXPECT_EQ(parse_schedule("sep:64x32"), (ScheduleSpec{ScheduleFamily::sep, 64, 32}));
    EXPECT_EQ(parse_schedule("sep:1024x1"), (ScheduleSpec{ScheduleFamily::sep, 1024, 1}));
    EXPECT_EQ(parse_schedule("sep:64x32").to_string(), "sep:64x32");
    EXPECT_FALSE(schedule_entry(parse_schedule("sep:8x8")).can.pointwise);
    for (const char* bad : {"sep", "sep:", "sep:64", "sep:0x8", "sep:8x0", "sep:-8x8", "sep:8x8x8", "sep:1025x8",
                            "sep:8x1025", "sep:axb"})
        expect_refused(bad, "sep:WxH");
}

TEST(Schedules, StreamAndVecParseAndRefuseBadParameters) {
    EXPECT_EQ(parse_schedule("stream:128x64"), (ScheduleSpec{ScheduleFamily::stream, 128, 64}));
    EXPECT_EQ(parse_schedule("stream:128x64").to_string(), "stream:128x64");
    EXPECT_EQ(parse_schedule("vec:8"), (ScheduleSpec{ScheduleFamily::vec, 8, 0}));
    EXPECT_EQ(parse_schedule("vec:8").to_string(), "vec:8");
    const auto& stream = schedule_entry(parse_schedule("stream:8x8"));
    EXPECT_TRUE(stream.can.stencil && !stream.can.pointwise && stream.can.max_ksize == 9);
    // stream (the GPU's 8-bit stream kernel, cuda/blend.cu) and the staged tiles (the CPU's stencils blend what they
    // store, cpu/then.hpp) compute a blend with their stencils.
    for (const ScheduleEntry& e : schedule_registry())
        EXPECT_EQ(e.can.fuses_blend, e.name == "stream" || e.name == "sep" || e.name == "smem") << e.name;
    const auto& vec = schedule_entry(parse_schedule("vec:4"));
    EXPECT_TRUE(vec.can.pointwise && !vec.can.stencil);
    // vec visits naive (row-major) order.
    for (const Size s : kSizes)
        EXPECT_EQ(visit_order(parse_schedule("vec:16"), s.width, s.height),
                  visit_order(ScheduleSpec{}, s.width, s.height));
    for (const char* bad : {"stream", "stream:8", "stream:0x8", "stream:1025x8"}) expect_refused(bad, "stream:WxH");
    for (const char* bad : {"vec", "vec:0", "vec:3", "vec:32", "vec:4x4"}) expect_refused(bad, "vec:N");
}

// Values past INT_MAX, and sides whose product overflows an int, are refused
// by every family's parser with one line. Built once with
// -fsanitize=undefined -fno-sanitize-recover=all: smem:65536x65536 used to
// multiply W*H in int before checking the sides (signed overflow).
TEST(Schedules, HugeParametersAreRefusedWithoutOverflow) {
    const struct {
        const char* text;
        const char* form;
    } huge[] = {{"column:4294967296", "column:W"},
                {"column:2147483648", "column:W"},
                {"column:99999999999999999999", "column:W"},
                {"zigzag:4294967296", "zigzag:W"},
                {"tile:4294967296x8", "tile:WxH"},
                {"tile:8x4294967296", "tile:WxH"},
                {"smem:65536x65536", "smem:WxH"},
                {"smem:2147483647x2147483647", "smem:WxH"},
                {"smem:4096x2", "smem:WxH"},
                {"smem:1x4097", "smem:WxH"},
                {"smem:4294967296x1", "smem:WxH"},
                {"sep:65536x65536", "sep:WxH"},
                {"sep:2147483647x2147483647", "sep:WxH"},
                {"sep:4294967296x8", "sep:WxH"},
                {"stream:65536x65536", "stream:WxH"},
                {"stream:8x65537", "stream:WxH"},
                {"stream:2147483647x2147483647", "stream:WxH"},
                {"stream:8x4294967296", "stream:WxH"},
                {"vec:4294967296", "vec:N"},
                {"vec:2147483647", "vec:N"},
                {"vec:4294967312", "vec:N"}};
    for (const auto& h : huge) expect_refused(h.text, h.form);
    // A tile or column larger than the image is clipped to it, so large
    // sides that fit an int are valid (the visit order stays a bijection).
    EXPECT_EQ(parse_schedule("tile:65536x65536"), (ScheduleSpec{ScheduleFamily::tile, 65536, 65536}));
    EXPECT_EQ(parse_schedule("column:2147483647"), (ScheduleSpec{ScheduleFamily::column, 2147483647, 0}));
    EXPECT_EQ(visit_order(parse_schedule("tile:2147483647x2147483647"), 7, 5), visit_order(ScheduleSpec{}, 7, 5));
    EXPECT_EQ(parse_schedule("smem:64x64"), (ScheduleSpec{ScheduleFamily::smem, 64, 64}));  // W*H = 4096 exactly
}

TEST(Schedules, MalformedStringsListTheValidForms) {
    for (const char* bad : {"column:0", "column:-3", "column:abc", "column:", "column", "column:3x", "tile:32",
                            "tile:0x8", "tile:8x0", "tile:x", "zigzag:1.5", "naive:3", "warp", "", "Column:8"}) {
        SCOPED_TRACE(bad);
        try {
            parse_schedule(bad);
            ADD_FAILURE() << "accepted";
        } catch (const std::invalid_argument& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("naive, column:W, zigzag:W, tile:WxH"), std::string::npos) << what;
        }
    }
}

TEST(Schedules, ParseAndPrintRoundTrip) {
    for (const ScheduleSpec& spec : example_schedules()) EXPECT_EQ(parse_schedule(spec.to_string()), spec);
    EXPECT_EQ(parse_schedule("tile:32x8"), (ScheduleSpec{ScheduleFamily::tile, 32, 8}));
}

TEST(Schedules, RegistryDescribesEveryEntry) {
    for (const auto& e : schedule_registry()) {
        EXPECT_FALSE(e.name.empty());
        EXPECT_TRUE(e.form.starts_with(e.name)) << e.form;
        EXPECT_GT(e.description.size(), 10u) << e.name;
        EXPECT_FALSE(e.examples.empty()) << e.name;
    }
}

}  // namespace
}  // namespace cbi
