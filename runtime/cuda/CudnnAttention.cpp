//===- CudnnAttention.cpp - Packed attention on cuDNN 9's fused engines ---===//
//
// Why: on Hopper, cuDNN's fused attention engines (the ones PyTorch's SDPA
// picks on an H200) beat FlashAttention.cu's mma.sync kernels by about 1.5x
// forward and 1.3x backward at GPT-2's shapes (bench/attention). Where cuDNN
// is there, tess.packed_attention(_grad) runs on it; everywhere else, and for
// any shape cuDNN refuses, FlashAttention.cu's kernels still do the work.
//
// The graphs are built with the cuDNN frontend's graph API (a header-only
// library, found at configure time) and run on libcudnn.so.9, which is
// opened at run time, not linked: an executable built here starts on a
// machine without cuDNN and uses Tessera's own kernels there. The heads are
// addressed in place through strides, as the flash kernels do: q, k and v
// inside qkv [B, T, (Hq + 2 Hkv) D], y and dy [B, T, Hq D], dq, dk and dv at
// the same places inside dqkv. cuDNN's softmax statistics are the same
// quantity as the packed forward's lse (f32 [B, Hq, T], the natural-log
// log-sum-exp of the scaled scores), so either library's forward feeds
// either library's backward.
//
// A graph is built once per (device, shape, dtype, causal, window, scale,
// direction)
// and per thread: a cuDNN handle and the plans built on it are not shared
// between threads, and the thread ranks of one process call concurrently.
// The first call of a shape pays the build (tens of milliseconds); a
// training step's later calls only execute, and can be captured in a CUDA
// graph. The workspace comes from streamScratch, like every kernel's.
//
// tess.attention (separate q, k, v in [B, heads, T, D], grouped K/V heads
// read as they are: what Llama-family exports produce) runs on the same
// engines, contiguous head-major strides instead of packed ones, when it has
// no mask and no dropout; its sliding window (Mistral's) is cuDNN's diagonal
// band with that left bound, so the engines skip the tiles outside it. Its backward has no saved statistics (the op
// recomputes its forward by definition), so it runs cuDNN's forward once
// more into scratch for o and the statistics, then the backward: about a
// third of the backward's time again, far less than the flash kernels'
// deficit.
//
// Handles and graphs live until the process ends and are never destroyed:
// destroying them from static destructors would run after the CUDA runtime
// may already have shut down.
//
// TESSERA_CUDNN_ATTENTION=0 (or off) in the environment, or
// setCudnnAttentionEnabled(false), turns the path off, for comparisons.
//
// tessera_cuda_set_attention_autotune(1) (the driver's --attention-autotune
// on) builds every engine configuration cuDNN's heuristics A and B offer for
// a shape and times them on the shape's first eager call, keeping the
// fastest: the heuristic's first choice is a model's guess (on an H100 it
// ran the 1B Llama shape's backward with 64 x 64 tiles at about a third of
// the GEMMs' rate). Off by default, as the GEMMs' autotuning is: a timed
// choice can differ between runs, and so can its bits.
//
//===----------------------------------------------------------------------===//

#include "AttentionKernels.h"
#include "CandidateTiming.h"
#include "DataTypes.h"
#include "HostSupport.h"
#include "TensorAccess.h"
#include "tessera/runtime/cuda_kernels.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#ifdef TESSERA_HAVE_CUDNN_FRONTEND
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include <cudnn_frontend.h>
#include <dlfcn.h>

namespace cudnn_frontend {
// The frontend resolves every cuDNN call through this handle
// (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING); cudnnLibrary() opens it.
void *cudnn_dlhandle = nullptr;
} // namespace cudnn_frontend
#endif

namespace tessera::cuda {
namespace {

std::atomic<bool> enabled{[] {
  const char *value = std::getenv("TESSERA_CUDNN_ATTENTION");
  return !(value &&
           (std::strcmp(value, "0") == 0 || std::strcmp(value, "off") == 0));
}()};
std::atomic<int64_t> servedCalls{0};
/// tessera_cuda_set_deterministic.
std::atomic<bool> deterministic{false};
/// tessera_cuda_set_attention_autotune.
std::atomic<bool> autotune{false};

/// Says once per distinct message why a call went to Tessera's kernels
/// instead: a user comparing speeds should know which library ran.
void noteFallback(const std::string &why) {
  static std::mutex mutex;
  static std::map<std::string, bool> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.emplace(why, true).second)
    std::fprintf(stderr, "tessera: attention runs on Tessera's kernels: %s\n",
                 why.c_str());
}

#ifdef TESSERA_HAVE_CUDNN_FRONTEND

namespace fe = cudnn_frontend;

/// Opens libcudnn.so.9 once; false (with the reason said once) when it
/// cannot be opened or is older than 9.0.
bool cudnnLibrary() {
  static const bool loaded = [] {
    void *library = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char *error = dlerror();
      noteFallback(std::string("cannot open libcudnn.so.9 (") +
                   (error ? error : "unknown error") + ")");
      return false;
    }
    fe::cudnn_dlhandle = library;
    try {
      if (fe::detail::get_backend_version() < 90000) {
        noteFallback("cuDNN " +
                     std::to_string(fe::detail::get_backend_version()) +
                     " is older than 9.0");
        return false;
      }
    } catch (const std::exception &error) {
      noteFallback(std::string("cuDNN: ") + error.what());
      return false;
    }
    return true;
  }();
  return loaded;
}

// Tensor ids in the graphs' variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

constexpr int kWorkspaceSlot = 2200; // streamScratch slot of the workspace

/// One call's shape: the key of a built graph.
struct AttentionShape {
  int device, dtype;
  int64_t batch, seq, queryHeads, keyHeads, headDim;
  bool causal;
  /// A sliding window's length (0: none): cuDNN's diagonal band, left bound.
  int64_t window = 0;
  /// Gemma-2's logit softcap (0: none): cuDNN's Softcap score modifier.
  float softcap = 0;
  float scale;
  bool backward;
  bool packed = true; // qkv [B, T, (Hq + 2 Hkv) D]; else [B, heads, T, D] each
  /// A backward built with a fixed reduction order (tessera_cuda_set_
  /// deterministic): its own graph.
  bool deterministic = false;

  auto tie() const {
    return std::tie(device, dtype, batch, seq, queryHeads, keyHeads, headDim,
                    causal, window, softcap, scale, backward, packed,
                    deterministic);
  }
  bool operator<(const AttentionShape &other) const {
    return tie() < other.tie();
  }

  std::string describe() const {
    return std::string(backward ? "backward" : "forward") +
           " B=" + std::to_string(batch) + " T=" + std::to_string(seq) +
           " Hq=" + std::to_string(queryHeads) +
           " Hkv=" + std::to_string(keyHeads) + " D=" + std::to_string(headDim) +
           (window ? " window=" + std::to_string(window) : "") +
           (softcap != 0 ? " softcap=" + std::to_string(softcap) : "");
  }
};

struct Plan {
  std::unique_ptr<fe::graph::Graph> graph; // null: cuDNN refused the shape
  int64_t workspaceBytes = 0;
  /// The configuration executed: the heuristic's first, or the fastest
  /// timed.
  int64_t index = 0;
  /// Built with every configuration (autotune) and not yet timed: the
  /// workspace is the largest any of them needs until then.
  bool untimed = false;
};

/// The strides of a [B, heads, T, D] view: for a packed shape, of
/// token-major rows of `rowWidth` elements (heads addressed in place); else
/// of a contiguous head-major tensor.
std::vector<int64_t> headStrides(const AttentionShape &shape, int64_t heads,
                                 int64_t rowWidth) {
  if (shape.packed)
    return {shape.seq * rowWidth, shape.headDim, rowWidth, 1};
  return {heads * shape.seq * shape.headDim, shape.seq * shape.headDim,
          shape.headDim, 1};
}

std::shared_ptr<fe::graph::Tensor_attributes>
headTensor(fe::graph::Graph &graph, const char *name, int64_t uid,
           const AttentionShape &shape, int64_t heads, int64_t rowWidth) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim({shape.batch, heads, shape.seq,
                                    shape.headDim})
                          .set_stride(headStrides(shape, heads, rowWidth)));
}

void setHeadOutput(fe::graph::Tensor_attributes &tensor, int64_t uid,
                   const AttentionShape &shape, int64_t heads,
                   int64_t rowWidth) {
  tensor.set_output(true)
      .set_uid(uid)
      .set_dim({shape.batch, heads, shape.seq, shape.headDim})
      .set_stride(headStrides(shape, heads, rowWidth));
}

std::vector<int64_t> statsDims(const AttentionShape &shape) {
  return {shape.batch, shape.queryHeads, shape.seq, 1};
}
std::vector<int64_t> statsStrides(const AttentionShape &shape) {
  return {shape.queryHeads * shape.seq, shape.seq, 1, 1};
}

/// The softcap score modifier of one graph: the frontend's Softcap keeps its
/// forward's pre-tanh tensor for the backward's, so the two modifiers of a
/// backward graph share one, and one scalar, passed by value: a
/// compile-time constant (CUDNN_ATTR_TENSOR_CONSTANT_VALUE) needs cuDNN
/// 9.22, and an H100's 9.x refused every softcapped graph for it. The frontend
/// refuses a score modifier beside its own causal mask or window ("Attention
/// score mod enabled and hence other subgraphs are disabled"), so the
/// modifier builds them itself after the cap, as the SDPA node would after
/// its modifier (capping a masked -inf would make it -cap): Gemma-2's causal,
/// windowed, softcapped attention stays on the fused engines. Their
/// backward is the cap's alone: a masked score's probability, and so its
/// gradient, is zero.
struct SoftcapModifier {
  fe::graph::attn::score_modifiers::Softcap softcap;
  std::shared_ptr<fe::graph::Tensor_attributes> cap;
  float value;
  bool causal;
  /// A sliding window's length (0: none).
  int64_t window;

  std::shared_ptr<fe::graph::Tensor_attributes>
  forward(std::shared_ptr<fe::graph::Graph> graph,
          std::shared_ptr<fe::graph::Tensor_attributes> score) {
    cap = graph->tensor(value, fe::graph::ScalarType::RUNTIME_PARAM);
    auto capped = softcap.forward(graph, score, cap);
    if (!causal && window == 0)
      return capped;
    // The SDPA node's own masks, top-left aligned (square, unpadded
    // sequences): the right bound at the diagonal, the window's left bound.
    std::optional<int64_t> left;
    if (window)
      left = window;
    std::optional<int64_t> right;
    if (causal)
      right = 0;
    return fe::graph::attn::score_modifiers::sliding_window_mask(
        graph, capped, fe::DiagonalAlignment_t::TOP_LEFT, left, right,
        /*s_q=*/0, /*s_kv=*/0, /*s_q_ptr=*/nullptr, /*s_kv_ptr=*/nullptr);
  }
  std::shared_ptr<fe::graph::Tensor_attributes>
  backward(std::shared_ptr<fe::graph::Graph> graph,
           std::shared_ptr<fe::graph::Tensor_attributes> dscore) {
    return softcap.backward(graph, dscore, cap);
  }
};

/// The score modifier of `shape`'s softcapped graph, with its masks.
std::shared_ptr<SoftcapModifier> softcapModifier(const AttentionShape &shape) {
  auto modifier = std::make_shared<SoftcapModifier>();
  modifier->value = shape.softcap;
  modifier->causal = shape.causal;
  modifier->window = shape.window;
  return modifier;
}

/// The forward (o and, when `stats`, the statistics) or backward (dq, dk,
/// dv) graph of `shape`, or an error naming what cuDNN refused.
fe::error_t describeGraph(fe::graph::Graph &graph,
                          const AttentionShape &shape) {
  fe::DataType_t io = shape.dtype == TESSERA_BF16 ? fe::DataType_t::BFLOAT16
                                                  : fe::DataType_t::HALF;
  graph.set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  int64_t width = (shape.queryHeads + 2 * shape.keyHeads) * shape.headDim;
  int64_t outputWidth = shape.queryHeads * shape.headDim;
  auto q = headTensor(graph, "q", kQ, shape, shape.queryHeads, width);
  auto k = headTensor(graph, "k", kK, shape, shape.keyHeads, width);
  auto v = headTensor(graph, "v", kV, shape, shape.keyHeads, width);
  if (!shape.backward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("tess.attention")
                       .set_generate_stats(true)
                       .set_attn_scale(shape.scale);
    if (shape.softcap != 0) {
      auto modifier = softcapModifier(shape);
      options.set_score_mod([modifier](auto graph, auto score) {
        return modifier->forward(graph, score);
      });
    } else {
      options.set_causal_mask(shape.causal);
      if (shape.window)
        options.set_sliding_window_length(static_cast<int>(shape.window));
    }
    auto [o, stats] = graph.sdpa(q, k, v, options);
    setHeadOutput(*o, kO, shape, shape.queryHeads, outputWidth);
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(statsDims(shape))
        .set_stride(statsStrides(shape));
  } else {
    auto o = headTensor(graph, "o", kO, shape, shape.queryHeads, outputWidth);
    auto dO =
        headTensor(graph, "dO", kDO, shape, shape.queryHeads, outputWidth);
    auto stats = graph.tensor(fe::graph::Tensor_attributes()
                                  .set_name("stats")
                                  .set_uid(kStats)
                                  .set_data_type(fe::DataType_t::FLOAT)
                                  .set_dim(statsDims(shape))
                                  .set_stride(statsStrides(shape)));
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("tess.attention_grad")
                       .set_attn_scale(shape.scale);
    if (shape.deterministic)
      options.set_deterministic_algorithm(true);
    if (shape.softcap == 0) {
      options.set_causal_mask(shape.causal);
      if (shape.window)
        options.set_sliding_window_length(static_cast<int>(shape.window));
    } else {
      auto modifier = softcapModifier(shape);
      options
          .set_score_mod([modifier](auto graph, auto score) {
            return modifier->forward(graph, score);
          })
          .set_score_mod_bprop([modifier](auto graph, auto dscore) {
            return modifier->backward(graph, dscore);
          });
    }
    auto [dq, dk, dv] = graph.sdpa_backward(q, k, v, o, dO, stats, options);
    setHeadOutput(*dq, kDQ, shape, shape.queryHeads, width);
    setHeadOutput(*dk, kDK, shape, shape.keyHeads, width);
    setHeadOutput(*dv, kDV, shape, shape.keyHeads, width);
  }
  return {};
}

/// Throws KernelError naming the cuDNN call that did not succeed.
void requireCudnn(cudnnStatus_t status, const char *call) {
  if (status != CUDNN_STATUS_SUCCESS)
    cpu::fail(std::string(call) + " failed with status " +
              std::to_string(static_cast<int>(status)));
}

/// This thread's handle on the current device.
cudnnHandle_t threadHandle(int device) {
  thread_local std::map<int, cudnnHandle_t> handles;
  auto found = handles.find(device);
  if (found != handles.end())
    return found->second;
  cudnnHandle_t handle = nullptr;
  requireCudnn(fe::detail::create_handle(&handle), "cudnnCreate");
  handles.emplace(device, handle);
  return handle;
}

/// Builds `graph` (described) for `plan`: with autotune, every
/// configuration of heuristics A and B, left untimed when there is more
/// than one; otherwise, or where that build fails, the heuristic's first
/// (on a graph described afresh: a failed build leaves its graph spent).
fe::error_t buildGraph(std::unique_ptr<fe::graph::Graph> &graph,
                       const AttentionShape &shape, cudnnHandle_t handle,
                       Plan &plan) {
  fe::error_t status = describeGraph(*graph, shape);
  if (!status.is_good())
    return status;
  if (autotune.load(std::memory_order_relaxed)) {
    status = graph->build(handle, {fe::HeurMode_t::A, fe::HeurMode_t::B},
                          fe::BuildPlanPolicy_t::ALL);
    if (status.is_good()) {
      plan.untimed = graph->get_execution_plan_count() > 1;
      if (plan.untimed) {
        plan.workspaceBytes = graph->get_autotune_workspace_size();
        return status;
      }
      return graph->get_workspace_size(plan.workspaceBytes);
    }
    graph = std::make_unique<fe::graph::Graph>();
    status = describeGraph(*graph, shape);
    if (!status.is_good())
      return status;
  }
  status = graph->build(handle, {fe::HeurMode_t::A});
  if (status.is_good())
    status = graph->get_workspace_size(plan.workspaceBytes);
  return status;
}

/// The built plan of `shape` on this thread; a refused shape is remembered
/// (graph null) so that it is tried once.
Plan &planFor(const AttentionShape &shape, cudnnHandle_t handle) {
  thread_local std::map<AttentionShape, Plan> *plans =
      new std::map<AttentionShape, Plan>();
  auto found = plans->find(shape);
  if (found != plans->end())
    return found->second;
  Plan &plan = (*plans)[shape];
  auto graph = std::make_unique<fe::graph::Graph>();
  std::string refusal;
  try {
    fe::error_t status = buildGraph(graph, shape, handle, plan);
    if (status.is_good())
      plan.graph = std::move(graph);
    else
      refusal = status.get_message();
  } catch (const std::exception &error) {
    refusal = error.what();
  }
  if (!plan.graph)
    noteFallback("cuDNN refused " + shape.describe() + ": " + refusal);
  return plan;
}

/// Times every configuration of an untimed `plan` on this call's operands
/// and keeps the fastest (the heuristic's first on a tie), saying once
/// what it chose against the heuristic's first. The call is repeated
/// as is: its outputs are written afresh and its inputs only read. Inside
/// a stream capture it waits for an eager call (events cannot be waited on
/// there); the capture runs the heuristic's first.
void timeConfigurations(Plan &plan, const AttentionShape &shape,
                        cudnnHandle_t handle,
                        std::unordered_map<int64_t, void *> &pointers,
                        void *workspace, cudaStream_t stream) {
  std::optional<TimedCandidates> timing = timeCandidates(
      static_cast<size_t>(plan.graph->get_execution_plan_count()),
      [&](size_t i) {
        return plan.graph
            ->execute_plan_at_index(handle, pointers, workspace,
                                    static_cast<int64_t>(i))
            .is_good();
      },
      stream);
  if (!timing)
    return;
  plan.untimed = false;
  if (timing->timed == 0)
    cpu::fail("cuDNN attention " + shape.describe() +
              ": none of its configurations ran");
  plan.index = static_cast<int64_t>(timing->fastest);
  int64_t bytes = 0;
  if (plan.graph->get_workspace_size_plan_at_index(plan.index, bytes)
          .is_good())
    plan.workspaceBytes = bytes;
  std::string name;
  if (plan.graph->get_plan_name_at_index(plan.index, name).is_bad())
    name = "?";
  std::fprintf(stderr,
               "tessera: cuDNN attention %s: %lld of %lld configurations "
               "timed; the heuristic's first %.3f ms, the fastest (%s) "
               "%.3f ms\n",
               shape.describe().c_str(),
               static_cast<long long>(timing->timed),
               static_cast<long long>(plan.graph->get_execution_plan_count()),
               timing->firstMilliseconds, name.c_str(),
               timing->fastestMilliseconds);
}

/// Runs `shape`'s graph with `pointers`; false when cuDNN is off, absent
/// or refused the shape (nothing launched).
bool runGraph(AttentionShape shape,
              std::unordered_map<int64_t, void *> pointers,
              cudaStream_t stream) {
  shape.deterministic =
      shape.backward && deterministic.load(std::memory_order_relaxed);
  // A backward the flash kernels run instead adds dq atomically.
  auto refuse = [&] {
    if (shape.deterministic)
      noteFallback("deterministic mode: Tessera's flash attention backward "
                   "adds dq atomically, so a step with this shape is not "
                   "reproducible bit for bit");
    return false;
  };
  if (shape.dtype != TESSERA_BF16 && shape.dtype != TESSERA_F16)
    return refuse();
  if (!enabled.load(std::memory_order_relaxed) || !cudnnLibrary())
    return refuse();
  cudaCheck(cudaGetDevice(&shape.device));
  cudnnHandle_t handle = threadHandle(shape.device);
  Plan &plan = planFor(shape, handle);
  if (!plan.graph)
    return refuse();
  requireCudnn(fe::detail::set_stream(handle, stream), "cudnnSetStream");
  void *workspace =
      plan.workspaceBytes > 0
          ? streamScratch(stream, static_cast<size_t>(plan.workspaceBytes),
                          kWorkspaceSlot)
          : nullptr;
  if (plan.untimed)
    timeConfigurations(plan, shape, handle, pointers, workspace, stream);
  fe::error_t result =
      plan.graph->execute_plan_at_index(handle, pointers, workspace, plan.index);
  if (result.is_bad())
    cpu::fail("cuDNN attention " + shape.describe() +
              " failed: " + result.get_message());
  servedCalls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

/// cuDNN's engines load 16-byte vectors: every operand must be aligned.
bool aligned16(std::initializer_list<const void *> pointers) {
  for (const void *pointer : pointers)
    if (reinterpret_cast<uintptr_t>(pointer) % 16 != 0)
      return false;
  return true;
}

/// The call's shape, or false when its operands are not 16-byte aligned.
bool packedShape(const tessera_tensor &qkv, int64_t queryHeads,
                 int64_t keyHeads, int64_t outputWidth, bool causal,
                 double scale, bool backward,
                 std::initializer_list<const void *> pointers,
                 AttentionShape &shape) {
  if (!aligned16(pointers))
    return false;
  shape = AttentionShape{};
  shape.dtype = qkv.dtype;
  shape.batch = qkv.shape[0];
  shape.seq = qkv.shape[1];
  shape.queryHeads = queryHeads;
  shape.keyHeads = keyHeads;
  shape.headDim = outputWidth / queryHeads;
  shape.causal = causal;
  shape.scale = static_cast<float>(scale);
  shape.backward = backward;
  // Row strides must keep every head 16-byte aligned: head dims of 8s.
  return shape.headDim % 8 == 0;
}

constexpr int kOutputSlot = 2203; // the backward's recomputed o
constexpr int kStatsSlot = 2204;  // and its statistics

/// The shape of a tess.attention call, or false where cuDNN's engines do
/// not apply: another sequence length for keys than queries, a V head dim
/// other than Q's, head dims not a multiple of 8, or unaligned data.
bool headMajorShape(const tessera_tensor &q, const tessera_tensor &k,
                    const tessera_tensor &v, bool causal, int64_t window,
                    double softcap, double scale, bool backward,
                    std::initializer_list<const void *> pointers,
                    AttentionShape &shape) {
  if (q.rank != 4 || k.rank != 4 || v.rank != 4)
    return false;
  if (k.shape[2] != q.shape[2] || v.shape[3] != q.shape[3] ||
      k.dtype != q.dtype || v.dtype != q.dtype)
    return false;
  if (!aligned16(pointers))
    return false;
  shape = AttentionShape{};
  shape.dtype = q.dtype;
  shape.batch = q.shape[0];
  shape.queryHeads = q.shape[1];
  shape.seq = q.shape[2];
  shape.headDim = q.shape[3];
  shape.keyHeads = k.shape[1];
  shape.causal = causal;
  shape.window = window;
  shape.softcap = static_cast<float>(softcap);
  shape.scale = static_cast<float>(scale);
  shape.backward = backward;
  shape.packed = false;
  // A window past the sequence is no window; one beyond int is refused.
  if (window >= shape.seq)
    shape.window = 0;
  return shape.headDim % 8 == 0 && shape.window <= INT32_MAX;
}
#endif // TESSERA_HAVE_CUDNN_FRONTEND

} // namespace

bool cudnnAttentionForward(const tessera_tensor &q, const tessera_tensor &k,
                           const tessera_tensor &v, tessera_tensor &y,
                           float *lse, bool causal, int64_t window,
                           double softcap, double scale, cudaStream_t stream) {
#ifdef TESSERA_HAVE_CUDNN_FRONTEND
  AttentionShape shape;
  if (!headMajorShape(q, k, v, causal, window, softcap, scale, false,
                      {q.data, k.data, v.data, y.data, lse}, shape))
    return false;
  // The graph always writes the statistics; without a caller's buffer they
  // go to scratch.
  void *stats = lse ? static_cast<void *>(lse)
                    : streamScratch(stream,
                                    static_cast<size_t>(shape.batch) *
                                        shape.queryHeads * shape.seq *
                                        sizeof(float),
                                    kStatsSlot);
  return runGraph(shape,
                  {{kQ, q.data}, {kK, k.data}, {kV, v.data}, {kO, y.data},
                   {kStats, stats}},
                  stream);
#else
  (void)q, (void)k, (void)v, (void)y, (void)lse, (void)causal, (void)window,
      (void)softcap, (void)scale, (void)stream;
  return false;
#endif
}

bool cudnnAttentionBackward(const tessera_tensor &q, const tessera_tensor &k,
                            const tessera_tensor &v, const tessera_tensor &dy,
                            tessera_tensor &dq, tessera_tensor &dk,
                            tessera_tensor &dv, bool causal, int64_t window,
                            double softcap, double scale,
                            cudaStream_t stream) {
#ifdef TESSERA_HAVE_CUDNN_FRONTEND
  AttentionShape forward;
  if (!headMajorShape(q, k, v, causal, window, softcap, scale, false,
                      {q.data, k.data, v.data}, forward) ||
      !aligned16({dy.data, dq.data, dk.data, dv.data}))
    return false;
  AttentionShape backward = forward;
  backward.backward = true;
  size_t outputBytes = static_cast<size_t>(cpu::elementCount(dy)) *
                       cpu::dtypeSize(dy.dtype);
  size_t statsBytes = static_cast<size_t>(forward.batch) *
                      forward.queryHeads * forward.seq * sizeof(float);
  void *output = streamScratch(stream, outputBytes, kOutputSlot);
  void *stats = streamScratch(stream, statsBytes, kStatsSlot);
  if (!runGraph(forward,
                {{kQ, q.data}, {kK, k.data}, {kV, v.data}, {kO, output},
                 {kStats, stats}},
                stream))
    return false;
  return runGraph(backward,
                  {{kQ, q.data},
                   {kK, k.data},
                   {kV, v.data},
                   {kO, output},
                   {kStats, stats},
                   {kDO, dy.data},
                   {kDQ, dq.data},
                   {kDK, dk.data},
                   {kDV, dv.data}},
                  stream);
#else
  (void)q, (void)k, (void)v, (void)dy, (void)dq, (void)dk, (void)dv,
      (void)causal, (void)window, (void)softcap, (void)scale, (void)stream;
  return false;
#endif
}


void setCudnnAttentionEnabled(bool on) { enabled.store(on); }

bool cudnnAttentionAvailable() {
#ifdef TESSERA_HAVE_CUDNN_FRONTEND
  return cudnnLibrary();
#else
  return false;
#endif
}

int64_t cudnnAttentionCalls() { return servedCalls.load(); }

bool cudnnPackedAttentionForward(const tessera_tensor &qkv, int64_t queryHeads,
                                 int64_t keyHeads, tessera_tensor &y,
                                 tessera_tensor &lse, bool causal, double scale,
                                 cudaStream_t stream) {
#ifdef TESSERA_HAVE_CUDNN_FRONTEND
  AttentionShape shape;
  if (!packedShape(qkv, queryHeads, keyHeads, y.shape[2], causal, scale, false,
                   {qkv.data, y.data, lse.data}, shape))
    return false;
  char *base = static_cast<char *>(qkv.data);
  size_t head = static_cast<size_t>(shape.headDim) * cpu::dtypeSize(qkv.dtype);
  return runGraph(shape,
                  {{kQ, base},
                   {kK, base + queryHeads * head},
                   {kV, base + (queryHeads + keyHeads) * head},
                   {kO, y.data},
                   {kStats, lse.data}},
                  stream);
#else
  (void)qkv, (void)queryHeads, (void)keyHeads, (void)y, (void)lse, (void)causal,
      (void)scale, (void)stream;
  return false;
#endif
}

bool cudnnPackedAttentionBackward(const tessera_tensor &qkv, int64_t queryHeads,
                                  int64_t keyHeads, const tessera_tensor &y,
                                  const tessera_tensor &lse,
                                  const tessera_tensor &dy,
                                  tessera_tensor &dqkv, bool causal,
                                  double scale, cudaStream_t stream) {
#ifdef TESSERA_HAVE_CUDNN_FRONTEND
  AttentionShape shape;
  if (!packedShape(qkv, queryHeads, keyHeads, y.shape[2], causal, scale, true,
                   {qkv.data, y.data, lse.data, dy.data, dqkv.data}, shape))
    return false;
  char *base = static_cast<char *>(qkv.data);
  char *gradient = static_cast<char *>(dqkv.data);
  size_t head = static_cast<size_t>(shape.headDim) * cpu::dtypeSize(qkv.dtype);
  size_t kAt = queryHeads * head, vAt = (queryHeads + keyHeads) * head;
  return runGraph(shape,
                  {{kQ, base},
                   {kK, base + kAt},
                   {kV, base + vAt},
                   {kO, y.data},
                   {kStats, lse.data},
                   {kDO, dy.data},
                   {kDQ, gradient},
                   {kDK, gradient + kAt},
                   {kDV, gradient + vAt}},
                  stream);
#else
  (void)qkv, (void)queryHeads, (void)keyHeads, (void)y, (void)lse, (void)dy,
      (void)dqkv, (void)causal, (void)scale, (void)stream;
  return false;
#endif
}

} // namespace tessera::cuda

extern "C" void tessera_cuda_set_deterministic(int32_t on) {
  tessera::cuda::deterministic.store(on != 0);
}

extern "C" void tessera_cuda_set_attention_autotune(int32_t enabled) {
  tessera::cuda::autotune.store(enabled != 0);
}
