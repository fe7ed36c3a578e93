// The watcher's side of the channel's ring (channel.h): a ring handed over with the HELLO is
// read, in order and across its end; one that is not what it should be ends the connection and
// says why; no descriptor a message brings is left open. Run under the sanitizers (label
// harness), with the ring written here as the preload writes it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "internal.h"
#include "leakbound/watch/channel.h"

namespace leakbound::watch {
namespace {

constexpr size_t kMapped = LEAKBOUND_WATCH_RING_DATA + LEAKBOUND_WATCH_RING_BYTES;

int OpenDescriptors() {
  int n = 0;
  for ([[maybe_unused]] const auto &entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// A ring as the preload makes it (sealed unless told not to), mapped here too.
struct Ring {
  int fd = -1;
  leakbound_watch_ring *head = nullptr;
  explicit Ring(bool sealed = true) {
    fd = ::memfd_create("leakbound-channel-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(kMapped)), 0);
    if (sealed) {
      EXPECT_EQ(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
    }
    void *at = ::mmap(nullptr, kMapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    EXPECT_NE(at, MAP_FAILED);
    head = static_cast<leakbound_watch_ring *>(at);
    head->magic = LEAKBOUND_WATCH_MAGIC;
    head->version = LEAKBOUND_WATCH_VERSION;
    head->bytes = LEAKBOUND_WATCH_RING_BYTES;
  }
  ~Ring() {
    ::munmap(head, kMapped);
    if (fd >= 0) ::close(fd);
  }
  unsigned char *data() { return reinterpret_cast<unsigned char *>(head) + LEAKBOUND_WATCH_RING_DATA; }
  // One message at head, a skip part first when it would run past the data's end.
  void Put(const void *bytes, std::uint32_t size) {
    const std::uint64_t kData = LEAKBOUND_WATCH_RING_BYTES;
    const std::uint64_t need = sizeof(leakbound_watch_part) + ((size + 7u) & ~7u);
    std::uint64_t h = head->head;
    if (kData - (h & (kData - 1)) < need) {
      const leakbound_watch_part skip{LEAKBOUND_WATCH_RING_SKIP, 0};
      std::memcpy(data() + (h & (kData - 1)), &skip, sizeof skip);
      h += kData - (h & (kData - 1));
    }
    const leakbound_watch_part part{size, 0};
    std::memcpy(data() + (h & (kData - 1)), &part, sizeof part);
    std::memcpy(data() + (h & (kData - 1)) + sizeof part, bytes, size);
    __atomic_store_n(&head->head, h + need, __ATOMIC_RELEASE);
  }
};

leakbound_watch_record Record(leakbound_watch_kind kind, const std::string &text = "") {
  leakbound_watch_record r{};
  r.magic = LEAKBOUND_WATCH_MAGIC;
  r.version = LEAKBOUND_WATCH_VERSION;
  r.kind = static_cast<std::uint16_t>(kind);
  std::snprintf(r.text, sizeof r.text, "%s", text.c_str());
  return r;
}

// Sends `record` on `fd`, with the descriptor `passed` when it is >= 0.
void SendWith(int fd, const leakbound_watch_record &record, int passed) {
  iovec part{const_cast<leakbound_watch_record *>(&record), sizeof record};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (passed >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &passed, sizeof passed);
  }
  ASSERT_EQ(::sendmsg(fd, &message, 0), static_cast<ssize_t>(sizeof record));
}

struct Pair {
  int program = -1, watcher = -1;
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
    program = fds[0];
    watcher = fds[1];
  }
  ~Pair() {
    if (program >= 0) ::close(program);
    ::close(watcher);
  }
};

bool HasNote(const WatchRecording &r, const std::string &text) {
  for (const std::string &note : r.notes)
    if (note.find(text) != std::string::npos) return true;
  return false;
}

// A connection whose HELLO handed its ring over, read once.
class HandedOver : public ::testing::Test {
 protected:
  void SetUp() override {
    SendWith(pair.program, Record(LEAKBOUND_WATCH_HELLO), ring.fd);
    ASSERT_TRUE(detail::Drain(pair.watcher, reader, recording, false));
    ASSERT_TRUE(reader.attached());
  }
  Pair pair;
  Ring ring;
  detail::ChannelRing reader;
  WatchRecording recording;
};

TEST_F(HandedOver, ItsMessagesAreReadInOrderAcrossTheRingsEnd) {
  EXPECT_EQ(__atomic_load_n(&ring.head->read_by, __ATOMIC_ACQUIRE), 1u);
  // 1,000 notes in rounds of 100 (~38 KiB a round): the ring's 128 KiB go round three times.
  int written = 0;
  for (int round = 0; round < 10; ++round) {
    for (int k = 0; k < 100; ++k) {
      const leakbound_watch_record note = Record(LEAKBOUND_WATCH_NOTE, "note " + std::to_string(written++));
      ring.Put(&note, sizeof note);
    }
    EXPECT_TRUE(reader.Pending());
    ASSERT_TRUE(detail::Drain(pair.watcher, reader, recording, false));
    EXPECT_FALSE(reader.Pending());
    EXPECT_EQ(ring.head->tail, ring.head->head);
  }
  ASSERT_EQ(recording.notes.size(), 1000u);
  for (int k = 0; k < 1000; ++k) EXPECT_EQ(recording.notes[static_cast<size_t>(k)], "note " + std::to_string(k));
  EXPECT_EQ(recording.malformed_records, 0u);
  // The program ends: the connection's hang-up after the last messages, which are read first.
  const leakbound_watch_record last = Record(LEAKBOUND_WATCH_NOTE, "the last");
  ring.Put(&last, sizeof last);
  ::close(pair.program);
  pair.program = -1;
  EXPECT_FALSE(detail::Drain(pair.watcher, reader, recording, false));
  EXPECT_EQ(recording.notes.back(), "the last");
}

TEST(ChannelRing, UnsealedDescriptor_EndsTheConnectionSaysWhy_AndLeavesNothingOpen) {
  Pair pair;
  Ring ring(/*sealed=*/false);
  const int before = OpenDescriptors();
  {
    detail::ChannelRing reader;
    WatchRecording recording;
    SendWith(pair.program, Record(LEAKBOUND_WATCH_HELLO), ring.fd);
    EXPECT_FALSE(detail::Drain(pair.watcher, reader, recording, false));
    EXPECT_FALSE(reader.attached());
    EXPECT_TRUE(HasNote(recording, "not sealed against resizing")) << recording.notes.size();
    EXPECT_EQ(recording.malformed_records, 1u);
  }
  EXPECT_EQ(OpenDescriptors(), before);  // the received copy was closed
}

TEST_F(HandedOver, PartPastWhatWasWritten_IsReadUpToThereCountedAndEndsTheConnection) {
  const leakbound_watch_record good = Record(LEAKBOUND_WATCH_NOTE, "before");
  ring.Put(&good, sizeof good);
  const std::uint64_t at = ring.head->head;
  ring.Put(&good, sizeof good);
  const std::uint32_t huge = 0x7fffff00u;  // the second part's size, written over
  std::memcpy(ring.data() + (at & (LEAKBOUND_WATCH_RING_BYTES - 1)), &huge, sizeof huge);
  EXPECT_FALSE(detail::Drain(pair.watcher, reader, recording, false));
  ASSERT_EQ(recording.notes.size(), 2u);
  EXPECT_EQ(recording.notes[0], "before");
  EXPECT_TRUE(HasNote(recording, "ring was written over"));
  EXPECT_EQ(recording.malformed_records, 1u);
  // Read no more after that, and counted once.
  EXPECT_FALSE(reader.Read(recording));
  EXPECT_EQ(recording.malformed_records, 1u);
}

TEST(ChannelRing, DescriptorWithAnotherMessage_IsClosedAndCounted) {
  Pair pair;
  Ring ring;
  const int before = OpenDescriptors();
  detail::ChannelRing reader;
  WatchRecording recording;
  SendWith(pair.program, Record(LEAKBOUND_WATCH_NOTE, "a note"), ring.fd);
  EXPECT_TRUE(detail::Drain(pair.watcher, reader, recording, false));
  EXPECT_FALSE(reader.attached());
  EXPECT_EQ(recording.malformed_records, 1u);
  EXPECT_EQ(recording.notes, std::vector<std::string>{"a note"});
  EXPECT_EQ(OpenDescriptors(), before);
}

TEST(ChannelRing, Wake_IsNotTheConnectionsOwnTraffic) {
  Pair pair;
  detail::ChannelRing reader;
  WatchRecording recording;
  const leakbound_watch_bundle wake{LEAKBOUND_WATCH_MAGIC, LEAKBOUND_WATCH_VERSION,
                                    LEAKBOUND_WATCH_WAKE, 0, 0, 0};
  ASSERT_EQ(::send(pair.program, &wake, sizeof wake, 0), static_cast<ssize_t>(sizeof wake));
  EXPECT_TRUE(detail::Drain(pair.watcher, reader, recording, false));
  EXPECT_EQ(recording.malformed_records, 0u);
  EXPECT_EQ(recording.messages, 1u);
  EXPECT_EQ(reader.messages(), 1u);  // counted with the ring's, which watch's rests leave out
}

}  // namespace
}  // namespace leakbound::watch
