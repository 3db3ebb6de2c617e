// For tests that run the built gpusched binary (the restart test, the
// topology agent test, the config reload test): a child process spawned with
// arguments, its stdout and stderr appended to a log file, killed on
// destruction; and the loopback helpers such tests need (a free port, one
// HTTP request on its own connection, waiting for a condition).
// Not thread-safe.
#ifndef GPUSCHED_TEST_TESTING_CHILD_PROCESS_H_
#define GPUSCHED_TEST_TESTING_CHILD_PROCESS_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace gpusched::testing {

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Child {
 public:
  Child(const std::string& binary, std::vector<std::string> args, const std::string& log) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary.c_str()));
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (posix_spawn(&pid_, binary.c_str(), &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { Kill(SIGKILL); }

  bool started() const { return pid_ > 0 || exited_; }
  // The process id; -1 once it has ended.
  pid_t pid() const { return pid_; }
  // Sends `sig` without waiting (SIGHUP: the process goes on).
  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  // Sends `sig` and reaps the process.
  void Kill(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    Reap(0);
  }
  bool Alive() { return pid_ > 0 && !Reap(WNOHANG); }
  // Waits for the process to end; its exit code, or -1 if a signal ended it.
  int Wait() {
    if (pid_ > 0) Reap(0);
    return exit_code_;
  }

 private:
  // True if the process has ended (and is reaped).
  bool Reap(int flags) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, flags);
    if (r == 0) return false;
    exited_ = true;
    exit_code_ = r == pid_ && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    pid_ = -1;
    return true;
  }

  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
};

// Polls `pred` every 10 ms until it holds or `timeout` passes.
inline bool WaitFor(const std::function<bool()>& pred,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// A loopback TCP port nothing listens on right now.
inline uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  uint16_t port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    socklen_t len = sizeof(a);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

struct HttpResult {
  int status = 0;  // 0 = no response
  std::string body;
};

// One request to 127.0.0.1:port on its own connection (Connection: close).
// `after_send` runs once the request is written, before the response is read.
inline HttpResult Http(uint16_t port, const std::string& method, const std::string& path,
                       const std::string& body = "", const std::function<void()>& after_send = {}) {
  HttpResult r;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return r;
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!body.empty()) req += "Content-Type: application/json\r\n";
  req += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  size_t off = 0;
  while (off < req.size()) {
    ssize_t n = send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  if (after_send) after_send();
  std::string buf;
  char tmp[16384];
  while (true) {
    ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) break;
    buf.append(tmp, static_cast<size_t>(n));
  }
  close(fd);
  size_t end = buf.find("\r\n\r\n");
  if (buf.size() < 12 || end == std::string::npos) return r;
  r.status = std::atoi(buf.substr(9, 3).c_str());
  r.body = buf.substr(end + 4);
  return r;
}

}  // namespace gpusched::testing

#endif  // GPUSCHED_TEST_TESTING_CHILD_PROCESS_H_
