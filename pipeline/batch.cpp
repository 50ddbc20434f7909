#include "pipeline/batch.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <system_error>
#include <thread>
#include <utility>

#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#include <opencv2/core.hpp>

#include "pipeline/error.hpp"
#include "pipeline/opencv.hpp"
#include "pipeline/run_file.hpp"

namespace cbi {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Inserted before the extension when an output shares its input's folder.
constexpr std::string_view kOutputTag = ".cbi";

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

// The extensions of the formats read_image probes (pipeline/image_io.hpp).
bool has_image_extension(const fs::path& name) {
    static const std::set<std::string> exts{".png", ".jpg",  ".jpeg", ".jpe", ".tif", ".tiff", ".bmp",
                                            ".dib", ".webp", ".pbm",  ".pgm", ".ppm", ".pnm",  ".pam",
                                            ".pfm", ".exr",  ".hdr",  ".pic", ".sr",  ".ras"};
    return exts.count(lower(name.extension().string())) != 0;
}

fs::path output_name(const fs::path& name, OutputFormat format, bool tag) {
    std::string ext = name.extension().string();
    if (format == OutputFormat::png) ext = ".png";
    if (format == OutputFormat::jpg) ext = ".jpg";
    if (format == OutputFormat::tiff) ext = ".tiff";
    return name.stem().string() + (tag ? std::string(kOutputTag) : "") + ext;
}

bool is_tagged_output(const fs::path& name) {
    return name.stem().string().ends_with(kOutputTag);
}

struct FileId {
    dev_t dev;
    ino_t ino;
    auto operator<=>(const FileId&) const = default;
};
std::optional<FileId> file_id(const fs::path& p) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) return std::nullopt;
    return FileId{st.st_dev, st.st_ino};
}

BatchItem failed_item(const fs::path& input, const fs::path& output, std::string error) {
    BatchItem item;
    item.input = input;
    item.output = output;
    item.status = ItemStatus::failed;
    item.error = std::move(error);
    return item;
}

// Where an output lands, for comparing outputs with each other: its folder
// with symbolic links resolved (two spellings of one folder are one key)
// and its own name.
std::string output_key(const fs::path& output) {
    std::error_code ec;
    const fs::path dir = output.has_parent_path() ? output.parent_path() : fs::path(".");
    fs::path canonical = fs::weakly_canonical(fs::absolute(dir, ec), ec);
    if (ec) canonical = fs::absolute(dir, ec).lexically_normal();
    return (canonical / output.filename()).string();
}

// Adds a job unless another input already claimed its output.
class Planner {
public:
    explicit Planner(BatchPlan& plan) : plan_(plan) {}
    void add(const fs::path& input, const fs::path& output) {
        const auto [it, fresh] = claimed_.emplace(output_key(output), input);
        if (fresh) {
            plan_.jobs.push_back({input, output});
        } else {
            // The same file listed twice, or two inputs one output name.
            const bool twice = same_file(input, it->second);
            plan_.rejected.push_back(
                failed_item(input, {},
                            input.string() + (twice ? ": is listed twice (as " + it->second.string() + ")"
                                                    : ": its output " + output.string() + " is also the output of " +
                                                          it->second.string() + " (choose another output format)")));
        }
    }

private:
    BatchPlan& plan_;
    std::map<std::string, fs::path> claimed_;
};

// Every output that exists and is one of the inputs (same device and inode,
// links followed: hard links, symlinked folders and other spellings
// included) becomes a conflict line. Outputs that do not exist yet cannot
// be inputs; the read stage checks each pair again just before reading.
void check_overwrites(BatchPlan& plan) {
    // Refused inputs too: a file stays an input even when it is not read.
    std::map<FileId, const fs::path*> inputs;
    for (const BatchJob& job : plan.jobs)
        if (const auto id = file_id(job.input)) inputs.emplace(*id, &job.input);
    for (const BatchItem& item : plan.rejected)
        if (const auto id = file_id(item.input)) inputs.emplace(*id, &item.input);
    for (const BatchJob& job : plan.jobs) {
        const auto id = file_id(job.output);
        if (!id) continue;
        const auto it = inputs.find(*id);
        if (it != inputs.end())
            plan.conflicts.push_back(job.output.string() + ": is the input " + it->second->string() +
                                     " (the same file), the output of " + job.input.string() +
                                     "; cbi never overwrites an input: choose another output folder");
    }
}

class FolderWalker {
public:
    FolderWalker(const FolderOptions& o, const fs::path& out_root, bool tag, BatchPlan& plan)
        : o_(o), out_root_(out_root), out_id_(file_id(out_root)), tag_(tag), plan_(plan), planner_(plan) {}

    void walk(const fs::path& dir, const fs::path& rel) {
        std::error_code ec;
        std::vector<fs::directory_entry> entries;
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
        if (ec) {
            if (rel.empty()) throw Error(dir.string(), "cannot list the input folder: " + ec.message());
            plan_.rejected.push_back(failed_item(dir, {}, dir.string() + ": cannot list the folder: " + ec.message()));
            return;
        }
        std::sort(entries.begin(), entries.end(),
                  [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
        for (const auto& entry : entries) {
            const fs::path name = entry.path().filename();
            if (is_temporary_name(name.string())) continue;
            // Not following links: a link to a folder is not descended into
            // (no cycles); links named like images are jobs like files.
            const bool is_dir = entry.symlink_status(ec).type() == fs::file_type::directory;
            if (is_dir && !has_image_extension(name)) {
                if (o_.recursive && file_id(entry.path()) != out_id_) walk(entry.path(), rel / name);
                continue;
            }
            if (!matches(name, rel / name)) continue;
            if (tag_ && is_tagged_output(name)) continue;  // an earlier in-place run's output
            planner_.add(entry.path(), out_root_ / rel / output_name(name, o_.format, tag_));
        }
    }

private:
    bool matches(const fs::path& name, const fs::path& rel) const {
        if (o_.pattern.empty()) return name.string()[0] != '.' && has_image_extension(name);
        const bool by_path = o_.pattern.find('/') != std::string::npos;
        const std::string subject = by_path ? rel.generic_string() : name.string();
        return ::fnmatch(o_.pattern.c_str(), subject.c_str(), FNM_PERIOD | (by_path ? FNM_PATHNAME : 0)) == 0;
    }

    const FolderOptions& o_;
    fs::path out_root_;
    std::optional<FileId> out_id_;
    bool tag_;
    BatchPlan& plan_;
    Planner planner_;
};

// An exclusive flock on an output root for the run, so that two batches
// never race for the same outputs.
class DirLock {
public:
    explicit DirLock(const fs::path& dir) : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
        if (fd_ < 0)
            throw Error(dir.string(), "cannot open the output folder: " + std::system_category().message(errno));
        if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
            const int err = errno;
            ::close(fd_);
            if (err == EWOULDBLOCK) throw Error(dir.string(), "another cbi batch is writing to this output folder");
            throw Error(dir.string(), "cannot lock the output folder: " + std::system_category().message(err));
        }
    }
    DirLock(const DirLock&) = delete;
    DirLock& operator=(const DirLock&) = delete;
    ~DirLock() { ::close(fd_); }

private:
    int fd_;
};

// The message, named after `subject` unless it already starts with it. The
// subject's own control characters (a newline in a file name) are kept: the
// apps escape them when they print.
std::string failure(const fs::path& subject, std::string message) {
    const std::string s = subject.string();
    return message.rfind(s + ":", 0) == 0 ? message : s + ": " + message;
}

// Runs f; an exception becomes the item's failure, named after `subject`.
template <class F>
bool attempt(BatchItem& item, const fs::path& subject, F&& f) {
    try {
        f();
        return true;
    } catch (const cv::Exception& e) {
        item.error = failure(subject, "OpenCV: " + e.err);
    } catch (const std::bad_alloc&) {
        item.error = failure(subject, "out of memory");
    } catch (const std::exception& e) {
        item.error = failure(subject, e.what());
    } catch (...) {
        item.error = failure(subject, "unknown error");
    }
    item.status = ItemStatus::failed;
    return false;
}

// The processors of every device: K each (one per image in flight, so a
// live device always has a free one), or the device's cap; a token in the
// process stage borrows one, its task suspended while every live device's
// are in use.
class DevicePool {
public:
    DevicePool(const std::vector<BatchDevice>& devices, int per_device) : devices_(devices.size()) {
        for (std::size_t d = 0; d < devices.size(); ++d) {
            devices_[d].stats.name = devices[d].name;
            const int n = devices[d].processors > 0 ? std::min(devices[d].processors, per_device) : per_device;
            for (int i = 0; i < n; ++i) devices_[d].free.push_back(devices[d].factory());
            devices_[d].size = devices_[d].free.size();
        }
    }

    // Calls f(processor) on a processor of the device with the largest share
    // of its processors free (ties in turn), suspended while none is free
    // (a processor given back resumes the first task waiting); on
    // DeviceLost takes that device out and calls f again on another. Throws
    // the last DeviceLost when no device is left.
    template <class F>
    void with(F&& f) {
        for (;;) {
            std::size_t d = 0;
            std::unique_ptr<Processor> p;
            {
                std::unique_lock lock(mutex_);
                std::optional<std::size_t> pick;
                for (;;) {
                    if (!any_live()) throw DeviceLost("", "every device of this batch is unusable: " + last_lost_);
                    if ((pick = least_busy())) break;
                    // Suspended, not blocked: the worker thread meanwhile
                    // decodes and encodes other images (as in wait_for_stream).
                    tbb::task::suspend([&](tbb::task::suspend_point task) {
                        waiting_.push_back(task);
                        lock.unlock();
                    });
                    lock.lock();
                }
                d = *pick;
                p = std::move(devices_[d].free.back());
                devices_[d].free.pop_back();
            }
            const Clock::time_point t0 = Clock::now();
            try {
                f(*p);
            } catch (const DeviceLost& e) {
                std::deque<tbb::task::suspend_point> waiting;
                {
                    std::lock_guard lock(mutex_);
                    if (devices_[d].stats.lost.empty()) devices_[d].stats.lost = e.what();
                    last_lost_ = e.what();
                    waiting.swap(waiting_);
                }
                for (auto task : waiting) tbb::task::resume(task);  // they go elsewhere, or fail
                continue;  // p is dropped with its device, which is never picked again
            } catch (...) {
                give_back(d, std::move(p), t0, false);
                throw;
            }
            give_back(d, std::move(p), t0, true);
            return;
        }
    }

    // auto: starts the devices' JPEG codecs in the background now (the
    // first processor of each device asks), not at the first image's process stage.
    void start_jpeg_codecs() {
        std::lock_guard lock(mutex_);
        for (auto& d : devices_)
            if (!d.free.empty()) d.free.front()->jpeg_codec_ready();
    }

    // How many devices decode JPEG (the first processor of each answers for
    // its device; a device listed twice, cuda:0,0, counts once).
    int jpeg_decoders() const {
        std::vector<std::string> names;
        for (const auto& d : devices_)
            if (!d.free.empty() && d.free.front()->decodes_jpeg() &&
                std::find(names.begin(), names.end(), d.stats.name) == names.end())
                names.push_back(d.stats.name);
        return static_cast<int>(names.size());
    }

    std::vector<DeviceStats> stats() const {
        std::lock_guard lock(mutex_);
        std::vector<DeviceStats> s;
        for (const auto& d : devices_) {
            s.push_back(d.stats);
            for (const auto& p : d.free) s.back().path += p->path_times();
        }
        return s;
    }

private:
    struct Device {
        std::vector<std::unique_ptr<Processor>> free;
        std::size_t size = 0;  // its processors, free or not
        DeviceStats stats;
    };

    bool any_live() const {
        return std::any_of(devices_.begin(), devices_.end(), [](const Device& d) { return d.stats.lost.empty(); });
    }

    std::optional<std::size_t> least_busy() {
        std::optional<std::size_t> best;
        for (std::size_t i = 0; i < devices_.size(); ++i) {
            const std::size_t d = (turn_ + i) % devices_.size();
            const Device& dev = devices_[d];
            if (!dev.stats.lost.empty() || dev.free.empty()) continue;
            // free / size larger than the best's, without division
            if (!best || dev.free.size() * devices_[*best].size > devices_[*best].free.size() * dev.size) best = d;
        }
        if (best) turn_ = *best + 1;
        return best;
    }

    void give_back(std::size_t d, std::unique_ptr<Processor> p, Clock::time_point t0, bool done) {
        std::optional<tbb::task::suspend_point> next;
        {
            std::lock_guard lock(mutex_);
            devices_[d].free.push_back(std::move(p));
            devices_[d].stats.busy_s += seconds_since(t0);
            devices_[d].stats.images += done;
            if (!waiting_.empty()) {
                next = waiting_.front();
                waiting_.pop_front();
            }
        }
        if (next) tbb::task::resume(*next);
    }

    mutable std::mutex mutex_;
    std::deque<tbb::task::suspend_point> waiting_;  // tasks waiting for a processor, first come first
    std::vector<Device> devices_;
    std::size_t turn_ = 0;
    std::string last_lost_;
};

// Creates each output root and locks it once (two spellings of one folder
// would lock against each other), then clears a killed run's temporaries.
std::vector<std::unique_ptr<DirLock>> lock_outputs(const BatchPlan& plan, bool lock) {
    std::vector<std::unique_ptr<DirLock>> locks;
    std::set<FileId> locked;
    for (const fs::path& root : plan.output_roots) {
        std::error_code ec;
        fs::create_directories(root, ec);
        if (ec) throw Error(root.string(), "cannot create the output folder: " + ec.message());
        const auto id = file_id(root);
        if (lock && id && locked.insert(*id).second) locks.push_back(std::make_unique<DirLock>(root));
    }
    std::set<std::string> out_dirs;
    for (const BatchJob& job : plan.jobs) out_dirs.insert(job.output.parent_path().string());
    std::vector<fs::path> inputs;  // named like temporaries (rarely any): never removed
    const auto keep = [&](const fs::path& input) {
        if (is_temporary_name(input.filename().string())) inputs.push_back(input);
    };
    for (const BatchJob& job : plan.jobs) keep(job.input);
    for (const BatchItem& item : plan.rejected) keep(item.input);
    for (const std::string& dir : out_dirs) remove_stale_temporaries(dir.empty() ? "." : dir, inputs);
    return locks;
}

// The images being processed, each under its own TBB context: an interrupt
// cancels their parallel loops, so that the run ends without finishing
// them (the batch drops their results) instead of after them.
class InFlight {
public:
    // f() under a context of its own, which cancel() cancels.
    template <class F>
    void run(F&& f) {
        tbb::task_group_context ctx;
        tbb::task_group work(ctx);
        enter(ctx);
        struct Leave {
            InFlight& in_flight;
            tbb::task_group_context& ctx;
            ~Leave() { in_flight.leave(ctx); }
        } leave{*this, ctx};
        work.run_and_wait(std::forward<F>(f));
    }
    void cancel() {
        std::lock_guard lock(mutex_);
        cancelled_ = true;
        for (tbb::task_group_context* ctx : live_) ctx->cancel_group_execution();
    }

private:
    void enter(tbb::task_group_context& ctx) {
        std::lock_guard lock(mutex_);
        if (cancelled_) ctx.cancel_group_execution();
        live_.insert(&ctx);
    }
    void leave(tbb::task_group_context& ctx) {
        std::lock_guard lock(mutex_);
        live_.erase(&ctx);
    }

    std::mutex mutex_;
    std::set<tbb::task_group_context*> live_;
    bool cancelled_ = false;
};

// One run of a plan: the items' results, and the stages of the pipeline
// (read, process, write), each over one job's index.
class BatchRun {
public:
    BatchRun(const BatchPlan& plan, const std::vector<BatchDevice>& devices, const BatchOptions& options, int jobs,
             int k)
        : plan_(plan),
          options_(options),
          jobs_(jobs),
          k_(k),
          pool_(devices, k),
          slots_(plan.jobs.size()),
          jpeg_decoders_(options.jpeg == BatchOptions::JpegCodec::cpu ? 0 : pool_.jpeg_decoders()),
          jpeg_on_device_(jpeg_decoders_ > 0),
          mixed_codecs_(jpeg_on_device_ && options.jpeg == BatchOptions::JpegCodec::automatic &&
                        std::any_of(plan.jobs.begin(), plan.jobs.end(), [](const BatchJob& job) {
                            return output_format(job.input) == "JPEG" || output_format(job.output) == "JPEG";
                        })) {
        summary_.jobs = jobs;
        summary_.in_flight = k;
        summary_.overlap = options.overlap;
        summary_.items = plan.rejected;
        first_job_ = summary_.items.size();
        for (const BatchJob& job : plan.jobs) {
            BatchItem item;
            item.input = job.input;
            item.output = job.output;
            item.status =
                options.next_job ? ItemStatus::elsewhere : ItemStatus::cancelled;  // until the read stage takes it
            summary_.items.push_back(std::move(item));
        }
        progress_.total = summary_.items.size();
    }

    BatchSummary run() {
        start_ = Clock::now();
        if (mixed_codecs_) pool_.start_jpeg_codecs();
        for (std::size_t i = 0; i < first_job_; ++i) finished(summary_.items[i]);
        using tbb::make_filter;
        constexpr auto in_order = tbb::filter_mode::serial_in_order, parallel = tbb::filter_mode::parallel;
        // Watches BatchOptions::cancel for the images in flight (the stages
        // look at it themselves between images).
        std::jthread watcher;
        if (options_.cancel)
            watcher = std::jthread([this](std::stop_token stop) {
                std::mutex m;
                std::condition_variable_any wake;
                std::unique_lock lock(m);
                while (!wake.wait_for(lock, stop, std::chrono::milliseconds(20), [this] { return cancelled(); }))
                    if (stop.stop_requested()) return;
                in_flight_.cancel();
            });
        tbb::task_arena arena(jobs_);
        arena.execute([&] {
            tbb::parallel_pipeline(
                static_cast<std::size_t>(k_),
                make_filter<void, std::size_t>(in_order, [&](tbb::flow_control& fc) { return next_job(fc); }) &
                    make_filter<std::size_t, std::size_t>(parallel, [&](std::size_t i) { return read_stage(i); }) &
                    make_filter<std::size_t, std::size_t>(parallel, [&](std::size_t i) { return process_stage(i); }) &
                    make_filter<std::size_t, void>(parallel, [&](std::size_t i) { write_stage(i); }));
        });
        summary_.wall_s = seconds_since(start_);
        summary_.devices = pool_.stats();
        summarize();
        return std::move(summary_);
    }

private:
    struct Slot {
        cv::Mat input;
        std::vector<std::uint8_t> jpeg;  // an input left for the device's decoder
        bool counted = false;            // in device_jpegs_
        ImageMetadata metadata;
        Image output;
        std::vector<std::uint8_t> encoded;  // the output, encoded on the device
        int encoded_channels = 0;
    };

    bool cancelled() const { return options_.cancel && options_.cancel->load(); }
    BatchItem& result_of(std::size_t i) { return summary_.items[first_job_ + i]; }
    // Interrupted: the item ends as cancelled, whatever a stage had done.
    bool live(std::size_t i) {
        ItemStatus& status = result_of(i).status;
        if (status == ItemStatus::processed && cancelled()) status = ItemStatus::cancelled;
        return status == ItemStatus::processed;
    }

    std::size_t next_job(tbb::flow_control& fc) {
        if (cancelled()) {
            fc.stop();
            return 0;
        }
        if (options_.next_job) {
            const std::optional<std::size_t> i = options_.next_job();
            if (!i || *i >= plan_.jobs.size()) fc.stop();
            return i.value_or(0);
        }
        if (next_ == plan_.jobs.size()) fc.stop();
        return next_++;
    }

    std::size_t read_stage(std::size_t i) {
        const Clock::time_point t0 = Clock::now();
        const BatchJob& job = plan_.jobs[i];
        BatchItem& item = result_of(i);
        item.status = ItemStatus::processed;  // until a stage fails or skips it
        std::error_code ec;
        if (!live(i)) {
        } else if (options_.skip_existing &&
                   fs::is_regular_file(job.output, ec)) {  // a folder of that name is no output
            item.status = ItemStatus::skipped;
        } else if (same_file(job.input, job.output)) {
            item.status = ItemStatus::failed;
            item.error =
                job.input.string() + ": is also the output " + job.output.string() + "; cbi never overwrites its input";
        } else {
            attempt(item, job.input, [&] {
                std::vector<std::uint8_t> bytes = read_file(job.input);
                const std::string subject = job.input.string();
                const bool jpeg =
                    std::string_view(check_image(bytes, subject, options_.max_pixels, options_.max_bytes).format) ==
                    "JPEG";
                bool leave_to_device = jpeg && jpeg_on_device_ && options_.jpeg == BatchOptions::JpegCodec::device;
                // auto: to the device's decoder once it has started and while
                // it has few JPEGs waiting; the CPU's decoders take the rest.
                if (jpeg && mixed_codecs_ && device_decoder_ready_) {
                    leave_to_device = device_jpegs_.fetch_add(1) < kDeviceJpegs * jpeg_decoders_;
                    if (leave_to_device)
                        slots_[i].counted = true;
                    else
                        --device_jpegs_;
                }
                if (!leave_to_device) {
                    slots_[i].input = decode_image(bytes, subject, options_.max_pixels, options_.max_bytes);
                    if (jpeg) ++jpeg_on_cpu_;
                }
                slots_[i].metadata = input_metadata(bytes, subject, options_.write, item.warning);
                if (leave_to_device) slots_[i].jpeg = std::move(bytes);
            });
        }
        item.read_s = seconds_since(t0);
        return i;
    }

    std::size_t process_stage(std::size_t i) {
        struct Uncount {  // however the stage ends
            Slot& slot;
            std::atomic<int>& count;
            ~Uncount() {
                if (std::exchange(slot.counted, false)) --count;
            }
        } uncount{slots_[i], device_jpegs_};
        if (!live(i)) return i;
        const Clock::time_point t0 = Clock::now();
        BatchItem& item = result_of(i);
        attempt(item, plan_.jobs[i].input, [&] {
            pool_.with([&](Processor& processor) {
                // Isolated: while this thread waits inside the processor's
                // own parallel loops it must not pick up another image's
                // decode or encode, which would delay this image and blur
                // the stage times.
                tbb::this_task_arena::isolate([&] { in_flight_.run([&] { process_with(processor, i); }); });
            });
        });
        slots_[i].input = cv::Mat();  // free the decoded input now: memory stays ~K images
        slots_[i].jpeg = {};
        item.process_s = seconds_since(t0);
        return i;
    }

    void process_with(Processor& processor, std::size_t i) {
        Slot& slot = slots_[i];
        if (!slot.jpeg.empty()) {
            const fs::path& out = plan_.jobs[i].output;
            const bool wait = options_.jpeg == BatchOptions::JpegCodec::device;
            if (auto r = processor.process_jpeg(
                    slot.jpeg, output_format(out) == "JPEG" ? jpeg_quality(options_.write) : 0, wait)) {
                slot.output = std::move(r->image);
                slot.encoded = std::move(r->encoded);
                slot.encoded_channels = r->channels;
                ++jpeg_on_devices_;
                return;
            }
            // The device's decoder refused it (or is starting): the CPU's decoder reports a corrupt file.
            slot.input = decode_image(slot.jpeg, plan_.jobs[i].input.string(), options_.max_pixels, options_.max_bytes);
            slot.jpeg = {};
            ++jpeg_on_cpu_after_device_;
        }
        // auto: once the device's codec has started, it also encodes what the CPU decoded.
        int quality = 0;
        if (mixed_codecs_) {
            if (!device_codec_ready_ && processor.jpeg_codec_ready()) device_codec_ready_ = true;
            if (device_codec_ready_ && !device_decoder_ready_ && processor.jpeg_decoder_ready())
                device_decoder_ready_ = true;
            if (device_codec_ready_ && output_format(plan_.jobs[i].output) == "JPEG")
                quality = jpeg_quality(options_.write);
        }
        Processor::FileResult r = processor.process_file(view_of(slot.input), quality);
        slot.output = std::move(r.image);
        slot.encoded = std::move(r.encoded);
        slot.encoded_channels = r.channels;
    }

    void write_stage(std::size_t i) {
        BatchItem& item = result_of(i);
        if (live(i)) {
            const Clock::time_point t0 = Clock::now();
            const fs::path& out = plan_.jobs[i].output;
            attempt(item, out, [&] {
                std::error_code ec;
                if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
                if (ec) throw Error(out.parent_path().string(), "cannot create the folder: " + ec.message());
                Slot& slot = slots_[i];
                const std::string warning =
                    write_output(out, {std::move(slot.output), std::move(slot.encoded), slot.encoded_channels},
                                 options_.write, slot.metadata);
                if (item.warning.empty()) item.warning = warning;
            });
            if (item.status == ItemStatus::failed && cancelled()) {  // cut short by the interrupt
                item.status = ItemStatus::cancelled;
                item.error.clear();
            }
            item.write_s = seconds_since(t0);
        }
        slots_[i].output = Image();
        slots_[i].encoded = {};
        slots_[i].metadata = ImageMetadata();
        finished(item);
    }

    void finished(const BatchItem& item) {
        std::lock_guard lock(progress_mutex_);
        ++progress_.done;
        progress_.failed += item.status == ItemStatus::failed;
        progress_.skipped += item.status == ItemStatus::skipped;
        progress_.cancelled += item.status == ItemStatus::cancelled;
        progress_.elapsed_s = seconds_since(start_);
        progress_.item = &item;
        if (options_.on_progress) options_.on_progress(progress_);
    }

    void summarize() {
        const int lanes = std::min(k_, jobs_);
        summary_.stages = {{"read+decode", 0, lanes}, {"process", 0, lanes}, {"encode+write", 0, lanes}};
        for (const BatchItem& item : summary_.items) {
            summary_.stages[0].busy_s += item.read_s;
            summary_.stages[1].busy_s += item.process_s;
            summary_.stages[2].busy_s += item.write_s;
            summary_.processed += item.status == ItemStatus::processed;
            summary_.failed += item.status == ItemStatus::failed;
            summary_.skipped += item.status == ItemStatus::skipped;
            summary_.cancelled += item.status == ItemStatus::cancelled;
        }
        summary_.jpeg_on_devices = jpeg_on_devices_;
        summary_.jpeg_on_cpu = jpeg_on_cpu_ + jpeg_on_cpu_after_device_;
        summary_.jpeg_on_cpu_after_device = jpeg_on_cpu_after_device_;
    }

    const BatchPlan& plan_;
    const BatchOptions& options_;
    int jobs_, k_;
    DevicePool pool_;
    BatchSummary summary_;
    std::size_t first_job_ = 0;
    std::vector<Slot> slots_;
    const int jpeg_decoders_;  // devices that decode JPEG (0 with --codec cpu)
    const bool jpeg_on_device_;
    // auto with a JPEG among the inputs or outputs: the CPU's codecs and the
    // device's at once (nvJPEG is not started for a batch without JPEG).
    const bool mixed_codecs_;
    // auto: whether the devices' codecs (encoders) and decoders have started,
    // and how many JPEGs wait for their decoders. Enough per device to fill
    // its hardware decoder's batches (its processors, kGpuJpegBatchProcessors,
    // decode together); more would hold worker threads that the CPU's
    // decoders can use (docs/performance.md#device-jpegs).
    static constexpr int kDeviceJpegs = 48;
    std::atomic<bool> device_codec_ready_{false}, device_decoder_ready_{false};
    std::atomic<int> device_jpegs_{0};
    std::atomic<std::size_t> jpeg_on_devices_{0}, jpeg_on_cpu_{0}, jpeg_on_cpu_after_device_{0};  // for --stats
    InFlight in_flight_;
    std::mutex progress_mutex_;
    BatchProgress progress_;
    Clock::time_point start_;
    std::size_t next_ = 0;
};

}  // namespace

OutputFormat parse_output_format(std::string_view text) {
    if (text == "same") return OutputFormat::same;
    if (text == "png") return OutputFormat::png;
    if (text == "jpg") return OutputFormat::jpg;
    if (text == "tiff") return OutputFormat::tiff;
    throw std::invalid_argument("format '" + std::string(text) + "' must be same, png, jpg or tiff");
}

BatchPlan plan_folder(const FolderOptions& o) {
    std::error_code ec;
    if (!fs::is_directory(o.input_dir, ec)) throw Error(o.input_dir.string(), "is not a folder");
    const fs::path out_root = o.output_dir.empty() ? o.input_dir : o.output_dir;
    if (o.output_dir.empty() && !o.in_place)
        throw std::invalid_argument("an output folder is required unless in place");
    const bool same_dir = same_file(o.input_dir, out_root);
    if (same_dir && !o.in_place)
        throw std::invalid_argument(out_root.string() +
                                    " is the input folder; in-place mode writes NAME.cbi.EXT beside the inputs");
    BatchPlan plan;
    plan.output_roots.push_back(out_root);
    FolderWalker(o, out_root, same_dir, plan).walk(o.input_dir, {});
    check_overwrites(plan);
    return plan;
}

BatchPlan plan_files(const std::vector<fs::path>& inputs, const fs::path& output_dir, OutputFormat format,
                     bool in_place) {
    BatchPlan plan;
    Planner planner(plan);
    std::set<std::string> roots;
    for (const fs::path& input : inputs) {
        const fs::path dir = input.has_parent_path() ? input.parent_path() : fs::path(".");
        fs::path out;
        if (output_dir.empty()) {
            out = dir / output_name(input.filename(), format, true);
            roots.insert(dir.string());
        } else {
            const bool same_dir = same_file(dir, output_dir);
            if (same_dir && !in_place)
                throw std::invalid_argument(output_dir.string() + " is the folder of " + input.string() +
                                            "; in-place mode writes NAME.cbi.EXT beside the inputs");
            out = output_dir / output_name(input.filename(), format, same_dir);
        }
        planner.add(input, out);
    }
    if (!output_dir.empty()) roots.insert(output_dir.string());
    plan.output_roots.assign(roots.begin(), roots.end());
    check_overwrites(plan);
    return plan;
}

BatchSummary run_batch(const BatchPlan& plan, const ProcessorFactory& factory, const BatchOptions& options) {
    return run_batch(plan, std::vector<BatchDevice>{{"", factory}}, options);
}

BatchSummary run_batch(const BatchPlan& plan, const std::vector<BatchDevice>& devices, const BatchOptions& options) {
    if (devices.empty()) throw std::invalid_argument("a batch needs at least one device");
    if (options.jobs < 0) throw std::invalid_argument("jobs must be at least 1 (0: all cores)");
    if (options.in_flight < 0) throw std::invalid_argument("in-flight must be at least 1 (0: twice the jobs)");
    if (!plan.conflicts.empty()) throw std::invalid_argument(plan.conflicts.front());
    check_write_options(options.write);
    const int jobs = options.jobs > 0 ? options.jobs : tbb::info::default_concurrency();
    const int k = !options.overlap ? 1 : options.in_flight > 0 ? options.in_flight : 2 * jobs;
    const auto locks = lock_outputs(plan, options.lock_output_roots);
    return BatchRun(plan, devices, options, jobs, k).run();
}

bool jpeg_on_device(const BatchPlan& plan, BatchOptions::JpegCodec codec) {
    return codec != BatchOptions::JpegCodec::cpu &&
           std::any_of(plan.jobs.begin(), plan.jobs.end(),
                       [](const BatchJob& job) { return output_format(job.input) == "JPEG"; });
}

}  // namespace cbi
