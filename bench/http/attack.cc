// Hostile-client bench: runs one attack on a running `gpusched serve` while a
// well-behaved client sends a filter on a NEW connection every 50 ms (as
// kube-scheduler may), from the same source address as the attack. Prints
// the well-behaved filters' latency and status, and the server's peak
// resident memory (VmRSS sampled every 10 ms from /proc/PID/status).
// Plain POSIX sockets, loopback only.
//
// Usage: attack HOST PORT SERVER_PID MODE SECONDS GOOD_BODY_FILE
// MODE:
//   none            no attack (baseline)
//   answers         6 clients, each a ~33 MB filter of ~3 M unknown node
//                   names (a ~190 MB answer) with SO_RCVBUF 4096, never
//                   reading the answer; repeated
//   headers-only    200 connections each sending only the header of a
//                   32 MiB POST; reopened when closed
//   stalled-bodies  8 clients each sending all but the last byte of a
//                   32 MiB body, then waiting; repeated
//   slowloris       300 connections dribbling a header, one byte per
//                   connection every 100 ms; reopened when closed
//   many-headers    4 clients sending 10,000 header fields (~109 KB); repeated
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

const char* g_host = "127.0.0.1";
uint16_t g_port = 0;
std::atomic<bool> g_stop{false};

// A connected socket (-1 on failure). `rcvbuf` > 0 is set before connecting.
int Connect(int rcvbuf = 0) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(g_port);
  inet_pton(AF_INET, g_host, &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size() && !g_stop) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Waits until the peer closes its side (or `limit` passes), reading nothing.
void WaitPeerClose(int fd, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  while (!g_stop && Clock::now() < end) {
    pollfd p{fd, POLLRDHUP, 0};
    if (poll(&p, 1, 100) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) return;
  }
}

std::string PostHeader(size_t length) {
  return "POST /scheduler/filter HTTP/1.1\r\nHost: attack\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(length) + "\r\n\r\n";
}

// Reads one Content-Length framed response; its status, or -1.
int ReadResponse(int fd) {
  std::string buf;
  char tmp[1 << 16];
  size_t end;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) return -1;
    buf.append(tmp, static_cast<size_t>(n));
  }
  const int status = std::atoi(buf.c_str() + 9);
  size_t cl = 0;
  auto pos = buf.find("Content-Length: ");
  if (pos != std::string::npos && pos < end) cl = std::strtoul(buf.c_str() + pos + 16, nullptr, 10);
  while (buf.size() < end + 4 + cl) {
    ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) return -1;
    buf.append(tmp, static_cast<size_t>(n));
  }
  return status;
}

void AnswersAttacker(const std::string& request) {
  while (!g_stop) {
    int fd = Connect(4096);
    if (fd < 0) continue;
    if (SendAll(fd, request)) WaitPeerClose(fd, std::chrono::seconds(35));
    close(fd);
  }
}

std::string UnknownNamesRequest(const std::string& good) {
  // The well-behaved request's pod with ~3 M unknown names: ~33 MB.
  const size_t pod_end = good.find("\"NodeNames\"");
  std::string body = good.substr(0, pod_end) + "\"NodeNames\":[";
  for (int i = 0; body.size() < 33554432 - 16; ++i) {
    body += (i ? ",\"n" : "\"n") + std::to_string(1000000 + i) + "\"";
  }
  body += "]}";
  return PostHeader(body.size()) + body;
}

void StalledBodyAttacker(const std::string& request_but_last) {
  while (!g_stop) {
    int fd = Connect();
    if (fd < 0) continue;
    if (SendAll(fd, request_but_last)) WaitPeerClose(fd, std::chrono::seconds(35));
    close(fd);
  }
}

void ManyHeadersAttacker() {
  std::string req = "GET /healthz HTTP/1.1\r\nHost: attack\r\n";
  for (int i = 0; i < 10000; ++i) req += "X-F" + std::to_string(i) + ": vv\r\n";
  req += "\r\n";
  while (!g_stop) {
    int fd = Connect();
    if (fd < 0) continue;
    SendAll(fd, req);
    ReadResponse(fd);
    close(fd);
  }
}

// `count` connections, each sent `start` once and then `drip` every 100 ms;
// a connection the server closes is reopened.
void Holder(int count, const std::string& start, const std::string& drip) {
  std::vector<int> fds(static_cast<size_t>(count), -1);
  while (!g_stop) {
    for (int& fd : fds) {
      if (fd >= 0 && !drip.empty() && send(fd, drip.data(), drip.size(), MSG_NOSIGNAL) < 0) {
        close(fd);
        fd = -1;
      }
      pollfd p{fd, POLLRDHUP, 0};
      if (fd >= 0 && poll(&p, 1, 0) > 0) {
        close(fd);
        fd = -1;
      }
      if (fd < 0 && (fd = Connect()) >= 0 && !SendAll(fd, start)) {
        close(fd);
        fd = -1;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

int64_t RssKiB(int pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::atoll(line.c_str() + std::strlen(field));
  }
  return -1;
}

std::vector<std::thread> StartAttack(const std::string& mode, const std::string& good) {
  std::vector<std::thread> t;
  if (mode == "answers") {
    static const std::string request = UnknownNamesRequest(good);
    for (int i = 0; i < 6; ++i) t.emplace_back(AnswersAttacker, std::cref(request));
  } else if (mode == "headers-only") {
    t.emplace_back(Holder, 200, PostHeader(32 << 20), "");
  } else if (mode == "stalled-bodies") {
    static const std::string request = PostHeader(32 << 20) + std::string((32 << 20) - 1, ' ');
    for (int i = 0; i < 8; ++i) t.emplace_back(StalledBodyAttacker, std::cref(request));
  } else if (mode == "slowloris") {
    t.emplace_back(Holder, 300, "POST /scheduler/filter HTTP/1.1\r\nHost: attack\r\nX-Slow: ", "a");
  } else if (mode == "many-headers") {
    for (int i = 0; i < 4; ++i) t.emplace_back(ManyHeadersAttacker);
  } else if (mode != "none") {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    std::exit(2);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: attack HOST PORT SERVER_PID MODE SECONDS GOOD_BODY_FILE\n");
    return 2;
  }
  g_host = argv[1];
  g_port = static_cast<uint16_t>(std::atoi(argv[2]));
  const int pid = std::atoi(argv[3]);
  const std::string mode = argv[4];
  const int seconds = std::atoi(argv[5]);
  std::stringstream ss;
  ss << std::ifstream(argv[6]).rdbuf();
  const std::string good = PostHeader(ss.str().size()) + ss.str();

  std::atomic<int64_t> peak_rss{0};
  std::thread sampler([&] {
    while (!g_stop) {
      peak_rss = std::max<int64_t>(peak_rss, RssKiB(pid, "VmRSS:"));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  std::vector<std::thread> attackers = StartAttack(mode, ss.str());
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the attack takes hold
  std::vector<double> ms;
  int failed = 0;
  std::map<int, int> failures;  // by status (-1: no answer)
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < end) {
    const auto start = Clock::now();
    int fd = Connect();
    const int status = fd >= 0 && SendAll(fd, good) ? ReadResponse(fd) : -1;
    if (fd >= 0) close(fd);
    if (status == 200) {
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    } else {
      ++failed;
      ++failures[status];
    }
    std::this_thread::sleep_until(start + std::chrono::milliseconds(50));
  }
  g_stop = true;
  for (auto& t : attackers) t.join();
  sampler.join();
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    return ms.empty() ? -1.0 : ms[std::min(ms.size() - 1, static_cast<size_t>(p * ms.size()))];
  };
  std::printf(
      "mode=%-14s filters=%zu failed=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f "
      "peak_rss_mib=%.0f rss_after_mib=%.0f\n",
      mode.c_str(), ms.size() + static_cast<size_t>(failed), failed, pct(0.5), pct(0.99),
      ms.empty() ? -1.0 : ms.back(), static_cast<double>(peak_rss) / 1024,
      static_cast<double>(RssKiB(pid, "VmRSS:")) / 1024);
  for (const auto& [status, n] : failures)
    std::printf("    failed with status %d: %d\n", status, n);
  return failed == 0 ? 0 : 1;
}
