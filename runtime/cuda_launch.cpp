#include "runtime/cuda_launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "sim/core/error.h"

namespace lacuna::runtime {
namespace {

using Clock = std::chrono::steady_clock;

int parse_int(const char* name, const char* value) {
  try {
    std::size_t used = 0;
    const int v = std::stoi(value, &used);
    if (used == std::strlen(value) && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw Error(std::string("mpirun: ") + name + "='" + value + "' is not a non-negative integer");
}

std::string safe_name(std::string s) {
  for (char& c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!ok) c = '_';
  }
  return s.empty() ? std::string("nojob") : s;
}

std::string errno_text() { return std::strerror(errno); }

// Sends all of `bytes`; false when the other end is gone (no SIGPIPE).
bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Reads what is available into `buf`; false at end of file or on error.
bool read_some(int fd, std::string& buf) {
  char chunk[65536];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
}

std::uint16_t kind_of(std::string_view header) {
  return static_cast<std::uint16_t>(static_cast<unsigned char>(header[6]) |
                                    (static_cast<unsigned char>(header[7]) << 8));
}

// True when `buf` holds a whole message (any kind); throws on a bad header.
bool complete(const std::string& buf, const std::string& source) {
  if (buf.size() < kMessageHeaderBytes) return false;
  const auto kind = static_cast<MessageKind>(kind_of(buf));
  const std::uint64_t n = payload_size(buf, kind == MessageKind::kIds ? MessageKind::kIds : MessageKind::kOutcome,
                                       source);
  return buf.size() >= kMessageHeaderBytes + n;
}

// Reads one whole message from fd within `deadline`.
std::string read_message(int fd, Clock::time_point deadline, const std::string& source) {
  std::string buf;
  while (!complete(buf, source)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) throw Error("timed out waiting for a message from " + source);
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r < 0 && errno != EINTR) throw Error("poll: " + errno_text());
    if (r <= 0) continue;
    if (!read_some(fd, buf)) {
      payload_size(buf, MessageKind::kOutcome, source);  // throws "truncated ... closed its end"
      throw Error("truncated message from " + source + " (it closed its end mid-message)");
    }
  }
  return buf;
}

std::string status_text(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

struct Child {
  pid_t pid = -1;
  int fd = -1;  // the parent's end of the socketpair
  std::string buf;
  bool done = false;
  int status = 0;
  bool reaped = false;
};

// Kills (SIGKILL, by pid) and reaps every child not yet reaped; closes fds.
void finish_children(std::vector<Child>& children, bool kill_them) {
  for (Child& c : children) {
    if (c.pid > 0 && !c.reaped && kill_them) ::kill(c.pid, SIGKILL);
  }
  for (Child& c : children) {
    if (c.pid > 0 && !c.reaped) {
      while (::waitpid(c.pid, &c.status, 0) < 0 && errno == EINTR) {
      }
      c.reaped = true;
    }
    if (c.fd >= 0) ::close(c.fd);
    c.fd = -1;
  }
}

[[noreturn]] void child_exit(int fd, const std::string& message) {
  const bool ok = send_all(fd, message);
  ::close(fd);
  std::fflush(nullptr);
  ::_exit(ok ? 0 : 3);
}

}  // namespace

std::optional<MpiEnv> detect_mpi(const std::function<const char*(const char*)>& env) {
  const char* size = env("OMPI_COMM_WORLD_SIZE");
  if (size == nullptr) return std::nullopt;
  MpiEnv m;
  m.world_size = parse_int("OMPI_COMM_WORLD_SIZE", size);
  const char* rank = env("OMPI_COMM_WORLD_RANK");
  if (rank == nullptr) throw Error("mpirun: OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not");
  m.world_rank = parse_int("OMPI_COMM_WORLD_RANK", rank);
  const char* local = env("OMPI_COMM_WORLD_LOCAL_RANK");
  m.local_rank = local != nullptr ? parse_int("OMPI_COMM_WORLD_LOCAL_RANK", local) : m.world_rank;
  if (m.world_size < 1 || m.world_rank >= m.world_size) {
    throw Error("mpirun: OMPI_COMM_WORLD_RANK " + std::to_string(m.world_rank) + " is not below OMPI_COMM_WORLD_SIZE " +
                std::to_string(m.world_size));
  }
  // A name unique to the job, the same in every process of it.
  for (const char* var : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"}) {
    if (const char* v = env(var); v != nullptr && *v != '\0') {
      m.job_id = safe_name(v);
      break;
    }
  }
  if (m.job_id.empty()) m.job_id = "nojob";
  return m;
}

std::string rendezvous_dir(const MpiEnv& mpi, const std::string& dir_override) {
  if (!dir_override.empty()) return dir_override;
  return "/tmp/lacuna-" + mpi.job_id;
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + tmp + ": " + errno_text());
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) throw Error("cannot write " + tmp + ": " + errno_text());
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    std::remove(tmp.c_str());
    throw Error("cannot rename " + tmp + " to " + path + ": " + why);
  }
}

std::string read_file_when_ready(const std::string& path, std::chrono::milliseconds timeout,
                                 const std::string& waiting_for) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream s;
      s << in.rdbuf();
      return s.str();
    }
    if (Clock::now() > deadline) {
      throw Error(SourceLocation{}, "timed out after " + std::to_string(timeout.count()) + " ms waiting for " +
                  waiting_for + " (" + path + ")",
                  "check that every process of the job runs the same lacuna command and can see that directory "
                  "(set LACUNA_RENDEZVOUS_DIR to a shared one on several nodes)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string exchange_ids_via_files(const MpiEnv& mpi, const std::string& dir,
                                   const std::function<std::string()>& make_ids, std::chrono::milliseconds timeout) {
  const std::string path = dir + "/ids-" + mpi.job_id + ".bin";
  if (mpi.world_rank == 0) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Error("cannot create the rendezvous directory " + dir + ": " + ec.message());
    const std::string message = encode_message(MessageKind::kIds, make_ids());
    write_file_atomically(path, message);
    return std::string(decode_message(message, MessageKind::kIds, path));
  }
  const std::string message = read_file_when_ready(path, timeout, "the NCCL ids from world rank 0");
  return std::string(decode_message(message, MessageKind::kIds, path));
}

std::vector<RankOutcome> gather_outcomes_via_files(const MpiEnv& mpi, const std::string& dir,
                                                   const RankOutcome& mine, std::chrono::milliseconds timeout) {
  auto path_of = [&](int w) { return dir + "/outcome-" + mpi.job_id + "-" + std::to_string(w) + ".bin"; };
  if (mpi.world_rank != 0) {
    write_file_atomically(path_of(mpi.world_rank), encode_outcome(mine));
    return {mine};
  }
  std::vector<RankOutcome> all{mine};
  for (int w = 1; w < mpi.world_size; ++w) {
    const std::string path = path_of(w);
    all.push_back(decode_outcome(read_file_when_ready(path, timeout, "the spans of world rank " + std::to_string(w)),
                                 path));
    std::remove(path.c_str());
  }
  std::remove((dir + "/ids-" + mpi.job_id + ".bin").c_str());
  return all;
}

std::vector<RankOutcome> run_children(int n, const std::function<std::string()>& make_ids,
                                      const std::function<RankOutcome(int, const std::string&)>& body,
                                      std::chrono::milliseconds ids_timeout) {
  if (n < 1) throw Error("run_children: n must be >= 1");
  std::vector<Child> children(static_cast<std::size_t>(n));
  std::fflush(nullptr);  // no buffered output duplicated into the children
  for (int i = 0; i < n; ++i) {
    int sv[2] = {-1, -1};
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      const std::string why = errno_text();
      finish_children(children, true);
      throw Error("socketpair: " + why);
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      const std::string why = errno_text();
      ::close(sv[0]);
      ::close(sv[1]);
      finish_children(children, true);
      throw Error("fork: " + why);
    }
    if (pid == 0) {
      // Child: only its own end stays open.
      ::close(sv[0]);
      for (Child& c : children) {
        if (c.fd >= 0) ::close(c.fd);
      }
      const int fd = sv[1];
      RankOutcome failed;
      failed.rank = i;
      try {
        if (i == 0) {
          if (!send_all(fd, encode_message(MessageKind::kIds, make_ids()))) ::_exit(3);
        }
        const std::string message = read_message(fd, Clock::now() + ids_timeout, "the launcher");
        if (static_cast<MessageKind>(kind_of(message)) != MessageKind::kIds) ::_exit(4);  // the launcher gave up
        const std::string ids(decode_message(message, MessageKind::kIds, "the launcher"));
        child_exit(fd, encode_outcome(body(i, ids)));
      } catch (const std::exception& e) {
        failed.error = e.what();
      } catch (...) {
        failed.error = "unknown exception";
      }
      child_exit(fd, encode_outcome(failed));
    }
    ::close(sv[1]);
    children[static_cast<std::size_t>(i)].pid = pid;
    children[static_cast<std::size_t>(i)].fd = sv[0];
  }

  auto source = [](int i) { return "child " + std::to_string(i); };
  try {
    // Ids: from child 0 to everyone. Child 0 may report a failure instead.
    const std::string first = read_message(children[0].fd, Clock::now() + ids_timeout, source(0));
    if (static_cast<MessageKind>(kind_of(first)) != MessageKind::kIds) {
      const RankOutcome o = decode_outcome(first, source(0));
      throw Error("child 0 failed before the ranks could connect: " + o.error);
    }
    decode_message(first, MessageKind::kIds, source(0));
    for (Child& c : children) send_all(c.fd, first);  // a dead child shows up below

    // Outcomes, in whatever order they come.
    std::vector<RankOutcome> out(static_cast<std::size_t>(n));
    int left = n;
    while (left > 0) {
      std::vector<pollfd> fds;
      std::vector<int> which;
      for (int i = 0; i < n; ++i) {
        if (!children[static_cast<std::size_t>(i)].done) {
          fds.push_back(pollfd{children[static_cast<std::size_t>(i)].fd, POLLIN, 0});
          which.push_back(i);
        }
      }
      const int r = ::poll(fds.data(), fds.size(), 1000);
      if (r < 0 && errno != EINTR) throw Error("poll: " + errno_text());
      for (std::size_t k = 0; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        Child& c = children[static_cast<std::size_t>(which[k])];
        const bool open = read_some(c.fd, c.buf);
        if (complete(c.buf, source(which[k]))) {
          out[static_cast<std::size_t>(which[k])] = decode_outcome(c.buf, source(which[k]));
          c.done = true;
          --left;
          if (!out[static_cast<std::size_t>(which[k])].error.empty()) {
            throw Error("child " + std::to_string(which[k]) + " failed: " + out[static_cast<std::size_t>(which[k])].error);
          }
        } else if (!open) {
          while (::waitpid(c.pid, &c.status, 0) < 0 && errno == EINTR) {
          }
          c.reaped = true;
          throw Error("child " + std::to_string(which[k]) + " (pid " + std::to_string(c.pid) + ") ended without reporting (" +
                      status_text(c.status) + ")" + (c.buf.empty() ? "" : ", after a truncated message"));
        }
      }
    }
    finish_children(children, false);
    return out;
  } catch (...) {
    finish_children(children, true);
    throw;
  }
}

std::string run_in_child(const std::function<std::string()>& fn, std::chrono::milliseconds timeout) {
  int sv[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw Error("socketpair: " + errno_text());
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const std::string why = errno_text();
    ::close(sv[0]);
    ::close(sv[1]);
    throw Error("fork: " + why);
  }
  if (pid == 0) {
    ::close(sv[0]);
    // Success: the text as a kIds message; failure: an outcome with the error.
    RankOutcome failed;
    try {
      child_exit(sv[1], encode_message(MessageKind::kIds, fn()));
    } catch (const std::exception& e) {
      failed.error = e.what();
    } catch (...) {
      failed.error = "unknown exception";
    }
    child_exit(sv[1], encode_outcome(failed));
  }
  ::close(sv[1]);
  std::vector<Child> children(1);
  children[0].pid = pid;
  children[0].fd = sv[0];
  try {
    const std::string message = read_message(sv[0], Clock::now() + timeout, "the probe child");
    finish_children(children, false);
    if (static_cast<MessageKind>(kind_of(message)) == MessageKind::kIds) {
      return std::string(decode_message(message, MessageKind::kIds, "the probe child"));
    }
    throw Error(decode_outcome(message, "the probe child").error);
  } catch (...) {
    finish_children(children, true);
    throw;
  }
}

}  // namespace lacuna::runtime
