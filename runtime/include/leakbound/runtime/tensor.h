// Shapes, tensor handles and host tensors. A TensorRef is a handle, never a buffer: it names a
// node of one tape generation of one session, and is checked on every use.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace leakbound::runtime {

inline constexpr int kMaxRank = 4;

class Shape {
 public:
  Shape() = default;
  // Throws ShapeError on a negative dimension, rank > kMaxRank, or an element count that
  // overflows (as floats, in bytes).
  Shape(std::initializer_list<std::int64_t> dims);
  static Shape FromVector(const std::vector<std::int64_t>& dims);

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
  std::int64_t numel() const;
  std::int64_t rows() const;  // product of all but the last dim (1 for rank 0)
  std::int64_t cols() const;  // last dim (1 for rank 0)
  std::string ToString() const;
  bool operator==(const Shape& other) const;

 private:
  void Validate() const;
  std::array<std::int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

enum class DType : std::uint8_t { kFloat32, kInt32 };

struct TensorRef {
  std::uint64_t session_id = 0;
  std::uint64_t generation = 0;  // 0 never names a live generation
  std::uint32_t index = 0;
};

// Data on the host, the only form in which results leave a WithForward scope.
struct HostTensor {
  Shape shape;
  std::vector<float> data;
};

}  // namespace leakbound::runtime
