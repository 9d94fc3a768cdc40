// cudaemu's kernel launch: each block's threads as fibers on one OS thread, blocks spread over
// a pool of OS threads (include/cudaemu_device.h says what that checks).
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define ASAN_START(fake, bottom, size) __sanitizer_start_switch_fiber(fake, bottom, size)
#define ASAN_FINISH(fake, bottom, size) __sanitizer_finish_switch_fiber(fake, bottom, size)
static const size_t FIBER_STACK = 512 * 1024; // ASan's frames are several times larger
#else
#define ASAN_START(fake, bottom, size) ((void)(fake), (void)(bottom), (void)(size))
#define ASAN_FINISH(fake, bottom, size) ((void)(fake), (void)(bottom), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
static const size_t FIBER_STACK = 128 * 1024;
#endif

// ---------------------------------------------------------------------------------------
// fibers

// A switch saves the callee-saved registers on the old stack and restores them from the new
// one: a few nanoseconds, where ucontext's swapcontext makes a system call (sigprocmask) each
// time, and one decode attention block switches some 10^5 times.
#if defined(__x86_64__)
extern "C" void cudaemu_switch(void **save_sp, void *load_sp);
asm(".text\n"
    ".globl cudaemu_switch\n"
    ".type cudaemu_switch,@function\n"
    "cudaemu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size cudaemu_switch, .-cudaemu_switch\n");

struct context {
    void *sp;
};

static void switch_to(context *from, context *to)
{
    cudaemu_switch(&from->sp, to->sp);
}

// A new fiber's stack as cudaemu_switch leaves a suspended one: six saved registers, then
// ENTRY as the return address, then a slot that leaves the stack aligned the way a call
// would at ENTRY's first instruction (rsp = 8 mod 16).
static void start_context(context *c, char *stack, size_t size, void (*entry)(void))
{
    uintptr_t top = ((uintptr_t)(stack + size)) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;
    *--sp = (void *)entry;
    for (int i = 0; i < 6; i++)
        *--sp = NULL;
    c->sp = sp;
}
#else
#include <ucontext.h>
struct context {
    ucontext_t uc;
};

static void switch_to(context *from, context *to)
{
    swapcontext(&from->uc, &to->uc);
}

static void start_context(context *c, char *stack, size_t size, void (*entry)(void))
{
    getcontext(&c->uc);
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL;
    makecontext(&c->uc, entry, 0);
}
#endif

// A fiber's stack with an inaccessible page below it, so an overflow faults instead of
// writing over the next stack.
struct fiber_stack {
    char *base = nullptr; // the guard page; the stack is the FIBER_STACK bytes above it
    fiber_stack()
    {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        void *p = mmap(NULL, page + FIBER_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED || mprotect(p, page, PROT_NONE) != 0)
            cudaemu_fatal("cannot map a fiber stack");
        base = (char *)p;
    }
    ~fiber_stack() { munmap(base, (size_t)sysconf(_SC_PAGESIZE) + FIBER_STACK); }
    char *stack() const { return base + sysconf(_SC_PAGESIZE); }
};

enum fiber_state { READY, WAITING, DONE };

struct fiber {
    context ctx;
    unsigned shuffles; // shuffles so far: their parity picks the exchange buffer
    fiber_state state;
    cudaemu_barrier_kind kind;
    cudaemu_coords coords;
};

struct block_run {
    const char *kernel;
    const std::function<void()> *body;
    int n, live, cur;
    int at_syncthreads;                    // threads waiting at __syncthreads
    std::vector<int> warp_live, warp_wait; // per warp: lanes not returned, lanes at a warp op
    uint3 block;
    std::vector<fiber> fibers;
    std::vector<uint64_t> slots[2]; // shuffle exchange, one per thread, used in turns
    context sched;
};

// Per OS thread: each runs whole blocks, one at a time.
__thread const cudaemu_coords *cudaemu_here;
static thread_local block_run *run;
static thread_local std::vector<std::unique_ptr<fiber_stack>> stacks;
static thread_local const void *sched_stack_bottom;
static thread_local size_t sched_stack_size;
static thread_local unsigned char *dynamic_shared;
static thread_local size_t dynamic_shared_bytes;

[[noreturn]] static void fatal_in_block(const char *what)
{
    char msg[512];
    snprintf(msg, sizeof msg, "kernel %s, block (%u, %u, %u): %s", run->kernel, run->block.x,
             run->block.y, run->block.z, what);
    cudaemu_fatal(msg);
}

static void to_scheduler(fiber &f, bool done)
{
    void *fake = NULL;
    ASAN_START(done ? NULL : &fake, sched_stack_bottom, sched_stack_size);
    switch_to(&f.ctx, &run->sched);
    ASAN_FINISH(fake, NULL, NULL);
    cudaemu_here = &f.coords;
}

static void fiber_main(void)
{
    ASAN_FINISH(NULL, &sched_stack_bottom, &sched_stack_size);
    (*run->body)();
    fiber &f = run->fibers[run->cur];
    f.state = DONE;
    run->live--;
    run->warp_live[run->cur >> 5]--;
    to_scheduler(f, true);
    cudaemu_fatal("a finished thread was resumed");
}

static void to_fiber(int t)
{
    void *fake = NULL;
    run->cur = t;
    cudaemu_here = &run->fibers[t].coords;
    ASAN_START(&fake, stacks[t]->stack(), FIBER_STACK);
    switch_to(&run->sched, &run->fibers[t].ctx);
    ASAN_FINISH(fake, NULL, NULL);
}

// ---------------------------------------------------------------------------------------
// what device code calls

static int lanes_in_warp(int t)
{
    const int w0 = t & ~31;
    return run->n - w0 < 32 ? run->n - w0 : 32;
}

void cudaemu_barrier(cudaemu_barrier_kind kind)
{
    fiber &f = run->fibers[run->cur];
    if ((kind == CUDAEMU_SHUFFLE || kind == CUDAEMU_WMMA) && lanes_in_warp(run->cur) < 32) {
        char what[96];
        snprintf(what, sizeof what, "a %s in a warp of %d threads",
                 kind == CUDAEMU_WMMA ? "WMMA call" : "full-mask shuffle",
                 lanes_in_warp(run->cur));
        fatal_in_block(what);
    }
    f.state = WAITING;
    f.kind = kind;
    if (kind == CUDAEMU_SYNCTHREADS)
        run->at_syncthreads++;
    else
        run->warp_wait[run->cur >> 5]++;
    to_scheduler(f, false);
}

void cudaemu_syncwarp(unsigned mask)
{
    if (mask != 0xffffffffu)
        fatal_in_block("__syncwarp with a partial mask (cudaemu models full warps only)");
    cudaemu_barrier(CUDAEMU_SYNCWARP);
}

void cudaemu_device_error(const char *what)
{
    fatal_in_block(what);
}

int cudaemu_lane(void)
{
    return run->cur & 31;
}

void *cudaemu_dynamic_shared(void)
{
    return dynamic_shared;
}

void cudaemu_shuffle(unsigned mask, const void *value, void *out, size_t size, int src_lane)
{
    const int t = run->cur, warp0 = t & ~31;
    if (mask != 0xffffffffu) {
        char what[96];
        snprintf(what, sizeof what, "a shuffle with mask %#x (cudaemu models full warps only)",
                 mask);
        fatal_in_block(what);
    }
    // One barrier a shuffle: a lane can write this buffer again only two shuffles later,
    // past the next shuffle's barrier, which every lane reaches after reading this one.
    std::vector<uint64_t> &slots = run->slots[run->fibers[t].shuffles++ & 1];
    memcpy(&slots[t], value, size);
    cudaemu_barrier(CUDAEMU_SHUFFLE); // release() checks that no lane has returned
    const int src = src_lane >= 0 && src_lane < 32 ? src_lane : t - warp0;
    memcpy(out, &slots[warp0 + src], size);
}

// ---------------------------------------------------------------------------------------
// the scheduler of a block

static int first_live(int w0, int end)
{
    for (int t = w0; t < end; t++)
        if (run->fibers[t].state != DONE)
            return t;
    return w0;
}

// Lets go every warp whose live lanes all wait at a warp operation, then the block when every
// live thread waits at __syncthreads. False when nothing could go on.
static bool release(void)
{
    bool any = false;
    for (int w = 0, w0 = 0; w0 < run->n; w++, w0 += 32) {
        const int live = run->warp_live[w], end = w0 + 32 < run->n ? w0 + 32 : run->n;
        if (!live || run->warp_wait[w] != live)
            continue;
        const cudaemu_barrier_kind k = run->fibers[first_live(w0, end)].kind;
        for (int t = w0; t < end; t++)
            if (run->fibers[t].state == WAITING) {
                if (run->fibers[t].kind != k)
                    fatal_in_block("lanes of one warp wait at different warp operations");
                run->fibers[t].state = READY;
            }
        if ((k == CUDAEMU_SHUFFLE || k == CUDAEMU_WMMA) && live < end - w0)
            fatal_in_block(k == CUDAEMU_WMMA ? "a WMMA call after a lane of its warp returned"
                                             : "a shuffle after a lane of its warp returned");
        run->warp_wait[w] = 0;
        any = true;
    }
    if (any)
        return true;
    if (run->at_syncthreads != run->live)
        return false;
    for (auto &f : run->fibers)
        if (f.state == WAITING)
            f.state = READY;
    run->at_syncthreads = 0;
    return true;
}

[[noreturn]] static void stuck(void)
{
    int at_block = 0, at_warp = 0;
    for (auto &f : run->fibers)
        if (f.state == WAITING)
            (f.kind == CUDAEMU_SYNCTHREADS ? at_block : at_warp)++;
    char what[200];
    snprintf(what, sizeof what, "threads wait at barriers that will never open: %d at "
             "__syncthreads while %d wait at warp operations for them (%d returned)",
             at_block, at_warp, run->n - run->live);
    fatal_in_block(what);
}

static void start_block(uint3 block, dim3 grid, dim3 dims)
{
    const int n = run->n;
    run->block = block;
    run->live = n;
    run->at_syncthreads = 0;
    for (int w = 0; w * 32 < n; w++) {
        run->warp_live[w] = n - w * 32 < 32 ? n - w * 32 : 32;
        run->warp_wait[w] = 0;
    }
    for (int t = 0; t < n; t++) {
        fiber &f = run->fibers[t];
        f.state = READY;
        f.shuffles = 0;
        f.coords.thread_idx = {t % dims.x, t / dims.x % dims.y, t / (dims.x * dims.y)};
        f.coords.block_idx = block;
        f.coords.block_dim = dims;
        f.coords.grid_dim = grid;
        ASAN_UNPOISON_MEMORY_REGION(stacks[t]->stack(), FIBER_STACK);
        start_context(&f.ctx, stacks[t]->stack(), FIBER_STACK, fiber_main);
    }
    if (dynamic_shared)
        memset(dynamic_shared, 0xff, dynamic_shared_bytes);
}

static void run_block(uint3 block, dim3 grid, dim3 dims, bool reverse)
{
    start_block(block, grid, dims);
    const int n = run->n;
    while (run->live > 0) {
        for (int k = 0; k < n; k++) {
            int t = reverse ? n - 1 - k : k;
            if (run->fibers[t].state == READY)
                to_fiber(t);
        }
        if (run->live > 0 && !release())
            stuck();
    }
}

// ---------------------------------------------------------------------------------------
// grids over a pool of OS threads

struct grid_job {
    const char *name;
    dim3 grid, block;
    size_t smem;
    const std::function<void()> *body;
    unsigned long long order; // flips the thread order of every block from launch to launch
    std::atomic<unsigned long long> next;
};

// Runs the job's blocks as they come, on this OS thread. The dynamic shared memory is a heap
// block of exactly the size launched with, so that ASan sees a kernel reading past it.
static void run_blocks(grid_job &job)
{
    if (run)
        cudaemu_fatal("a kernel launched from inside a kernel");
    const int n = (int)(job.block.x * job.block.y * job.block.z);
    while ((int)stacks.size() < n)
        stacks.emplace_back(new fiber_stack());
    std::unique_ptr<unsigned char[]> smem(job.smem ? new unsigned char[job.smem] : nullptr);
    dynamic_shared = smem.get();
    dynamic_shared_bytes = job.smem;
    block_run r;
    r.kernel = job.name;
    r.body = job.body;
    r.n = n;
    r.cur = 0;
    r.fibers.resize(n);
    r.warp_live.assign((n + 31) / 32, 0);
    r.warp_wait.assign((n + 31) / 32, 0);
    r.slots[0].assign(n, 0);
    r.slots[1].assign(n, 0);
    run = &r;
    const dim3 g = job.grid;
    const unsigned long long total = (unsigned long long)g.x * g.y * g.z;
    for (unsigned long long i; (i = job.next++) < total;) {
        uint3 b = {(unsigned)(i % g.x), (unsigned)(i / g.x % g.y),
                   (unsigned)(i / ((unsigned long long)g.x * g.y))};
        run_block(b, g, job.block, ((i ^ job.order) & 1) != 0);
    }
    run = NULL;
    cudaemu_here = NULL;
    dynamic_shared = NULL;
}

// Helper threads live as long as the process (their fiber stacks with them) and wait for the
// next grid. The pool is never destroyed: a condition variable destroyed at exit while the
// helpers wait on it blocks the exit.
struct pool_state {
    std::mutex mutex;
    std::condition_variable wake, done;
    grid_job *job = nullptr;
    unsigned long long generation = 0;
    unsigned size = 0, busy = 0;
};
static pool_state *pool;

static void helper_main(void)
{
    unsigned long long seen = 0;
    for (;;) {
        grid_job *job;
        {
            std::unique_lock<std::mutex> lock(pool->mutex);
            pool->wake.wait(lock, [&]() { return pool->generation != seen; });
            seen = pool->generation;
            job = pool->job;
        }
        run_blocks(*job);
        std::lock_guard<std::mutex> lock(pool->mutex);
        if (--pool->busy == 0)
            pool->done.notify_one();
    }
}

// Blocks are independent (a kernel that makes one wait for another is wrong on a GPU too),
// so they spread over the machine's cores; __shared__ is thread_local for that reason.
static void run_grid(grid_job &job)
{
    if (!pool) {
        pool = new pool_state();
        unsigned cores = std::thread::hardware_concurrency();
        pool->size = cores > 1 ? cores - 1 : 0;
        for (unsigned h = 0; h < pool->size; h++)
            std::thread(helper_main).detach();
    }
    const unsigned long long total = (unsigned long long)job.grid.x * job.grid.y * job.grid.z;
    const bool share = pool->size > 0 && total > 1;
    if (share) {
        std::lock_guard<std::mutex> lock(pool->mutex);
        pool->job = &job;
        pool->busy = pool->size;
        pool->generation++;
        pool->wake.notify_all();
    }
    run_blocks(job);
    if (share) {
        std::unique_lock<std::mutex> lock(pool->mutex);
        pool->done.wait(lock, []() { return pool->busy == 0; });
    }
}

static bool valid_config(dim3 grid, dim3 block)
{
    const unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    return threads && threads <= 1024 && block.x <= 1024 && block.y <= 1024 && block.z <= 64
        && grid.x && grid.y && grid.z && grid.x <= 0x7fffffffu && grid.y <= 65535
        && grid.z <= 65535;
}

void cudaemu_launch(const char *name, const void *func, dim3 grid, dim3 block, size_t smem,
                    struct CUstream_st *stream, std::function<void()> body)
{
    static std::atomic<unsigned long long> launches(0);
    if (!valid_config(grid, block)) {
        cudaemu_fail(cudaErrorInvalidConfiguration);
        return;
    }
    if (smem > cudaemu_dynamic_smem_limit(func)) {
        cudaemu_fail(cudaErrorInvalidValue);
        return;
    }
    const unsigned long long order = launches++;
    cudaemu_enqueue(stream, [name, grid, block, smem, body, order]() {
        grid_job job;
        job.name = name;
        job.grid = grid;
        job.block = block;
        job.smem = smem;
        job.body = &body;
        job.order = order;
        job.next = 0;
        run_grid(job);
    });
}
