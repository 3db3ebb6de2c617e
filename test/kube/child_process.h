// A built gpusched binary run as a child process for tests (the restart test,
// the topology agent test): spawned with arguments, its stdout and stderr
// appended to a log file, killed on destruction. Not thread-safe.
#ifndef GPUSCHED_TEST_KUBE_CHILD_PROCESS_H_
#define GPUSCHED_TEST_KUBE_CHILD_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
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

}  // namespace gpusched::testing

#endif  // GPUSCHED_TEST_KUBE_CHILD_PROCESS_H_
