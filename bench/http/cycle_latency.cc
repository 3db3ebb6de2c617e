// Load generator for the extender's hot path: on ONE keep-alive connection,
// sends filter then prioritize (one kube-scheduler cycle) for the same
// ExtenderArgs, N times, and prints per-cycle latency percentiles and the
// cycle rate. Plain POSIX sockets, loopback only.
// Usage: cycle_latency HOST PORT BODY_FILE CYCLES
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads one Content-Length framed response; returns the status or -1.
int ReadResponse(int fd, std::string& buf) {
  char tmp[1 << 16];
  size_t end;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) return -1;
    buf.append(tmp, static_cast<size_t>(n));
  }
  int status = std::atoi(buf.c_str() + 9);
  size_t cl = 0;
  auto pos = buf.find("Content-Length: ");
  if (pos != std::string::npos && pos < end) cl = std::strtoul(buf.c_str() + pos + 16, nullptr, 10);
  while (buf.size() < end + 4 + cl) {
    ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) return -1;
    buf.append(tmp, static_cast<size_t>(n));
  }
  buf.erase(0, end + 4 + cl);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: cycle_latency HOST PORT BODY_FILE CYCLES\n");
    return 2;
  }
  std::ifstream in(argv[3]);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string body = ss.str();
  const int cycles = std::atoi(argv[4]);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[2])));
  inet_pton(AF_INET, argv[1], &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    std::perror("connect");
    return 1;
  }
  auto request = [&](const char* verb) {
    return std::string("POST /scheduler/") + verb +
           " HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  const std::string filter = request("filter");
  const std::string prioritize = request("prioritize");
  std::string buf;
  std::vector<double> us;
  us.reserve(cycles);
  const int warmup = std::min(50, cycles / 10);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < cycles + warmup; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (!SendAll(fd, filter) || ReadResponse(fd, buf) != 200) return 1;
    if (!SendAll(fd, prioritize) || ReadResponse(fd, buf) != 200) return 1;
    auto stop = std::chrono::steady_clock::now();
    if (i == warmup) t0 = start;
    if (i >= warmup) us.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) {
    return us[std::min(us.size() - 1, static_cast<size_t>(p * us.size()))];
  };
  std::printf("cycles=%d p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f cycles_per_s=%.0f\n",
              cycles, pct(0.50) / 1000, pct(0.90) / 1000, pct(0.99) / 1000, us.back() / 1000,
              cycles / total);
  close(fd);
  return 0;
}
