// Shape validation and formatting.
#include "leakbound/runtime/tensor.h"

#include <limits>
#include <sstream>

#include "leakbound/runtime/errors.h"

namespace leakbound::runtime {

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  if (dims.size() > static_cast<std::size_t>(kMaxRank)) {
    throw ShapeError("shape of rank " + std::to_string(dims.size()) + " exceeds the maximum rank " +
                     std::to_string(kMaxRank));
  }
  for (std::int64_t d : dims) dims_[static_cast<std::size_t>(rank_++)] = d;
  Validate();
}

Shape Shape::FromVector(const std::vector<std::int64_t>& dims) {
  if (dims.size() > static_cast<std::size_t>(kMaxRank)) {
    throw ShapeError("shape of rank " + std::to_string(dims.size()) + " exceeds the maximum rank " +
                     std::to_string(kMaxRank));
  }
  Shape s;
  for (std::int64_t d : dims) s.dims_[static_cast<std::size_t>(s.rank_++)] = d;
  s.Validate();
  return s;
}

void Shape::Validate() const {
  constexpr std::int64_t kMaxElements = std::numeric_limits<std::int64_t>::max() / 8;
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    const std::int64_t d = dims_[static_cast<std::size_t>(i)];
    if (d < 0) {
      throw ShapeError("shape " + ToString() + " has a negative dimension at axis " +
                       std::to_string(i));
    }
    if (d != 0 && n > kMaxElements / d) {
      throw ShapeError("shape " + ToString() + " has more elements than can be addressed; " +
                       "use smaller dimensions");
    }
    n *= d;
  }
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<std::size_t>(i)];
  return n;
}

std::int64_t Shape::cols() const { return rank_ == 0 ? 1 : dims_[static_cast<std::size_t>(rank_ - 1)]; }

std::int64_t Shape::rows() const {
  std::int64_t n = 1;
  for (int i = 0; i + 1 < rank_; ++i) n *= dims_[static_cast<std::size_t>(i)];
  return n;
}

std::string Shape::ToString() const {
  std::ostringstream out;
  out << '[';
  for (int i = 0; i < rank_; ++i) out << (i ? ", " : "") << dims_[static_cast<std::size_t>(i)];
  out << ']';
  return out.str();
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<std::size_t>(i)] != other.dims_[static_cast<std::size_t>(i)]) return false;
  return true;
}

}  // namespace leakbound::runtime
