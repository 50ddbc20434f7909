#include "mpi_ranks.hpp"

#if CBI_HAVE_MPI
#include <mpi.h>
#endif

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cbi_app {

#if CBI_HAVE_MPI
namespace {

// Launched by an MPI launcher: Open MPI's mpirun, or PMI/PMIx (srun --mpi, hydra).
bool launched_by_mpi() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
        if (std::getenv(v)) return true;
    return false;
}

constexpr int kRequestTag = 1, kReplyTag = 2;
constexpr std::int64_t kNoJob = -1;
// Waits poll with this pause: a blocking MPI call spins a core, which the
// codecs need (and ranks may share a host's cores).
constexpr auto kPoll = std::chrono::microseconds(200);

void check(int status, const char* what) {
    if (status != MPI_SUCCESS) throw std::runtime_error(std::string("MPI: ") + what + " failed");
}

// Waits for `request`, pausing between polls; false if `cancel` was set first.
bool wait(MPI_Request& request, const std::atomic<bool>* cancel) {
    for (;;) {
        int done = 0;
        check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) return true;
        if (cancel && cancel->load()) return false;
        std::this_thread::sleep_for(kPoll);
    }
}

// A request: the asking rank's processed, failed, skipped and cancelled counts.
using Counts = std::array<std::uint64_t, 4>;
Counts to_wire(const RankCounts& c) {
    return {c.processed, c.failed, c.skipped, c.cancelled};
}
RankCounts from_wire(const Counts& w) {
    return {w[0], w[1], w[2], w[3]};
}

}  // namespace

struct MpiRanks::State {
    std::size_t total = 0;
    std::atomic<std::size_t> next{0};  // rank 0: the next job to hand out
    std::thread dispatcher;            // rank 0: answers the other ranks
    std::atomic<bool> stop{false};
    mutable std::mutex counts_mutex;
    std::vector<RankCounts> reported;  // rank 0: what each other rank last reported
    RankCounts mine;                   // this rank's, sent with the next request
    bool abandoned = false;

    std::int64_t take() {
        const std::size_t i = next.fetch_add(1);
        return i < total ? static_cast<std::int64_t>(i) : kNoJob;
    }

    // Rank 0's thread: one reply per request, until every other rank was
    // told there is no job left (or the run is being abandoned).
    void dispatch(int size) {
        int finished = 0;
        while (finished < size - 1 && !stop.load()) {
            Counts counts{};
            MPI_Status status;
            MPI_Request request;
            check(MPI_Irecv(counts.data(), 4, MPI_UINT64_T, MPI_ANY_SOURCE, kRequestTag, MPI_COMM_WORLD, &request),
                  "MPI_Irecv");
            int done = 0;
            while (!done) {
                check(MPI_Test(&request, &done, &status), "MPI_Test");
                if (!done && stop.load()) {
                    MPI_Cancel(&request);
                    MPI_Request_free(&request);
                    return;
                }
                if (!done) std::this_thread::sleep_for(kPoll);
            }
            {
                std::lock_guard lock(counts_mutex);
                reported[status.MPI_SOURCE] = from_wire(counts);
            }
            const std::int64_t job = take();
            if (job == kNoJob) ++finished;
            check(MPI_Send(&job, 1, MPI_INT64_T, status.MPI_SOURCE, kReplyTag, MPI_COMM_WORLD), "MPI_Send");
        }
    }
};

std::unique_ptr<MpiRanks> MpiRanks::join_if_launched(int* argc, char*** argv) {
    if (!launched_by_mpi()) return nullptr;
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_SERIALIZED)
        throw std::runtime_error("MPI: this MPI library cannot serve calls from several threads");
    std::unique_ptr<MpiRanks> ranks(new MpiRanks());
    ranks->state_ = std::make_unique<State>();
    MPI_Comm_rank(MPI_COMM_WORLD, &ranks->rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks->size_);
    MPI_Comm host;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, ranks->rank_, MPI_INFO_NULL, &host),
          "MPI_Comm_split_type");
    MPI_Comm_rank(host, &ranks->local_rank_);
    MPI_Comm_free(&host);
    return ranks;
}

MpiRanks::~MpiRanks() {
    State& s = *state_;
    if (s.dispatcher.joinable()) {
        if (s.abandoned) s.stop = true;
        s.dispatcher.join();
    }
    if (!s.abandoned) MPI_Finalize();
}

void MpiRanks::start(std::size_t total) {
    state_->total = total;
    state_->reported.assign(static_cast<std::size_t>(size_), RankCounts{});
    if (rank_ == 0 && size_ > 1) state_->dispatcher = std::thread([this] { state_->dispatch(size_); });
}

std::optional<std::size_t> MpiRanks::next_job(const std::atomic<bool>* cancel) {
    State& s = *state_;
    std::int64_t job = kNoJob;
    if (rank_ == 0) {
        job = s.take();
    } else {
        Counts counts;
        {
            std::lock_guard lock(s.counts_mutex);
            counts = to_wire(s.mine);
        }
        MPI_Request send, reply;
        check(MPI_Isend(counts.data(), 4, MPI_UINT64_T, 0, kRequestTag, MPI_COMM_WORLD, &send), "MPI_Isend");
        check(MPI_Irecv(&job, 1, MPI_INT64_T, 0, kReplyTag, MPI_COMM_WORLD, &reply), "MPI_Irecv");
        if (!wait(send, cancel) || !wait(reply, cancel)) return std::nullopt;  // interrupted: the job is ending
    }
    if (job == kNoJob) return std::nullopt;
    return static_cast<std::size_t>(job);
}

void MpiRanks::report(const RankCounts& mine) {
    std::lock_guard lock(state_->counts_mutex);
    state_->mine = mine;
}

RankCounts MpiRanks::others() const {
    std::lock_guard lock(state_->counts_mutex);
    RankCounts sum;
    for (std::size_t r = 1; r < state_->reported.size(); ++r) {
        sum.processed += state_->reported[r].processed;
        sum.failed += state_->reported[r].failed;
        sum.skipped += state_->reported[r].skipped;
        sum.cancelled += state_->reported[r].cancelled;
    }
    return sum;
}

RankCounts MpiRanks::combine(const RankCounts& mine) {
    if (state_->dispatcher.joinable()) state_->dispatcher.join();  // every other rank has had its last answer
    Counts in = to_wire(mine), out{};
    check(MPI_Allreduce(in.data(), out.data(), 4, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    return from_wire(out);
}

std::vector<std::string> MpiRanks::gather(const std::string& mine) {
    const int length = static_cast<int>(mine.size());
    std::vector<int> lengths(rank_ == 0 ? size_ : 0), offsets(lengths.size());
    check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
    std::string all;
    if (rank_ == 0) {
        for (int r = 1; r < size_; ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
        all.resize(static_cast<std::size_t>(offsets.back() + lengths.back()));
    }
    check(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
                      MPI_COMM_WORLD),
          "MPI_Gatherv");
    std::vector<std::string> texts;
    for (int r = 0; r < static_cast<int>(lengths.size()); ++r) texts.push_back(all.substr(offsets[r], lengths[r]));
    return texts;
}

MpiRanks::Agreement MpiRanks::agree(int code) {
    int in[2] = {code, rank_}, out[2] = {0, 0};
    check(MPI_Allreduce(in, out, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD), "MPI_Allreduce");
    return {out[0], out[1] == rank_};
}

void MpiRanks::abandon() {
    state_->abandoned = true;
}

void MpiRanks::abort(int code) {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
}

#else  // built without MPI: a launcher's several processes would each run every job.

struct MpiRanks::State {};

// Only Open MPI's mpirun is refused: under srun a step's tasks take shards
// from SLURM_PROCID instead.
std::unique_ptr<MpiRanks> MpiRanks::join_if_launched(int*, char***) {
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (size && std::string(size) != "1" && !std::getenv("SLURM_PROCID"))
        throw std::runtime_error(
            "this cbi-filter was built without MPI, so mpirun's copies cannot share the work; "
            "rebuild with MPI (docs/batch.md) or give each copy --shard K/N");
    return nullptr;
}
// Never reached: join_if_launched makes no MpiRanks here.
MpiRanks::~MpiRanks() = default;
void MpiRanks::start(std::size_t) {}
std::optional<std::size_t> MpiRanks::next_job(const std::atomic<bool>*) {
    return std::nullopt;
}
void MpiRanks::report(const RankCounts&) {}
RankCounts MpiRanks::others() const {
    return {};
}
RankCounts MpiRanks::combine(const RankCounts& mine) {
    return mine;
}
std::vector<std::string> MpiRanks::gather(const std::string& mine) {
    return {mine};
}
MpiRanks::Agreement MpiRanks::agree(int code) {
    return {code, true};
}
void MpiRanks::abandon() {}
void MpiRanks::abort(int code) {
    std::_Exit(code);
}

#endif

}  // namespace cbi_app
