// Optimizers. Apply() is all-or-nothing per call: phase 1 allocates any missing state for every
// parameter that has a gradient of this step (may throw OutOfMemoryError; no parameter has been
// touched yet); phase 2 updates the parameters in place and cannot fail. So an interrupted
// optimizer leaves every parameter bitwise unchanged, and a completed one updated them all.
// State is allocated once (lazily, at the first step) and persists with the parameter.
#pragma once

#include <vector>

#include "leakbound/runtime/param.h"
#include "leakbound/runtime/tape.h"

namespace leakbound::runtime {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Param*> params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;
  // Updates every parameter whose gradient was written by this tape's Backward.
  // Returns the number of parameters updated.
  int Apply(Tape& tape);
  const std::vector<Param*>& params() const { return params_; }

 protected:
  virtual int StateSlots() const = 0;
  virtual void Update(Tape& tape, Param& param) noexcept = 0;
  static void CountStep(Param& param) { ++param.optimizer_steps_; }

 private:
  std::vector<Param*> params_;
};

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.9f;
  float weight_decay = 0.0f;
};

class Sgd final : public Optimizer {
 public:
  Sgd(std::vector<Param*> params, SgdOptions options) : Optimizer(std::move(params)), o_(options) {}

 private:
  int StateSlots() const override { return 1; }
  void Update(Tape& tape, Param& param) noexcept override;
  SgdOptions o_;
};

struct AdamOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
};

class Adam final : public Optimizer {
 public:
  Adam(std::vector<Param*> params, AdamOptions options)
      : Optimizer(std::move(params)), o_(options) {}

 private:
  int StateSlots() const override { return 2; }
  void Update(Tape& tape, Param& param) noexcept override;
  AdamOptions o_;
};

}  // namespace leakbound::runtime
