// The queue at production depth, over HTTP: generates a cluster of N nodes
// (8 x H100 each, 7 of 8 GPUs busy, a tenth of the namespaces borrowing
// from the rest), P pending pods over K namespaces in one
// cohort (1/2/4/8 GPUs, priorities 100/1,000/100,000, G gangs, a per-model
// H100 quota on every tenth namespace, reclaim on, the shipped scoring),
// starts `gpusched serve --cluster` on it, and for S seconds drives one
// kube-scheduler-like client: filter + prioritize naming M nodes for a
// pending pod, bind to the first node that passed (a bound pod is not
// picked again), and every 50th cycle a GET /debug/queues?namespace=X.
// The queue's tick (reclaim planning) runs in the server meanwhile.
//
// Reports p50/p99/max per verb, cold start (process start to /readyz), the
// longest hold of the queue mutex and the tick duration (from /metrics),
// and memory per pending pod (RSS with P pending minus RSS of the same
// cluster with none, over P).
//
// First, for --stall-seconds (default 20), it measures the machine itself:
// one thread spinning on the clock with nothing else running, reporting the
// longest time it made no progress. On a virtual machine that is the
// hypervisor's pauses; any lock hold or request can be stretched by as much,
// whatever the code does, so the figures below are read against it.
//
// Usage: queue_scale GPUSCHED_BINARY [--nodes N] [--pending P]
//        [--namespaces K] [--gangs G] [--names M] [--seconds S]
//        [--stall-seconds T] [--idle] [--topology] [--dir DIR]
// --topology labels the nodes by block and rack, sets gang.topologyLevels
// and has every gang ask for one rack (half required, half preferred).
// Loopback only; bounded in time; kills its server on exit.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string binary;
  int nodes = 5000;
  int pending = 50000;
  int namespaces = 500;
  int gangs = 1000;
  int names = 5000;
  int seconds = 60;
  int stall_seconds = 20;
  // The queue empty: the server runs on the cluster without pending pods and
  // the requests name pods it has not shown (answered at their place in an
  // empty queue, never bound): what the queue costs when nothing waits.
  bool idle = false;
  // Topology levels on: nodes labelled by block (64 nodes) and rack (16),
  // the policy's gang.topologyLevels set, and every gang asking for one
  // rack (odd gangs: required; even: preferred).
  bool topology = false;
  std::string dir = "/tmp/gpusched-queue-scale";
};

std::string Ns(int i) { return "team-" + std::to_string(i); }
std::string Node(int i) { return "h100-" + std::to_string(i); }

// ---- inputs ---------------------------------------------------------------

constexpr char kBlockLabel[] = "cloud.provider.com/topology-block";
constexpr char kRackLabel[] = "cloud.provider.com/topology-rack";

std::string NodeJson(int i, bool topology) {
  const std::string n = Node(i);
  std::string domains;
  if (topology) {
    domains = std::string("\"") + kBlockLabel + "\":\"block-" + std::to_string(i / 64) + "\",\"" +
              kRackLabel + "\":\"rack-" + std::to_string(i / 16) + "\",";
  }
  return "{\"kind\":\"Node\",\"metadata\":{\"name\":\"" + n + "\",\"labels\":{" + domains +
         "\"kubernetes.io/hostname\":\"" + n +
         "\",\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\",\"nvidia.com/gpu.memory\":"
         "\"81559\",\"nvidia.com/gpu.count\":\"8\"}},\"status\":{\"allocatable\":{\"cpu\":\"190\","
         "\"memory\":\"2000Gi\",\"nvidia.com/gpu\":\"8\"},\"capacity\":{\"nvidia.com/"
         "gpu\":\"8\"}}}";
}

std::string PodJson(const std::string& name, const std::string& ns, int gpus, int priority,
                    const std::string& node, const std::string& ids, const std::string& gang,
                    int gang_size, int creation, const std::string& topology = "") {
  std::string annotations;
  if (!ids.empty()) annotations = "\"gpusched.io/gpu-ids\":\"" + ids + "\"";
  if (!gang.empty()) {
    annotations = "\"gpusched.io/gang\":\"" + gang + "\",\"gpusched.io/gang-size\":\"" +
                  std::to_string(gang_size) + "\"";
  }
  if (!topology.empty()) annotations += ",\"" + topology + "\":\"" + kRackLabel + "\"";
  char created[32];
  std::snprintf(created, sizeof(created), "2026-11-01T%02d:%02d:%02dZ", creation / 3600 % 24,
                creation / 60 % 60, creation % 60);
  std::string out = "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"" + name + "\",\"namespace\":\"" +
                    ns + "\",\"uid\":\"uid-" + ns + "-" + name + "\",\"creationTimestamp\":\"" +
                    created + "\",\"annotations\":{" + annotations + "}},\"spec\":{";
  if (!node.empty()) out += "\"nodeName\":\"" + node + "\",";
  out += "\"priority\":" + std::to_string(priority) +
         ",\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"" +
         std::to_string(gpus) + "\"}}}]},\"status\":{\"phase\":\"" +
         (node.empty() ? "Pending" : "Running") + "\"}}";
  return out;
}

struct PendingPod {
  std::string name, ns, json;
};

// Writes cluster.json (and cluster-empty.json without pending pods) and
// policy.json; returns the pending pods.
std::vector<PendingPod> WriteInputs(const Options& o) {
  std::mt19937 rng(42);
  std::string nodes, running;
  for (int i = 0; i < o.nodes; ++i) {
    nodes += (i ? "," : "") + NodeJson(i, o.topology);
    for (int d = 0; d < 7; ++d) {
      // Three of every node's seven running pods belong to the first tenth
      // of the namespaces, which so borrow far above their guarantee: the
      // others are below theirs, and reclaim has plans to make.
      const int ns = d < 3 ? i % std::max(1, o.namespaces / 10) : (i * 7 + d) % o.namespaces;
      running += "," + PodJson("run-" + std::to_string(i) + "-" + std::to_string(d), Ns(ns), 1, 100,
                               Node(i), std::to_string(d), "", 0, 0);
    }
  }
  std::vector<PendingPod> pending;
  const int priorities[] = {100, 1000, 100000};
  const int sizes[] = {1, 2, 4, 8};
  int gangs_left = o.gangs;
  while (static_cast<int>(pending.size()) < o.pending) {
    const int id = static_cast<int>(pending.size());
    const std::string ns = Ns(static_cast<int>(rng() % o.namespaces));
    const int priority = priorities[rng() % 3];
    if (gangs_left > 0 && rng() % 8 == 0) {
      const int members = 2 + static_cast<int>(rng() % 7);
      const std::string topology = !o.topology           ? ""
                                   : gangs_left % 2 == 1 ? "gpusched.io/topology-required"
                                                         : "gpusched.io/topology-preferred";
      const std::string gang = "gang-" + std::to_string(gangs_left--);
      for (int m = 0; m < members && static_cast<int>(pending.size()) < o.pending; ++m) {
        const std::string name = gang + "-" + std::to_string(m);
        pending.push_back(
            {name, ns, PodJson(name, ns, 8, priority, "", "", gang, members, id, topology)});
      }
      continue;
    }
    const std::string name = "p-" + std::to_string(id);
    pending.push_back({name, ns, PodJson(name, ns, sizes[rng() % 4], priority, "", "", "", 0, id)});
  }
  std::string pods;
  for (const PendingPod& p : pending) pods += "," + p.json;
  std::ofstream(o.dir + "/cluster.json")
      << "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[" << nodes << running << pods << "]}";
  std::ofstream(o.dir + "/cluster-empty.json")
      << "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[" << nodes << running << "]}";
  const int64_t total = int64_t{o.nodes} * 8;
  const int64_t guaranteed = total / o.namespaces;
  std::string quotas;
  for (int i = 0; i < o.namespaces; ++i) {
    quotas += (i ? "," : "") + std::string("\"") + Ns(i) +
              "\":{\"guaranteed\":" + std::to_string(guaranteed) +
              ",\"limit\":" + std::to_string(total) + ",\"cohort\":\"all\"";
    if (i % 10 == 0) {
      quotas += ",\"models\":{\"H100\":{\"guaranteed\":" + std::to_string(guaranteed) +
                ",\"limit\":" + std::to_string(guaranteed * 4) + "}}";
    }
    quotas += "}";
  }
  std::ifstream shipped("config/scheduler-policy.json");
  std::stringstream buf;
  buf << shipped.rdbuf();
  std::string policy = buf.str();
  // The shipped file with this run's quotas: replace its "namespaces" object.
  const size_t at = policy.find("\"namespaces\"");
  if (at == std::string::npos) {
    std::fprintf(stderr, "config/scheduler-policy.json has no quotas.namespaces\n");
    std::exit(2);
  }
  size_t open = policy.find('{', at), depth = 0, close = open;
  for (; close < policy.size(); ++close) {
    if (policy[close] == '{') ++depth;
    if (policy[close] == '}' && --depth == 0) break;
  }
  policy = policy.substr(0, open) + "{" + quotas + "}" + policy.substr(close + 1);
  if (o.topology) {
    const std::string gang = "\"gang\": {";
    const size_t g = policy.find(gang);
    if (g == std::string::npos) {
      std::fprintf(stderr, "config/scheduler-policy.json has no gang section\n");
      std::exit(2);
    }
    policy.insert(g + gang.size(), std::string("\"topologyLevels\": [\"") + kBlockLabel + "\", \"" +
                                       kRackLabel + "\", \"kubernetes.io/hostname\"], ");
  }
  std::ofstream(o.dir + "/policy.json") << policy;
  return pending;
}

// ---- HTTP over one keep-alive loopback connection ----------------------------

class Conn {
 public:
  explicit Conn(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(fd_);
      fd_ = -1;
      return;
    }
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~Conn() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  // Returns the status (-1 on a broken connection); body in *out.
  int Call(const std::string& method, const std::string& path, const std::string& body,
           std::string* out) {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (!body.empty()) {
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
             "\r\n";
    }
    req += "\r\n" + body;
    for (size_t off = 0; off < req.size();) {
      ssize_t n = send(fd_, req.data() + off, req.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return -1;
      off += static_cast<size_t>(n);
    }
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Receive()) return -1;
    }
    const int status = std::atoi(buf_.c_str() + 9);
    size_t length = 0;
    const size_t cl = buf_.find("Content-Length: ");
    if (cl != std::string::npos && cl < end)
      length = std::strtoul(buf_.c_str() + cl + 16, nullptr, 10);
    const size_t total = end + 4 + length;
    if (buf_.capacity() < total) buf_.reserve(total);
    while (buf_.size() < total) {
      if (!Receive()) return -1;
    }
    // The body is moved out, not copied (responses run to ~1 MB and the
    // client shares the server's cores): the rest of the buffer stays.
    std::string rest = buf_.substr(total);
    buf_.erase(0, end + 4);
    buf_.resize(length);
    out->swap(buf_);
    buf_.assign(rest);  // into the previous body's room
    return status;
  }

 private:
  // Appends what one recv gives to buf_, straight into its spare room.
  bool Receive() {
    const size_t have = buf_.size();
    buf_.resize(have + (size_t{1} << 16));
    ssize_t n = recv(fd_, buf_.data() + have, buf_.size() - have, 0);
    buf_.resize(have + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    return n > 0;
  }

  int fd_ = -1;
  std::string buf_;
};

// ---- the server -------------------------------------------------------------

struct Server {
  pid_t pid = -1;
  int port = 0;
  double ready_seconds = 0;
};

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

Server Start(const Options& o, const std::string& cluster) {
  Server s;
  s.port = FreePort();
  const std::string listen = "127.0.0.1:" + std::to_string(s.port);
  const std::string config = o.dir + "/policy.json";
  const std::string log = o.dir + "/server.log";
  const auto t0 = Clock::now();
  s.pid = fork();
  if (s.pid == 0) {
    FILE* f = std::freopen(log.c_str(), "a", stderr);
    (void)f;
    execl(o.binary.c_str(), o.binary.c_str(), "serve", "--config", config.c_str(), "--cluster",
          cluster.c_str(), "--listen", listen.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 6000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    Conn c(s.port);
    std::string body;
    if (c.ok() && c.Call("GET", "/readyz", "", &body) == 200) {
      s.ready_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      return s;
    }
  }
  std::fprintf(stderr, "server did not become ready in 60 s (see %s)\n", log.c_str());
  kill(s.pid, SIGKILL);
  std::exit(1);
}

void Stop(const Server& s) {
  kill(s.pid, SIGTERM);
  waitpid(s.pid, nullptr, 0);
}

int64_t RssKiB(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return 0;
}

// A sample of a metric from the exposition text ("" labels = the bare name).
double Metric(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::atof(text.c_str() + at + series.size() + 1);
    ++at;
  }
  return NAN;
}

// A Prometheus histogram's buckets: (le, cumulative count), summed over the
// series whose labels contain `match` (every series when empty).
std::vector<std::pair<double, double>> Buckets(const std::string& text, const std::string& name,
                                               const std::string& match = "") {
  std::map<double, double> sums;
  std::istringstream in(text);
  std::string line;
  const std::string prefix = name + "_bucket{";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t close = line.find('}');
    const std::string labels = line.substr(prefix.size(), close - prefix.size());
    if (!match.empty() && labels.find(match) == std::string::npos) continue;
    const size_t at = labels.find("le=\"");
    if (at == std::string::npos) continue;
    const std::string le = labels.substr(at + 4, labels.find('"', at + 4) - at - 4);
    sums[le == "+Inf" ? INFINITY : std::atof(le.c_str())] +=
        std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return {sums.begin(), sums.end()};
}

// The label values of `label` over the series of histogram `name`.
std::set<std::string> LabelValues(const std::string& text, const std::string& name,
                                  const std::string& label) {
  std::set<std::string> values;
  std::istringstream in(text);
  std::string line;
  const std::string prefix = name + "_count{";
  const std::string key = label + "=\"";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t at = line.find(key);
    if (at == std::string::npos) continue;
    const size_t b = at + key.size();
    values.insert(line.substr(b, line.find('"', b) - b));
  }
  return values;
}

// Every series of the counter `name` and its value ("{labels}" -> value).
std::map<std::string, double> CounterSeries(const std::string& text, const std::string& name) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  const std::string prefix = name + "{";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t space = line.rfind(' ');
    out[line.substr(name.size(), space - name.size())] = std::atof(line.c_str() + space + 1);
  }
  return out;
}

// Prints "LABEL {labels}: N" for each series of the counter `name` that
// grew between the two scrapes, or "LABEL: none".
void PrintCounterDeltas(const std::string& before, const std::string& after,
                        const std::string& name, const char* label) {
  const auto at_start = CounterSeries(before, name);
  int grown = 0;
  for (const auto& [series, value] : CounterSeries(after, name)) {
    auto b = at_start.find(series);
    const double d = value - (b == at_start.end() ? 0.0 : b->second);
    if (d <= 0) continue;
    ++grown;
    std::printf("%s %s: %g\n", label, series.c_str(), d);
  }
  if (grown == 0) std::printf("%s: none\n", label);
}

// Upper bound of the bucket holding quantile q (q = 1: the largest) of what
// was observed between two scrapes of the histogram `name` (its series whose
// labels contain `match`).
double HistogramQuantile(const std::string& before, const std::string& after,
                         const std::string& name, double q, const std::string& match = "") {
  auto b = Buckets(before, name, match), a = Buckets(after, name, match);
  if (a.empty()) return NAN;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) a[i].second -= b[i].second;
  if (a.back().second <= 0) return NAN;
  const double want = q * a.back().second;
  for (const auto& [le, count] : a) {
    if (count >= want) return le;
  }
  return INFINITY;
}

struct Latencies {
  std::vector<double> ms;
  void Add(Clock::time_point t0) {
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::string Summary() {
    if (ms.empty()) return "n=0";
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) {
      return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
    };
    char out[160];
    std::snprintf(out, sizeof(out), "n=%zu p50=%.3f ms p99=%.3f ms max=%.3f ms", ms.size(), at(0.5),
                  at(0.99), ms.back());
    return out;
  }
};

// The machine alone: a thread spinning on the monotonic clock for `seconds`;
// every gap between two consecutive reads is time it was not running.
struct Stalls {
  double longest_ms = 0;
  int over_1ms = 0;
  int over_5ms = 0;
};

Stalls MeasureStalls(int seconds) {
  Stalls s;
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  auto last = Clock::now();
  while (last < end) {
    const auto now = Clock::now();
    const double gap = std::chrono::duration<double, std::milli>(now - last).count();
    s.longest_ms = std::max(s.longest_ms, gap);
    s.over_1ms += gap > 1;
    s.over_5ms += gap > 5;
    last = now;
  }
  return s;
}

bool Flag(int argc, char** argv, int& i, const char* name, int* out) {
  if (std::strcmp(argv[i], name) != 0 || i + 1 >= argc) return false;
  *out = std::atoi(argv[++i]);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: queue_scale GPUSCHED_BINARY [--nodes N] [--pending P] [--namespaces K] "
                 "[--gangs G] [--names M] [--seconds S] [--stall-seconds T] [--idle] [--topology] "
                 "[--dir DIR]\n");
    return 2;
  }
  Options o;
  o.binary = argv[1];
  for (int i = 2; i < argc; ++i) {
    if (Flag(argc, argv, i, "--nodes", &o.nodes) || Flag(argc, argv, i, "--pending", &o.pending) ||
        Flag(argc, argv, i, "--namespaces", &o.namespaces) ||
        Flag(argc, argv, i, "--gangs", &o.gangs) || Flag(argc, argv, i, "--names", &o.names) ||
        Flag(argc, argv, i, "--seconds", &o.seconds) ||
        Flag(argc, argv, i, "--stall-seconds", &o.stall_seconds)) {
      continue;
    }
    if (std::strcmp(argv[i], "--idle") == 0) {
      o.idle = true;
      continue;
    }
    if (std::strcmp(argv[i], "--topology") == 0) {
      o.topology = true;
      continue;
    }
    if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      o.dir = argv[++i];
      continue;
    }
    std::fprintf(stderr, "unknown flag %s\n", argv[i]);
    return 2;
  }
  o.names = std::min(o.names, o.nodes);
  std::string mkdir = "mkdir -p '" + o.dir + "'";
  if (std::system(mkdir.c_str()) != 0) return 1;
  const Stalls stalls = MeasureStalls(o.stall_seconds);
  std::printf(
      "machine alone: a spinning thread stopped for up to %.2f ms (%d stops > 1 ms, %d > 5 ms "
      "in %d s)\n",
      stalls.longest_ms, stalls.over_1ms, stalls.over_5ms, o.stall_seconds);
  std::vector<PendingPod> pending = WriteInputs(o);
  std::printf("cluster: %d nodes, %d pending pods over %d namespaces, %d gangs; %d names/request\n",
              o.nodes, o.pending, o.namespaces, o.gangs, o.names);

  Server empty = Start(o, o.dir + "/cluster-empty.json");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int64_t rss_empty = RssKiB(empty.pid);
  Stop(empty);
  Server full = Start(o, o.dir + "/cluster.json");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int64_t rss_full = RssKiB(full.pid);
  if (o.idle) Stop(full);
  Server s = o.idle ? Start(o, o.dir + "/cluster-empty.json") : full;

  std::string names = "[";
  std::mt19937 rng(7);
  std::vector<int> order(o.nodes);
  for (int i = 0; i < o.nodes; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (int i = 0; i < o.names; ++i) names += (i ? ",\"" : "\"") + Node(order[i]) + "\"";
  names += "]";

  Conn c(s.port);
  std::string metrics_at_start;  // to count only the run's lock holds and ticks
  c.Call("GET", "/metrics", "", &metrics_at_start);
  Latencies filter, prioritize, bind, debug;
  int binds = 0, admitted = 0;
  std::string body;
  const auto end = Clock::now() + std::chrono::seconds(o.seconds);
  for (int cycle = 0; Clock::now() < end; ++cycle) {
    const size_t pick = rng() % pending.size();
    const PendingPod& p = pending[pick];
    bool bound = false;
    const std::string args = "{\"Pod\":" + p.json + ",\"Nodes\":null,\"NodeNames\":" + names + "}";
    auto t0 = Clock::now();
    if (c.Call("POST", "/scheduler/filter", args, &body) != 200) break;
    filter.Add(t0);
    // NodeNames follows "Nodes":null at the start: search only there (a
    // rejection's body is ~1 MB of FailedNodes).
    const size_t nn = std::string_view(body).substr(0, 64).find("\"NodeNames\":[\"");
    std::string first;
    if (nn != std::string::npos) {
      const size_t b = nn + 14;
      first = body.substr(b, body.find('"', b) - b);
    }
    t0 = Clock::now();
    if (c.Call("POST", "/scheduler/prioritize", args, &body) != 200) break;
    prioritize.Add(t0);
    if (!first.empty() && !o.idle) {
      ++admitted;
      t0 = Clock::now();
      const std::string b = "{\"PodName\":\"" + p.name + "\",\"PodNamespace\":\"" + p.ns +
                            "\",\"PodUID\":\"uid-" + p.ns + "-" + p.name + "\",\"Node\":\"" +
                            first + "\"}";
      if (c.Call("POST", "/scheduler/bind", b, &body) != 200) break;
      bind.Add(t0);
      bound = body.find("\"Error\":\"\"") != std::string::npos;
      binds += bound ? 1 : 0;
    }
    if (cycle % 50 == 0) {
      t0 = Clock::now();
      if (c.Call("GET", "/debug/queues?namespace=" + p.ns, "", &body) != 200) break;
      debug.Add(t0);
    }
    // kube-scheduler's queue holds only unbound pods: a bound pod is never
    // asked about again.
    if (bound && pending.size() > 1) {
      pending[pick] = std::move(pending.back());
      pending.pop_back();
    }
  }
  std::string metrics;
  c.Call("GET", "/metrics", "", &metrics);
  std::printf("cold start (process start to /readyz): %.2f s\n", s.ready_seconds);
  std::printf("filter     %s\n", filter.Summary().c_str());
  std::printf("prioritize %s\n", prioritize.Summary().c_str());
  std::printf("bind       %s (%d admitted, %d bound)\n", bind.Summary().c_str(), admitted, binds);
  std::printf("debug/queues?namespace= %s\n", debug.Summary().c_str());
  const std::string hold = "gpusched_queue_lock_hold_seconds";
  const std::string hold_cpu = "gpusched_queue_lock_hold_cpu_seconds";
  const std::string tick = "gpusched_queue_tick_seconds";
  std::printf(
      "queue lock during the run: p99 <= %.3f ms, longest <= %.3f ms (histogram buckets); "
      "longest since start, start-up sync included: %.3f ms\n",
      HistogramQuantile(metrics_at_start, metrics, hold, 0.99) * 1000,
      HistogramQuantile(metrics_at_start, metrics, hold, 1.0) * 1000,
      Metric(metrics, "gpusched_queue_lock_hold_max_seconds") * 1000);
  // Per call site: the longest hold and the holder's CPU time in the
  // longest CPU bucket (wall far above CPU: descheduled while holding).
  for (const std::string& site : LabelValues(metrics, hold, "site")) {
    const std::string match = "site=\"" + site + "\"";
    const double longest = HistogramQuantile(metrics_at_start, metrics, hold, 1.0, match);
    if (std::isnan(longest)) continue;
    // Holds of 5 ms or more during the run, by whether the holder ran.
    auto long_holds = [&](const char* holder) {
      const std::string series =
          "gpusched_queue_lock_long_holds_total{" + match + ",holder=\"" + holder + "\"}";
      auto value = [&](const std::string& text) {
        const double v = Metric(text, series);
        return std::isnan(v) ? 0.0 : v;
      };
      return value(metrics) - value(metrics_at_start);
    };
    // How many holds, and the share of the run the lock was held from this
    // site: what a machine stop landing inside a hold scales with.
    auto delta = [&](const std::string& suffix) {
      const std::string series = hold + suffix + "{" + match + "}";
      const double before = Metric(metrics_at_start, series);
      return Metric(metrics, series) - (std::isnan(before) ? 0.0 : before);
    };
    const double holds = delta("_count"), held_s = delta("_sum");
    std::printf(
        "queue lock site %-14s p99 <= %.3f ms, longest <= %.3f ms, CPU longest <= %.3f ms; "
        ">= 5 ms: %g holder ran, %g holder waited; %.0f holds, mean %.3f ms, held %.2f%% "
        "of the run\n",
        site.c_str(), HistogramQuantile(metrics_at_start, metrics, hold, 0.99, match) * 1000,
        longest * 1000, HistogramQuantile(metrics_at_start, metrics, hold_cpu, 1.0, match) * 1000,
        long_holds("ran"), long_holds("waited"), holds, holds > 0 ? held_s / holds * 1000 : 0.0,
        held_s / o.seconds * 100);
  }
  // How long each call site waited for the mutex, and every wait of 1 ms
  // or more by the site that held it when the wait began (the lock goal:
  // no request waits on background work for more than 1 ms).
  const std::string wait = "gpusched_queue_lock_wait_seconds";
  for (const std::string& site : LabelValues(metrics, wait, "site")) {
    const std::string match = "site=\"" + site + "\"";
    const double longest = HistogramQuantile(metrics_at_start, metrics, wait, 1.0, match);
    if (std::isnan(longest)) continue;
    std::printf("queue lock wait %-14s p99 <= %.3f ms, longest <= %.3f ms\n", site.c_str(),
                HistogramQuantile(metrics_at_start, metrics, wait, 0.99, match) * 1000,
                longest * 1000);
  }
  PrintCounterDeltas(metrics_at_start, metrics, "gpusched_queue_lock_long_waits_total",
                     "queue lock waits >= 1 ms");
  PrintCounterDeltas(metrics_at_start, metrics, "gpusched_queue_lock_deferrals_total",
                     "queue lock background deferrals to waiting requests");
  PrintCounterDeltas(metrics_at_start, metrics, "gpusched_estimate_queue_copies_total",
                     "estimate refresh namespaces' queues");
  PrintCounterDeltas(metrics_at_start, metrics, "gpusched_queue_admissions_total",
                     "filter admissions of GPU pods");
  PrintCounterDeltas(metrics_at_start, metrics, "gpusched_queue_snapshot_misses_total",
                     "filter admissions the snapshot could not answer");
  std::printf("tick: p50 <= %.3f ms, p99 <= %.3f ms, %g ticks\n",
              HistogramQuantile(metrics_at_start, metrics, tick, 0.5) * 1000,
              HistogramQuantile(metrics_at_start, metrics, tick, 0.99) * 1000,
              Metric(metrics, tick + "_count"));
  const std::string tick_cpu = "gpusched_queue_tick_cpu_seconds";
  std::printf("tick CPU: p50 <= %.3f ms, p99 <= %.3f ms\n",
              HistogramQuantile(metrics_at_start, metrics, tick_cpu, 0.5) * 1000,
              HistogramQuantile(metrics_at_start, metrics, tick_cpu, 0.99) * 1000);
  std::printf("memory: RSS %lld KiB with pending pods, %lld KiB without: %.0f B per pending pod\n",
              static_cast<long long>(rss_full), static_cast<long long>(rss_empty),
              o.pending > 0 ? (rss_full - rss_empty) * 1024.0 / o.pending : 0.0);
  // At the end, after every estimate refresh and bind of the run (the
  // first figure is taken 0.5 s after the server is ready, during or just
  // after its first refresh).
  std::printf("memory at the end of the run: RSS %lld KiB\n",
              static_cast<long long>(RssKiB(s.pid)));
  Stop(s);
  return 0;
}
