// Tool windows opened from the menus: the KV calculator and the engine's tier budgets.
#pragma once

#include <string>

#include <cstdint>

#include "ui/views.h"

namespace kvc::ui {

inline constexpr const char* k_kv_calculator_window = "KV calculator";
inline constexpr const char* k_engine_window = "Engine";

// KV bytes for the loaded model's shape (or one typed in), with what-ifs (ui/kv_calculator.h).
struct KvCalculatorView {
  bool open = false;
  void draw(ViewContext& ctx);

 private:
  int64_t seeded_from_ = -1;  // snapshot model identity the inputs were seeded from
  int n_layer_ = 22, n_head_ = 32, n_kv_head_ = 4, head_dim_ = 64, n_ctx_ = 2048;
  int n_recurrent_ = 0;       // the loaded model's recurrent (conv) layers, editable when it has some
  int64_t state_floats_ = 0;  // floats of one recurrent layer's state
  int group_ = 32;
  int kv_heads_choice_ = 0;  // 0: the model's, 1: MQA, 2: GQA with gqa_heads_
  int gqa_heads_ = 8;
  float local_fraction_ = 0;
  int window_tokens_ = 4096;
  int share_every_ = 1;
};

// The T0 / T1 byte budgets (applied by recreating the runner) and the in-process restart.
struct EngineView {
  bool open = false;
  void draw(ViewContext& ctx);

 private:
  void draw_serving(ViewContext& ctx);
  void draw_kv_format(ViewContext& ctx);

  bool seeded_ = false;
  int t0_kib_ = 0, t1_kib_ = 0, t2_mib_ = 0, ctx_mib_ = 0;
  std::string serve_port_;  // the port field's text
  int shown_port_ = -1;     // the ServeState port it was last set from
  std::string port_error_;  // it is not a port
};

}  // namespace kvc::ui
