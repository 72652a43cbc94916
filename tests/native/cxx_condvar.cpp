// C++ on the simulated clock: std::thread, std::condition_variable::wait_for (pthread_cond_clockwait on
// steady_clock), notify_one, std::this_thread::sleep_for (nanosleep), steady_clock::now (clock_gettime).
// A producer pushes k every 30 ms; a consumer waits for each with a 100 ms timeout; a third thread waits on a
// variable nobody notifies, timing out every 70 ms, three times. Prints "WHO K MS" (ms since the start).
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <queue>
#include <thread>

using namespace std::chrono;

static steady_clock::time_point start;
static std::mutex out_mutex;

static void report(const char *who, int k) {
    std::lock_guard<std::mutex> lock(out_mutex);
    std::printf("%s %d %lld\n", who, k, (long long)duration_cast<milliseconds>(steady_clock::now() - start).count());
}

int main() {
    start = steady_clock::now();
    std::mutex m, idle_m;
    std::condition_variable cv, idle_cv;
    std::queue<int> q;
    std::thread producer([&] {
        for (int k = 1; k <= 10; k++) {
            std::this_thread::sleep_for(milliseconds(30));
            { std::lock_guard<std::mutex> lock(m); q.push(k); }
            cv.notify_one();
        }
    });
    std::thread consumer([&] {
        for (int k = 1; k <= 10; k++) {
            std::unique_lock<std::mutex> lock(m);
            if (!cv.wait_for(lock, milliseconds(100), [&] { return !q.empty(); })) { report("missed", k); continue; }
            int got = q.front();
            q.pop();
            lock.unlock();
            report("got", got);
        }
    });
    std::thread idler([&] {
        for (int k = 1; k <= 3; k++) {
            std::unique_lock<std::mutex> lock(idle_m);
            std::cv_status status = idle_cv.wait_for(lock, milliseconds(70));
            lock.unlock();
            report(status == std::cv_status::timeout ? "timeout" : "woken", k);
        }
    });
    producer.join();
    consumer.join();
    idler.join();
    report("end", 0);
    return 0;
}
