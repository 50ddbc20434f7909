#pragma once
// The batch runner: many images through read+decode -> process -> encode+write
// as a tbb::parallel_pipeline with at most K images in flight, so memory
// stays bounded whatever the folder size and the stages of different images
// overlap. Library code: it never prints or exits; per-file failures come
// back as results, progress through a callback.
//
// Guarantees:
//   - every output is written to a temporary (is_temporary_name) in its directory and
//     renamed into place after a successful encode, fsync and close
//     (write_image_atomic), so a killed run leaves only complete outputs;
//     each run removes the leftover temporaries that no live write holds in
//     the folders it writes to (never one of its inputs), and holds an flock on each output root so
//     that two batches never race for the same outputs;
//   - an input is never overwritten: the plan compares every output with
//     every input by device and inode (check_overwrites) and run_batch
//     refuses a plan with conflicts before touching any file;
//   - one file's error never cancels the others.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/image_io.hpp"
#include "pipeline/processor.hpp"

namespace cbi {

// The output format of a batch: `same` keeps each input's extension.
enum class OutputFormat { same, png, jpg, tiff };
// "same", "png", "jpg" or "tiff"; throws std::invalid_argument.
OutputFormat parse_output_format(std::string_view text);

struct BatchJob {
    std::filesystem::path input;
    std::filesystem::path output;
};

// cancelled: not finished because the run was interrupted (BatchOptions::cancel).
// elsewhere: another process sharing the plan ran it (BatchOptions::next_job).
enum class ItemStatus { processed, failed, skipped, cancelled, elsewhere };

// The result of one file (or of a directory that could not be listed).
struct BatchItem {
    std::filesystem::path input;
    std::filesystem::path output;  // empty when the file never got one
    ItemStatus status = ItemStatus::failed;
    std::string error;  // failed: the reason, naming the file (a name may hold control characters: apps escape them)
    // processed: metadata that could not be read or written (one line naming
    // the file); the pixels were written without it.
    std::string warning;
    // Seconds spent in each stage on this item (0 for stages not reached).
    double read_s = 0, process_s = 0, write_s = 0;
};

// What to run: the jobs in a deterministic order, the files refused while
// planning (reported as failed), the output roots the run locks, and the
// outputs that would replace an input (one line each; run_batch refuses a
// plan that has any: the apps report them as usage errors).
struct BatchPlan {
    std::vector<BatchJob> jobs;
    std::vector<BatchItem> rejected;
    std::vector<std::filesystem::path> output_roots;
    std::vector<std::string> conflicts;
};

struct FolderOptions {
    std::filesystem::path input_dir;
    std::filesystem::path output_dir;  // may be empty with in_place: the input dir
    bool recursive = false;
    // fnmatch(3) glob on the file name (on the path relative to input_dir
    // when it contains '/'); a leading '.' must be matched explicitly.
    // Empty: every file with a readable image extension, any case.
    std::string pattern;
    OutputFormat format = OutputFormat::same;
    // Allows output_dir to be input_dir. Outputs there get `.cbi` before the
    // extension (as single-image mode names them) and such files are not
    // taken as inputs, so a second run does not filter its own outputs.
    bool in_place = false;
};

// Lists input_dir (sorted by relative path; sub-folders mirrored under
// output_dir when recursive). Entries whose name matches are jobs even when
// they are not regular files (a directory or dangling link named x.png fails
// when read, with its reason); other directories are descended into when
// recursive, symbolic links to directories are not followed, the output dir
// is never descended into, temporaries (is_temporary_name) are ignored. Unlistable
// sub-folders and two inputs that would write the same output (a.png and
// a.jpg with format png) become `rejected` items.
// Throws std::invalid_argument (usage) when output_dir is input_dir without
// in_place, cbi::Error when input_dir cannot be listed.
BatchPlan plan_folder(const FolderOptions& options);

// Jobs for a list of files. With an output_dir, outputs are
// output_dir/<name> (with `.cbi` inserted when output_dir is the file's own
// directory: allowed only with in_place, else std::invalid_argument);
// without one, each output goes next to its input as IN.cbi.EXT.
BatchPlan plan_files(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& output_dir,
                     OutputFormat format, bool in_place);

struct BatchProgress {
    std::size_t done = 0;   // items finished (processed + failed + skipped + cancelled)
    std::size_t total = 0;  // jobs + rejected
    std::size_t failed = 0;
    std::size_t skipped = 0;
    std::size_t cancelled = 0;
    double elapsed_s = 0;
    const BatchItem* item = nullptr;  // the item that just finished
};

struct BatchOptions {
    int jobs = 0;                // worker threads; 0: all cores
    int in_flight = 0;           // K, images in flight and processors made; 0: 2 x jobs
    bool overlap = true;         // false: the same stages, one image at a time
    bool skip_existing = false;  // an existing output (complete: writes are atomic) is kept
    std::uint64_t max_pixels = default_max_pixels;
    std::uint64_t max_bytes = default_max_image_bytes;
    // Encoding of every output (quality, PNG compression); metadata is read
    // from each input and written to its output unless write.strip.
    WriteOptions write;
    // Called once per finished item, never concurrently, from worker threads.
    std::function<void(const BatchProgress&)> on_progress;
    // Set (e.g. by a signal-handling thread) to stop: no new image is read,
    // images in flight end as cancelled, run_batch returns the summary.
    const std::atomic<bool>* cancel = nullptr;
    // Several processes sharing one plan (MPI ranks): the index of the next
    // job this process runs, or nullopt when none is left; called from one
    // thread at a time. Jobs never handed out here end as `elsewhere`.
    // Empty: every job, in plan order.
    std::function<std::optional<std::size_t>()> next_job;
    // Hold an flock on each output root for the run (a second batch into the
    // same folder is refused). Processes sharing a plan: one of them locks.
    bool lock_output_roots = true;
    // Where JPEG inputs are decoded and JPEG outputs encoded: `cpu`, on the
    // CPU (decode_image, encode_image); `device`, by the processors on their
    // device where they can (Processor::decodes_jpeg: CUDA with nvJPEG),
    // waiting for its codec to start; `automatic`, both at once: the CPU
    // until the device's codec has started, then the device encodes every
    // JPEG output and decodes the JPEG inputs it has room for (a few
    // waiting), the CPU the rest; which
    // codec handled an image depends on timing (outputs may differ from run
    // to run within the codecs' difference: use `device` or `cpu` for
    // reproducible bytes).
    // With the device's codec the read stage only reads and checks a JPEG
    // (check_image: limits, truncation); what the device's decoder refuses
    // is decoded on the CPU, so a corrupt file fails with the CPU's error.
    enum class JpegCodec { cpu, device, automatic };
    JpegCodec jpeg = JpegCodec::automatic;
};

struct StageStats {
    std::string name;   // "read+decode", "process", "encode+write"
    double busy_s = 0;  // summed over items
    int lanes = 1;      // how many items the stage can work on at once
};

// One device of a batch: its processors come from its own factory (on
// CUDA: their own streams and buffers on that device). `processors` caps
// how many it has (0: one per image in flight); an image whose device has
// none free waits for one.
struct BatchDevice {
    std::string name;  // for --stats: "cuda:0", "cpu"
    ProcessorFactory factory;
    int processors = 0;
};

// The processors of a GPU in a batch (BatchDevice::processors). Each
// allocates its device buffers and pinned staging at its first image, and
// those allocations serialise in the driver; one GPU gains nothing from
// more images at once than keep its copies and kernels busy
// (docs/performance.md#gpu-processors).
inline constexpr int kGpuBatchProcessors = 4;
// Where its JPEG inputs decode on the GPU: the processors that decode at
// the same time share the hardware decoder's batches, which decode faster
// the larger they are (docs/performance.md#hardware-jpeg-batches).
inline constexpr int kGpuJpegBatchProcessors = 8;

struct DeviceStats {
    std::string name;
    std::size_t images = 0;  // processed on this device
    double busy_s = 0;       // summed over its images
    PathTimes path;          // its processors' (at the end of the batch)
    std::string lost;        // why it was taken out (cbi::DeviceLost), empty if it was not
};

struct BatchSummary {
    std::vector<BatchItem> items;  // rejected first, then the jobs in plan order
    std::vector<DeviceStats> devices;
    std::size_t processed = 0, failed = 0, skipped = 0, cancelled = 0;
    // JPEG inputs decoded: by the devices' decoders, on the CPU (in the read
    // stage, or in the process stage where a device's decoder refused one
    // or had not started).
    std::size_t jpeg_on_devices = 0, jpeg_on_cpu = 0, jpeg_on_cpu_after_device = 0;
    double wall_s = 0;
    std::vector<StageStats> stages;
    int jobs = 0, in_flight = 0;
    bool overlap = true;
    double images_per_s() const { return wall_s > 0 ? static_cast<double>(processed) / wall_s : 0; }
};

// Runs the plan. Per-file problems are results; throws (std::invalid_argument
// for bad options or a plan with conflicts, cbi::Error when an output root is
// locked by another run, or whatever the factory throws) only before any
// file is touched.
BatchSummary run_batch(const BatchPlan& plan, const ProcessorFactory& factory, const BatchOptions& options);

// The same over several devices fed by the one pipeline: each device has K
// processors (or its BatchDevice::processors, if fewer); an image goes to
// the device with the largest share of its processors free (ties in turn),
// so a faster device takes more, or waits for one. A device whose processor
// throws cbi::DeviceLost is taken out (DeviceStats::lost) and the image runs
// again on another; when none is left, the remaining images fail with its
// error. The same device may be listed twice (cuda:0,0): two sets of
// processors on one device.
BatchSummary run_batch(const BatchPlan& plan, const std::vector<BatchDevice>& devices, const BatchOptions& options);

// Whether the plan's JPEG inputs are for the devices' decoders (a codec
// other than the CPU's and a JPEG input): their GPUs then get
// kGpuJpegBatchProcessors each.
bool jpeg_on_device(const BatchPlan& plan, BatchOptions::JpegCodec codec);

}  // namespace cbi
