#pragma once
// cbi-filter as one rank of an MPI job (when built with MPI, CBI_HAVE_MPI):
//   mpirun -n R cbi-filter --input-dir IN --output-dir OUT ...
// Every rank plans the same jobs (the folder listing is deterministic).
// Rank 0 keeps the counter of the next job; a rank asks for one job each
// time its pipeline can take another image, so a rank that finishes early
// takes more (images differ in size). Each request carries the asking
// rank's counts so far, so rank 0 can print one progress line for all; at
// the end the counts are summed over the ranks and every rank exits with
// the same code. A rank that dies loses only its images in flight: outputs
// are written atomically, and a rerun with --skip-existing completes the job.
#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cbi_app {

struct RankCounts {
    std::size_t processed = 0, failed = 0, skipped = 0, cancelled = 0;
};

class MpiRanks {
public:
    // Joins the MPI job when an MPI launcher started this process (Open
    // MPI's mpirun, or a PMI/PMIx launcher such as srun); nullptr otherwise,
    // and nothing of MPI is touched. Call after the signal thread exists, so
    // that MPI's threads inherit its signal mask.
    static std::unique_ptr<MpiRanks> join_if_launched(int* argc, char*** argv);
    ~MpiRanks();
    MpiRanks(const MpiRanks&) = delete;
    MpiRanks& operator=(const MpiRanks&) = delete;

    int rank() const { return rank_; }
    int size() const { return size_; }
    int local_rank() const { return local_rank_; }  // among the ranks on this host: picks the GPU

    // Before any job: every rank says whether it is ready (0) or the exit
    // code of the error that stops it. Returns the largest code over the
    // ranks and whether this rank is the one that reports it (the lowest
    // rank with that code), so an error is printed once. A collective.
    struct Agreement {
        int code = 0;
        bool reporter = false;
    };
    Agreement agree(int code);

    // Starts handing out `total` jobs (rank 0 answers the others from a
    // thread of its own). Every rank calls it once, before next_job.
    void start(std::size_t total);
    // The next job for this rank, or nullopt when none is left (or `cancel`
    // was set while waiting). One thread at a time.
    std::optional<std::size_t> next_job(const std::atomic<bool>* cancel);
    // This rank's counts so far, sent with its next request.
    void report(const RankCounts& mine);
    // Rank 0: the counts the other ranks last reported.
    RankCounts others() const;
    // After every rank's batch: the counts summed over the ranks, on every
    // rank (a collective: all ranks must call it).
    RankCounts combine(const RankCounts& mine);
    // After every rank's batch: each rank's text, in rank order, on rank 0
    // (empty on the others). A collective, like combine.
    std::vector<std::string> gather(const std::string& mine);
    // After an interrupt: leave without collectives or MPI_Finalize (the
    // launcher is ending the job; the other ranks may be gone).
    void abandon();
    // A rank that cannot go on once jobs are handed out: ends the whole job.
    [[noreturn]] void abort(int code);

private:
    MpiRanks() = default;
    struct State;
    std::unique_ptr<State> state_;
    int rank_ = 0, size_ = 1, local_rank_ = 0;
};

}  // namespace cbi_app
