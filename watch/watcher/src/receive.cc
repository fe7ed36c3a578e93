// Receiving a process image's records: one record (or one SITES / CENSUS batch, or a BUNDLE of
// them) per SOCK_SEQPACKET message, up to kMessagesPerRead per recvmmsg, applied to its WatchRecording.
// Anything that is not a record of this protocol is counted as malformed and dropped.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>

#include "internal.h"
#include "leakbound/watch/heap.h"

namespace leakbound::watch {
namespace {

std::string SignalName(int signal_number) {
  const char *abbrev = sigabbrev_np(signal_number);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal_number);
}

void Consume(const leakbound_watch_record &record, WatchRecording &recording) {
  if (record.magic != LEAKBOUND_WATCH_MAGIC || record.version != LEAKBOUND_WATCH_VERSION) {
    ++recording.malformed_records;
    return;
  }
  const std::string text(record.text, strnlen(record.text, sizeof record.text));
  switch (record.kind) {
    case LEAKBOUND_WATCH_HELLO: {  // the image's series starts (again: it began to mark steps)
      const std::vector<std::string> notes = recording.notes;
      const std::string role = recording.role;
      const std::uint64_t restarts = recording.hello ? recording.restarts + 1 : 0;
      const std::uint64_t clock_moves = recording.clock_moves;
      const std::uint64_t malformed = recording.malformed_records;
      const std::uint64_t messages = recording.messages;
      recording = WatchRecording{};
      recording.malformed_records = malformed;  // what was dropped stays said
      recording.messages = messages;
      recording.notes = notes;
      recording.role = role;
      recording.restarts = restarts;
      recording.clock_moves = clock_moves;
      recording.hello = true;
      recording.origin = static_cast<int>(record.site);
      recording.parent_pid = record.seq;
      recording.own_pid = record.pid;
      recording.fork_index = record.values[0];
      recording.exe_dev = record.values[1];
      recording.exe_ino = record.values[2];
      recording.heap_state = text;
      recording.at_start = record.counters;
      break;
    }
    case LEAKBOUND_WATCH_ROLE:
      recording.role = text;
      break;
    case LEAKBOUND_WATCH_STEP:
    case LEAKBOUND_WATCH_TICK: {
      if (record.kind == LEAKBOUND_WATCH_TICK && record.site == 1) {
        recording.at_clock = true;
      } else {
        ++recording.clock_moves;
      }
      WatchSample sample = std::move(recording.pending);
      recording.pending = WatchSample{};
      sample.seq = record.seq;
      sample.time_ns = record.time_ns;
      sample.counters = record.counters;
      recording.sites_dropped = std::max(recording.sites_dropped, record.values[0]);
      recording.mapped_dropped = std::max(recording.mapped_dropped, record.values[1]);
      recording.samples.push_back(std::move(sample));
      break;
    }
    case LEAKBOUND_WATCH_DEVICE:
      recording.pending.has_device = true;
      std::copy(std::begin(record.values), std::end(record.values),
                recording.pending.MakeDetail().device.begin());
      break;
    case LEAKBOUND_WATCH_COUNTER:
      if (!text.empty()) recording.pending.MakeDetail().framework[text] = record.values[0];
      break;
    case LEAKBOUND_WATCH_PROBE:
      recording.probe_piece += text;
      if (record.site == 0) {
        const size_t tab = recording.probe_piece.find('\t');
        if (tab != std::string::npos) {
          recording.probe_states[recording.probe_piece.substr(0, tab)] =
              recording.probe_piece.substr(tab + 1);
        } else {
          ++recording.malformed_records;
        }
        recording.probe_piece.clear();
      }
      break;
    case LEAKBOUND_WATCH_FRAME: {
      std::vector<std::string> &frames = recording.site_frames[record.site];
      if (record.seq >= 1 && record.seq <= LEAKBOUND_WATCH_FRAMES &&
          record.values[1] <= LEAKBOUND_WATCH_FRAMES) {
        if (record.seq == 1 && record.values[1] > 0) frames.assign(record.values[1], {});
        if (frames.size() < record.seq) frames.resize(record.seq);
        frames[record.seq - 1] = record.values[0] == 1 ? detail::kScannedFrame + text : text;
      } else {
        ++recording.malformed_records;
      }
      break;
    }
    case LEAKBOUND_WATCH_PYTHON:
      if (record.values[0] == 0 || record.values[0] > record.values[1] ||
          record.values[1] > record.values[2] || record.values[2] > LEAKBOUND_WATCH_SAMPLES) {
        ++recording.malformed_records;
      } else {
        recording.site_python[record.site] = {text, record.values[0], record.values[1],
                                              record.values[2]};
      }
      break;
    case LEAKBOUND_WATCH_NAME:
      recording.site_names[record.site] = text;
      break;
    case LEAKBOUND_WATCH_NOTE:
      recording.notes.push_back(text);
      break;
    case LEAKBOUND_WATCH_BYE:
      recording.at_exit = record.counters;
      recording.sites_dropped = std::max(recording.sites_dropped, record.values[0]);
      recording.mapped_dropped = std::max(recording.mapped_dropped, record.values[1]);
      recording.forks = std::max(recording.forks, record.counters.forks);
      break;
    case LEAKBOUND_WATCH_FORK:
      recording.forks = std::max(recording.forks, record.counters.forks);
      break;
    default:
      ++recording.malformed_records;
  }
}

// A SITES, CENSUS or SITE_CENSUS message (channel.h): `count` entries after the record's
// head; its size must match.
void ConsumeSiteBatch(const leakbound_watch_site_batch &batch, size_t size,
                      WatchRecording &recording) {
  const size_t head = offsetof(leakbound_watch_site_batch, entries);
  if (batch.count > LEAKBOUND_WATCH_SITE_BATCH ||
      size != head + batch.count * sizeof(leakbound_watch_site_entry)) {
    ++recording.malformed_records;
    return;
  }
  if (batch.kind == LEAKBOUND_WATCH_CENSUS) {
    recording.pending.has_census = true;
    auto &census = recording.pending.MakeDetail().census;
    for (uint32_t i = 0; i < batch.count; ++i) {
      const leakbound_watch_site_entry &entry = batch.entries[i];
      if (entry.site >= LEAKBOUND_HEAP_COHORTS) {
        ++recording.malformed_records;
        continue;
      }
      census[entry.site] = {entry.bytes, entry.allocations};
    }
    return;
  }
  if (batch.kind == LEAKBOUND_WATCH_SITE_CENSUS) {
    auto &census = recording.pending.MakeDetail().site_census;
    for (uint32_t i = 0; i < batch.count; ++i) {
      const leakbound_watch_site_entry &entry = batch.entries[i];
      if (entry.reserved == LEAKBOUND_WATCH_SITE_CENSUS_FROM && entry.bytes <= LEAKBOUND_HEAP_COHORTS) {
        census[entry.site].first = static_cast<std::uint32_t>(entry.bytes);
        continue;
      }
      const auto it = census.find(entry.site);  // its FROM entry comes first
      if (it == census.end() || entry.reserved >= LEAKBOUND_HEAP_COHORTS ||
          entry.reserved < it->second.first) {
        ++recording.malformed_records;
        continue;
      }
      it->second.cohorts[entry.reserved] = {entry.bytes, entry.allocations};
    }
    return;
  }
  for (uint32_t i = 0; i < batch.count; ++i) {
    const leakbound_watch_site_entry &entry = batch.entries[i];
    if (entry.reserved == LEAKBOUND_WATCH_SITE_MAPPING) recording.mapping_sites.insert(entry.site);
    if (entry.reserved == LEAKBOUND_WATCH_SITE_DEVICE) recording.device_sites.insert(entry.site);
    recording.site_updates.push_back(
        {recording.samples.size(), entry.site, entry.bytes, entry.allocations});
  }
}

// A NAMES message (channel.h): `count` packed names filling the message exactly; one that does
// not add up is dropped whole (checked before any name is kept).
void ConsumeNameBatch(const leakbound_watch_name_batch &batch, size_t size,
                      WatchRecording &recording) {
  const size_t end = size - offsetof(leakbound_watch_name_batch, bytes);
  const auto walk = [&](bool keep) {
    size_t at = 0;
    for (uint32_t i = 0; i < batch.count; ++i) {
      std::uint32_t site = 0;
      std::uint16_t length = 0;
      if (end - at < sizeof site + sizeof length) return false;  // fewer names than it says
      std::memcpy(&site, batch.bytes + at, sizeof site);
      std::memcpy(&length, batch.bytes + at + sizeof site, sizeof length);
      at += sizeof site + sizeof length;
      if (length >= LEAKBOUND_WATCH_TEXT || end - at < length) return false;
      if (keep) {
        const char *text = reinterpret_cast<const char *>(batch.bytes + at);
        recording.site_names[site] = std::string(text, strnlen(text, length));  // as NAME's
      }
      at += length;
    }
    return at == end;
  };
  if (walk(false)) {
    walk(true);
  } else {
    ++recording.malformed_records;
  }
}

// One message as received: a record, a SITES / CENSUS batch or a NAMES batch (told apart by
// kind; all start with the same head).
union WatchMessage {
  leakbound_watch_record record;
  leakbound_watch_site_batch batch;
  leakbound_watch_name_batch names;
  leakbound_watch_bundle bundle;
  unsigned char bytes[LEAKBOUND_WATCH_BUNDLE_BYTES];
};
static_assert(sizeof(WatchMessage) == LEAKBOUND_WATCH_BUNDLE_BYTES, "every message fits a bundle's size");

void ConsumeMessage(const WatchMessage &message, size_t size, WatchRecording &recording);

// A BUNDLE message (channel.h): its parts, each consumed as a message of its own; one whose
// parts do not add up (a size past the end, a bundle inside, another count) is dropped whole,
// checked before any part is used.
void ConsumeBundle(const WatchMessage &message, size_t size, WatchRecording &recording) {
  const auto walk = [&](bool keep) {
    size_t at = sizeof(leakbound_watch_bundle);
    for (uint32_t i = 0; i < message.bundle.count; ++i) {
      leakbound_watch_part part{};
      if (size - at < sizeof part) return false;
      std::memcpy(&part, message.bytes + at, sizeof part);
      at += sizeof part;
      if (part.size > size - at) return false;
      leakbound_watch_bundle head{};
      if (part.size >= sizeof head) {
        std::memcpy(&head, message.bytes + at, sizeof head);
        if (head.kind == LEAKBOUND_WATCH_BUNDLE) return false;
      }
      if (keep) {
        WatchMessage copy;  // aligned, and whole: a part is read as a message of its own
        std::memcpy(copy.bytes, message.bytes + at, part.size);
        ConsumeMessage(copy, part.size, recording);
      }
      at += std::min<size_t>((part.size + 7) & ~size_t{7}, size - at);
    }
    return at == size;
  };
  if (walk(false)) {
    walk(true);
  } else {
    ++recording.malformed_records;
  }
}

void ConsumeMessage(const WatchMessage &message, size_t size, WatchRecording &recording) {
  if (size == sizeof(leakbound_watch_bundle) && message.bundle.magic == LEAKBOUND_WATCH_MAGIC &&
      message.bundle.version == LEAKBOUND_WATCH_VERSION &&
      message.bundle.kind == LEAKBOUND_WATCH_WAKE) {
    return;  // the ring is read after every read of the connection
  }
  if (size >= sizeof(leakbound_watch_bundle) && message.bundle.magic == LEAKBOUND_WATCH_MAGIC &&
      message.bundle.version == LEAKBOUND_WATCH_VERSION &&
      message.bundle.kind == LEAKBOUND_WATCH_BUNDLE) {
    ConsumeBundle(message, size, recording);
  } else if (size >= offsetof(leakbound_watch_site_batch, entries) &&
      message.batch.magic == LEAKBOUND_WATCH_MAGIC &&
      message.batch.version == LEAKBOUND_WATCH_VERSION &&
      (message.batch.kind == LEAKBOUND_WATCH_SITES ||
       message.batch.kind == LEAKBOUND_WATCH_CENSUS ||
       message.batch.kind == LEAKBOUND_WATCH_SITE_CENSUS)) {
    ConsumeSiteBatch(message.batch, size, recording);
  } else if (size >= offsetof(leakbound_watch_name_batch, bytes) &&
             message.names.magic == LEAKBOUND_WATCH_MAGIC &&
             message.names.version == LEAKBOUND_WATCH_VERSION &&
             message.names.kind == LEAKBOUND_WATCH_NAMES) {
    ConsumeNameBatch(message.names, size, recording);
  } else if (size == sizeof message.record) {
    Consume(message.record, recording);
  } else {
    ++recording.malformed_records;
  }
}

}  // namespace

std::string WatchRecording::Ending() const {
  if (replaced_by_exec) return "exec'd a new program";
  if (still_running) return "still running when watch stopped waiting";
  if (!status_known) return "ended (its parent, not watch, collected its status)";
  if (term_signal != 0) {
    std::string text = "killed by " + SignalName(term_signal);
    if (forwarded_mask & (1ull << term_signal)) text += " (forwarded by watch)";
    return text;
  }
  if (exited) return "exited with status " + std::to_string(exit_status);
  return "still running";
}

namespace detail {

constexpr size_t kRingMapped = LEAKBOUND_WATCH_RING_DATA + LEAKBOUND_WATCH_RING_BYTES;

ChannelRing::~ChannelRing() {
  if (ring_) ::munmap(ring_, kRingMapped);
}

std::string ChannelRing::Attach(int fd) {
  struct stat st {};
  std::string why;
  // The seals first: a file that cannot have them (a FUSE file a program made, whose fstat could
  // block) is refused before anything else is asked of it.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (ring_) {
    why = "a second ring";
  } else if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
    why = "not sealed against resizing";  // a shrunk file would fault (SIGBUS) on our reads
  } else if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
             static_cast<std::uint64_t>(st.st_size) != kRingMapped) {
    why = "not a ring of " + std::to_string(kRingMapped) + " bytes";
  } else {
    void *at = ::mmap(nullptr, kRingMapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (at == MAP_FAILED) {
      why = std::string("mmap: ") + std::strerror(errno);
    } else {
      auto *ring = static_cast<leakbound_watch_ring *>(at);
      if (ring->magic != LEAKBOUND_WATCH_MAGIC || ring->version != LEAKBOUND_WATCH_VERSION ||
          ring->bytes != LEAKBOUND_WATCH_RING_BYTES) {
        why = "its head is not this protocol's";
        ::munmap(at, kRingMapped);
      } else {
        ring_ = ring;
        tail_ = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
        __atomic_store_n(&ring->read_by, 1u, __ATOMIC_RELEASE);  // the program may wait for it
      }
    }
  }
  ::close(fd);
  return why;
}

bool ChannelRing::Pending() const {
  return ring_ && !broken_ && __atomic_load_n(&ring_->head, __ATOMIC_ACQUIRE) != tail_;
}

bool ChannelRing::Read(WatchRecording &recording) {
  if (!ring_ || broken_) return !broken_;
  constexpr std::uint64_t kData = LEAKBOUND_WATCH_RING_BYTES;
  const unsigned char *data = reinterpret_cast<const unsigned char *>(ring_) + LEAKBOUND_WATCH_RING_DATA;
  static WatchMessage message;  // 4 KiB, reused; the part is copied out before it is read
  const std::uint64_t head = __atomic_load_n(&ring_->head, __ATOMIC_ACQUIRE);
  bool bad = head - tail_ > kData || head % 8 != 0;
  while (!bad && tail_ != head) {
    const std::uint64_t at = tail_ & (kData - 1);
    leakbound_watch_part part{};  // its size read once: the program could write it meanwhile
    part.size = __atomic_load_n(reinterpret_cast<const std::uint32_t *>(data + at), __ATOMIC_RELAXED);
    if (part.size == LEAKBOUND_WATCH_RING_SKIP) {
      bad = kData - at > head - tail_;
      if (!bad) tail_ += kData - at;
      continue;
    }
    const std::uint64_t need = sizeof part + ((std::uint64_t{part.size} + 7) & ~std::uint64_t{7});
    if (part.size > sizeof message || need > kData - at || need > head - tail_) {
      bad = true;
      break;
    }
    std::memcpy(message.bytes, data + at + sizeof part, part.size);
    ++recording.messages;
    ++messages_;
    ConsumeMessage(message, part.size, recording);
    tail_ += need;
  }
  if (bad) {  // a program that wrote over its ring: what it held from here is not read
    broken_ = true;
    ++recording.malformed_records;
    recording.notes.push_back(
        "its channel's ring was written over (a message that does not fit): what came after is "
        "lost");
  }
  __atomic_store_n(&ring_->tail, tail_, __ATOMIC_RELEASE);
  return !broken_;
}

// Reads every message waiting on the socket, kMessagesPerRead per recvmmsg; returns false once
// no writer is left. A descriptor can come only with a HELLO (the ring); any
// other is closed and the message counted malformed.
constexpr unsigned kMessagesPerRead = 64;
bool DrainConnection(int fd, ChannelRing &ring, WatchRecording &recording, bool block) {
  // 256 KiB, reused; left uninitialised, so that only the pages a read fills are ever touched
  // (zeroed, they were 64 of the watcher's page faults in a run that sent a few messages).
  static const auto messages = std::make_unique_for_overwrite<WatchMessage[]>(kMessagesPerRead);
  struct Control {
    alignas(cmsghdr) char bytes[CMSG_SPACE(sizeof(int) * 4)];
  };
  static const auto controls = std::make_unique_for_overwrite<Control[]>(kMessagesPerRead);
  std::array<iovec, kMessagesPerRead> vectors{};
  std::array<mmsghdr, kMessagesPerRead> headers{};
  for (;;) {
    for (unsigned i = 0; i < kMessagesPerRead; ++i) {
      vectors[i] = {&messages[i], sizeof(WatchMessage)};
      headers[i] = {};
      headers[i].msg_hdr.msg_iov = &vectors[i];
      headers[i].msg_hdr.msg_iovlen = 1;
      headers[i].msg_hdr.msg_control = controls[i].bytes;
      headers[i].msg_hdr.msg_controllen = sizeof controls[i].bytes;
    }
    const int got = ::recvmmsg(fd, headers.data(), kMessagesPerRead,
                               MSG_CMSG_CLOEXEC | (block ? MSG_WAITFORONE : MSG_DONTWAIT), nullptr);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    recording.messages += static_cast<std::uint64_t>(got);
    // The descriptors every message of the batch brought (SCM_RIGHTS), taken out first, so that
    // none is left open whatever the loop below does.
    std::vector<std::vector<int>> received(static_cast<size_t>(got));
    for (int i = 0; i < got; ++i) {
      msghdr &header = headers[i].msg_hdr;
      for (cmsghdr *c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t k = 0; k < n; ++k) {
          int one = -1;
          std::memcpy(&one, CMSG_DATA(c) + k * sizeof(int), sizeof one);
          received[static_cast<size_t>(i)].push_back(one);
        }
      }
    }
    const auto close_from = [&](int first) {
      for (int j = first; j < got; ++j) {
        for (const int one : received[static_cast<size_t>(j)]) ::close(one);
        received[static_cast<size_t>(j)].clear();
      }
    };
    for (int i = 0; i < got; ++i) {
      const msghdr &header = headers[i].msg_hdr;
      std::vector<int> &fds = received[static_cast<size_t>(i)];
      const bool hello = headers[i].msg_len == sizeof(leakbound_watch_record) &&
                         messages[i].record.magic == LEAKBOUND_WATCH_MAGIC &&
                         messages[i].record.kind == LEAKBOUND_WATCH_HELLO;
      if (hello && ((header.msg_flags & MSG_CTRUNC) || (fds.size() == 1 && !ring.attached()))) {
        // A ring's descriptor that did not arrive (watch out of descriptors, a security module)
        // or that cannot be read: the program would write into a ring nobody reads; end the
        // connection, so that it stops (its next wake-up fails) rather than waits for room.
        const std::string why = (header.msg_flags & MSG_CTRUNC)
                                    ? std::string("its descriptor did not arrive")
                                    : ring.Attach(fds[0]);
        fds.clear();  // Attach took it
        if (!why.empty()) {
          recording.notes.push_back("watch could not read this process's channel (" + why +
                                    "): what it sent after its start is lost");
          ++recording.malformed_records;
          close_from(i);
          return false;
        }
      } else if (!fds.empty()) {
        for (const int extra : fds) ::close(extra);
        fds.clear();
        ++recording.malformed_records;
      }
      if (headers[i].msg_len == sizeof(leakbound_watch_bundle) &&
          messages[i].bundle.magic == LEAKBOUND_WATCH_MAGIC &&
          messages[i].bundle.kind == LEAKBOUND_WATCH_WAKE) {
        ring.NoteWake();  // not the connection's own traffic (watch's rests follow that)
        continue;
      }
      // A zero-length message is the end of the stream only once every writer has closed;
      // before that it is a program writing an empty message on the descriptor: skipped.
      if (headers[i].msg_len == 0) {
        pollfd hangup{fd, POLLIN, 0};
        if (::poll(&hangup, 1, 0) < 0 || (hangup.revents & POLLHUP)) {
          close_from(i);
          return false;
        }
        ++recording.malformed_records;
        continue;
      }
      if (headers[i].msg_hdr.msg_flags & MSG_TRUNC) {
        ++recording.malformed_records;
        continue;
      }
      ConsumeMessage(messages[i], headers[i].msg_len, recording);
    }
    if (got == 0) return false;
    block = false;
  }
}

bool Drain(int fd, ChannelRing &ring, WatchRecording &recording, bool block) {
  const bool open = DrainConnection(fd, ring, recording, block);
  // After the connection: its HELLO hands the ring over. A ring written over ends the connection,
  // so that the program stops (its next wake-up fails) rather than waits for room forever.
  const bool readable = ring.Read(recording);
  return open && readable;
}

}  // namespace detail
}  // namespace leakbound::watch
