#include "scheduler/cli/queue_explain.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string_view>
#include <utility>

#include "gpusched/util/strings.h"
#include "scheduler/codec/queue_codec.h"
#include "scheduler/http/client.h"
#include "scheduler/kube/http_client.h"
#include "scheduler/kube/kube_config.h"

namespace gpusched::cli {
namespace {

constexpr char kDefaultExtender[] = "http://127.0.0.1:8888";

struct Page {
  int status = 0;
  std::string body;
};

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(StrCat("--", flag, ": cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// https: the client `gpusched queue` uses for the API server, with the
// extender's CA and a client certificate its mutual TLS accepts.
absl::StatusOr<Page> FetchTls(const Flags& flags, const std::string& url, const std::string& path) {
  kube::KubeConfig cfg;
  if (auto s = kube::ParseServerUrl(url, &cfg); !s.ok()) {
    return absl::InvalidArgumentError(StrCat("--extender: ", s.message()));
  }
  const std::string host = cfg.host;
  for (auto [flag, pem] :
       {std::pair{"extender-ca", &cfg.ca_pem}, std::pair{"extender-cert", &cfg.client_cert_pem},
        std::pair{"extender-key", &cfg.client_key_pem}}) {
    if (!flags.Has(flag)) continue;
    auto text = ReadFile(flag, flags.Get(flag));
    if (!text.ok()) return text.status();
    *pem = *std::move(text);
  }
  if (cfg.client_cert_pem.empty() != cfg.client_key_pem.empty()) {
    return absl::InvalidArgumentError("--extender-cert and --extender-key go together");
  }
  kube::ClientOptions options;
  options.peer = "the extender";
  auto client = kube::KubeHttpClient::Create(std::move(cfg), options);
  if (!client.ok()) return client.status();
  auto res = (*client)->Do("GET", path, "", "", std::chrono::seconds(30));
  if (res.ok()) return Page{res->status, std::move(res->body)};
  const std::string error(res.status().message());
  if (error.find("certificate verify failed") != std::string::npos) {
    return absl::UnavailableError(
        StrCat(error, " (the extender's certificate is not signed by ",
               flags.Has("extender-ca") ? "the --extender-ca CA" : "a CA this system trusts",
               ", or does not name ", host, ")"));
  }
  if (error.find("certificate required") != std::string::npos) {
    return absl::UnavailableError(StrCat(
        error,
        " (the extender requires a client certificate: --extender-cert and --extender-key)"));
  }
  return res.status();
}

// The server's base URL. The URL kube-scheduler is given (its urlPrefix,
// ".../scheduler", which the server's banner prints) names the verbs; the
// debug pages are at the server's root, so that suffix is dropped.
std::string ExtenderBase(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  constexpr std::string_view kVerbs = "/scheduler";
  if (url.ends_with(kVerbs)) url.resize(url.size() - kVerbs.size());
  return url;
}

absl::StatusOr<Page> Fetch(const Flags& flags, const std::string& path) {
  const std::string url = ExtenderBase(flags.Get("extender", kDefaultExtender));
  if (url.rfind("https://", 0) == 0) return FetchTls(flags, url, path);
  auto client = http::HttpClient::Create(url);
  if (!client.ok()) return client.status();
  auto res = (*client)->Get(path);
  if (!res.ok()) return res.status();
  return Page{res->status, std::move(res->body)};
}

std::string FormatDuration(int64_t s) {
  std::string out;
  if (s >= 86400) out += StrCat(s / 86400, "d");
  if (s >= 3600) out += StrCat(s % 86400 / 3600, "h");
  if (s >= 60) out += StrCat(s % 3600 / 60, "m");
  return out + StrCat(s % 60, "s");
}

std::string Format(const codec::PodExplanation& e) {
  std::string out = StrCat("Pod:              ", e.ns, "/", e.name, "\n");
  out += StrCat("Queue position:   ", e.position, "\n");
  out += StrCat("Why it waits:     ", e.reason.empty() ? "nothing: it is admissible now" : e.reason,
                "\n");
  out += StrCat("Estimated start:  ", e.estimated_start.empty() ? "none" : e.estimated_start);
  out += e.estimate_basis.empty() ? "\n" : StrCat(" (", e.estimate_basis, ")\n");
  out += "Runtime estimate: ";
  if (!e.runtime_seconds.has_value()) {
    out += "not made yet\n";
  } else if (e.runtime_source == "none") {
    out += StrCat("none (", e.runtime_detail, ")\n");
  } else {
    out += StrCat(FormatDuration(*e.runtime_seconds), ", from ", e.runtime_source);
    out += e.runtime_detail.empty() ? "\n" : StrCat(" (", e.runtime_detail, ")\n");
  }
  for (const std::string& r : e.runtime_rejected) out += StrCat("  not used: ", r, "\n");
  out += e.what_if.empty() ? "What if:          no answers\n" : "What if:\n";
  for (const std::string& w : e.what_if) out += StrCat("  ", w, "\n");
  if (!e.preemption.empty()) out += "Preemption (victims kube-scheduler may evict, per node):\n";
  for (const queue::PreemptionPreview& p : e.preemption) {
    std::string victims;
    for (const std::string& v : p.victims) victims += (victims.empty() ? "" : ", ") + v;
    out += StrCat("  ", p.node, ": ", victims, "\n");
  }
  return out;
}

}  // namespace

int ExplainPod(const Flags& flags, const std::string& target, const std::string& ns) {
  const std::string output = flags.Get("output", "text");
  if (output != "text" && output != "json") {
    std::cerr << "gpusched queue: -o/--output: expected text or json, got '" << output << "'\n";
    return 2;
  }
  std::string pod_ns = ns, name = target;
  if (const size_t slash = target.find('/'); slash != std::string::npos) {
    pod_ns = target.substr(0, slash);
    name = target.substr(slash + 1);
  }
  if (pod_ns.empty() || name.empty() || name.find('/') != std::string::npos) {
    std::cerr << "gpusched queue: --explain: expected NAMESPACE/POD or POD, got '" << target
              << "'\n";
    return 2;
  }
  const std::string path = StrCat("/debug/pods/", pod_ns, "/", name);
  auto page = Fetch(flags, path);
  if (!page.ok()) {
    std::cerr << "gpusched queue: GET " << path << ": " << page.status().message() << "\n";
    return 1;
  }
  // A 404 of the page itself (the pod unknown), not of a server that has
  // no such page: that one is reported as it came.
  if (page->status == 404 && page->body.find("no such path") == std::string::npos) {
    std::cerr << "gpusched queue: pod " << pod_ns << "/" << name
              << " is unknown to gpusched (no such pod, or not seen yet)\n";
    return 1;
  }
  if (page->status != 200) {
    std::cerr << "gpusched queue: GET " << path << ": HTTP " << page->status << " "
              << page->body.substr(0, 300) << "\n";
    return 1;
  }
  auto e = codec::DecodePodExplanation(page->body);
  if (!e.ok()) {
    std::cerr << "gpusched queue: " << e.status().message() << "\n";
    return 1;
  }
  if (e->state != "pending") {
    std::cerr << "gpusched queue: pod " << pod_ns << "/" << name << " is not pending: it is "
              << e->state << (e->node.empty() ? "" : StrCat(" on node ", e->node)) << "\n";
    return 1;
  }
  std::cout << (output == "json" ? page->body : Format(*e));
  return 0;
}

}  // namespace gpusched::cli
