#include "scheduler/kube/exec_credential.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <vector>

#include "gpusched/util/status_macros.h"
#include "gpusched/util/strings.h"

extern char** environ;

namespace gpusched::kube {
namespace {

constexpr size_t kMaxOutput = 1 << 20;
// A token is renewed this long before its expirationTimestamp.
constexpr int64_t kExpiryMarginSeconds = 10;

// gpusched's environment with `extra` set on top.
std::vector<std::string> Environment(
    const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    vars[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  for (const auto& [k, v] : extra) vars[k] = v;
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& [k, v] : vars) out.push_back(StrCat(k, "=", v));
  return out;
}

std::string NotFound(const ExecPlugin& plugin) {
  std::string msg = StrCat("exec plugin '", plugin.command, "' not found");
  if (!plugin.install_hint.empty()) msg += StrCat(": ", plugin.install_hint);
  return msg;
}

// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// Starts `plugin` with stdin on /dev/null, stdout on `stdout_fd` and no
// other descriptor of ours, in gpusched's environment plus the plugin's
// variables and KUBERNETES_EXEC_INFO. Returns its pid.
absl::StatusOr<pid_t> SpawnPlugin(const ExecPlugin& plugin, const std::string& exec_info,
                                  int stdout_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  // The plugin gets no other descriptor of ours (listening and API sockets).
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);

  std::vector<std::pair<std::string, std::string>> extra = plugin.env;
  extra.emplace_back("KUBERNETES_EXEC_INFO", exec_info);
  std::vector<std::string> env = Environment(extra);
  std::vector<std::string> args = {plugin.command};
  args.insert(args.end(), plugin.args.begin(), plugin.args.end());
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  const bool path_lookup = plugin.command.find('/') == std::string::npos;
  const int rc = path_lookup
                     ? posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), envp.data())
                     : posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc == ENOENT) return absl::NotFoundError(NotFound(plugin));
  if (rc != 0) {
    return absl::FailedPreconditionError(
        StrCat("exec plugin '", plugin.command, "': ", std::strerror(rc)));
  }
  return pid;
}

// What the plugin `pid` writes to `fd` until it closes it, or until
// `timeout` passes (then *timed_out is set). Past kMaxOutput bytes the
// plugin is killed and reaped, and that is an error.
absl::StatusOr<std::string> ReadPluginOutput(const ExecPlugin& plugin, int fd, pid_t pid,
                                             std::chrono::milliseconds timeout, bool* timed_out) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      *timed_out = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      *timed_out = ready == 0;
      break;
    }
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() + n > kMaxOutput) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return absl::InvalidArgumentError(
          StrCat("exec plugin '", plugin.command, "': more than 1 MiB of output"));
    }
    out.append(buf, n);
  }
  return out;
}

// The credential in `out`, the output of a plugin that ended with wait
// status `status`; an error if it failed or its answer does not decode.
absl::StatusOr<codec::ExecCredentialStatus> PluginAnswer(const ExecPlugin& plugin, int status,
                                                         const std::string& out) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && out.empty()) {
    return absl::NotFoundError(NotFound(plugin));  // the shell's "command not found"
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(StrCat("exec plugin '", plugin.command, "' failed (",
                                         WIFEXITED(status)
                                             ? StrCat("exit status ", WEXITSTATUS(status))
                                             : StrCat("signal ", WTERMSIG(status)),
                                         ")"));
  }
  auto cred = codec::DecodeExecCredential(out, plugin.api_version);
  if (!cred.ok()) {
    return absl::Status(cred.status().code(), StrCat("exec plugin '", plugin.command,
                                                     "': ", FromAbsl(cred.status().message())));
  }
  return cred;
}

}  // namespace

absl::StatusOr<codec::ExecCredentialStatus> RunExecPlugin(const ExecPlugin& plugin,
                                                          const std::string& exec_info,
                                                          std::chrono::milliseconds timeout) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(StrCat("exec plugin: pipe: ", std::strerror(errno)));
  }
  Fd read_end{pipe_fds[0]};
  Fd write_end{pipe_fds[1]};
  const absl::StatusOr<pid_t> pid = SpawnPlugin(plugin, exec_info, write_end.fd);
  close(write_end.fd);
  write_end.fd = -1;
  if (!pid.ok()) return pid.status();

  bool timed_out = false;
  GPUSCHED_ASSIGN_OR_RETURN(std::string out,
                            ReadPluginOutput(plugin, read_end.fd, *pid, timeout, &timed_out));
  if (timed_out) kill(*pid, SIGKILL);
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return absl::DeadlineExceededError(StrCat("exec plugin '", plugin.command, "': no answer in ",
                                              timeout.count(), " ms; killed"));
  }
  return PluginAnswer(plugin, status, out);
}

ExecCredentialSource::ExecCredentialSource(ExecPlugin plugin, std::string exec_info,
                                           std::chrono::milliseconds timeout)
    : plugin_(std::move(plugin)), exec_info_(std::move(exec_info)), timeout_(timeout) {}

std::string ExecCredentialSource::Get() {
  absl::MutexLock lock(&mu_);
  const int64_t now = std::time(nullptr);
  const bool expiring = expiration_unix_ != 0 && now >= expiration_unix_ - kExpiryMarginSeconds;
  if (!token_.empty() && !stale_ && !expiring) return token_;
  const auto steady = std::chrono::steady_clock::now();
  if (runs_ > 0 && steady - last_run_ < std::chrono::seconds(1)) return token_;
  last_run_ = steady;
  ++runs_;
  auto cred = RunExecPlugin(plugin_, exec_info_, timeout_);
  if (!cred.ok()) {
    std::cerr << "gpusched: kube: credential plugin: " << cred.status().message()
              << (token_.empty() ? "" : "; keeping the last token") << "\n";
    return token_;
  }
  token_ = std::move(cred->token);
  expiration_unix_ = cred->expiration_unix;
  stale_ = false;
  return token_;
}

void ExecCredentialSource::Invalidate() {
  absl::MutexLock lock(&mu_);
  stale_ = true;
}

int64_t ExecCredentialSource::runs() const {
  absl::MutexLock lock(&mu_);
  return runs_;
}

}  // namespace gpusched::kube
