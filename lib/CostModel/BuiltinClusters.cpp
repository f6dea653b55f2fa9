//===- BuiltinClusters.cpp - the clusters --cluster knows by name ---------===//
//
// Written in the cluster file format (README.md) and read by the same
// parser, so a built-in is also an example of the format to start a file
// from. Every constant says where it comes from in its "comment": a
// measurement (shared/docs/ANCHORS.md, 2 x H200 NV18, 2026-11-29) or a
// datasheet value that bench/measure_cluster.py should replace.
//
//===----------------------------------------------------------------------===//

#include "tessera/CostModel/Cluster.h"

namespace tessera::cost {
namespace {

// ANCHORS.md's NCCL all-reduce bus bandwidths between 2 H200s by message size,
// the measured table of every NVLink collective the built-ins list (spliced
// into their JSON text).
#define H200_NVLINK_BUS_BANDWIDTHS                                             \
  "[{\"bytes\": 1048576, \"bus_bandwidth\": 1.6e10},"                          \
  " {\"bytes\": 16777216, \"bus_bandwidth\": 2.06e11},"                        \
  " {\"bytes\": 268435456, \"bus_bandwidth\": 3.01e11},"                       \
  " {\"bytes\": 1073741824, \"bus_bandwidth\": 3.26e11}]"

// One node of 8 NVLink-connected H200s. The all-reduce table is ANCHORS.md's
// NCCL bus bandwidth between 2 GPUs; latency and bandwidth are the fit of
// bench/measure_cluster.py (least squares on relative time error) to those
// four points: 51 us and 350 GB/s. Memory is 143,771 MiB as nvidia-smi
// reports ("141 GB").
constexpr const char *h200Json = R"json({
  "name": "h200",
  "description": "one node of 8 NVLink-connected NVIDIA H200 (141 GB)",
  "nodes": 1,
  "devices_per_node": 8,
  "host": {
    "comment": "measured by an --offload optimizer run on the lent GPU machine's host (16 cores, pinned memory; GPT-2 124M, 2026-12-05, bench/RESULTS.md)",
    "adamw_elements_per_second": 4.48e9,
    "device_to_host_bandwidth": 5.45e10,
    "host_to_device_bandwidth": 5.11e10
  },
  "device": {
    "name": "NVIDIA H200",
    "comment": "bf16 GEMM 790 TFLOP/s measured (PyTorch, 8192^3, ANCHORS.md); fp16 assumed equal; fp32 (no TF32) 90% of the 67 TFLOP/s datasheet; peaks are the datasheet's dense rates; HBM 4.8 TB/s datasheet; attention: cuDNN 9's fused kernels (the CUDA backend's default) in a traced GPT-2 124M step (bench/profile, 2026-12-03: 12 packed forwards 1.03 ms, backwards 3.36 ms, 2,164 GFLOP as OpCost counts them; Tessera's own flash kernels: 7.44 ms, 2.91e14), fp16 assumed equal",
    "memory_bytes": 150754820096,
    "memory_bandwidth": 4.8e12,
    "flops": {"bf16": 7.9e14, "fp16": 7.9e14, "fp32": 6.0e13},
    "peak_flops": {"bf16": 9.89e14, "fp16": 9.89e14, "fp32": 6.7e13},
    "attention_flops": {"bf16": 4.93e14, "fp16": 4.93e14},
    "vector_flops": 6.7e13
  },
  "links": {
    "intra_node": {
      "name": "NVLink 4 (NV18)",
      "comment": "only all_reduce is measured: reduce_scatter and all_gather assume its bus bandwidths, all_to_all and send_recv its fit",
      "latency": 5.1e-5,
      "bandwidth": 3.5e11,
      "collectives": {
        "all_reduce": {
          "latency": 5.1e-5,
          "bandwidth": 3.5e11,
          "measured_group_size": 2,
          "measured": )json" H200_NVLINK_BUS_BANDWIDTHS R"json(
        },
        "reduce_scatter": {
          "comment": "assumed: all_reduce's bus bandwidths (NCCL's ring all-reduce is a reduce-scatter then an all-gather at one bus bandwidth)",
          "latency": 5.1e-5,
          "bandwidth": 3.5e11,
          "measured": )json" H200_NVLINK_BUS_BANDWIDTHS R"json(
        },
        "all_gather": {
          "comment": "assumed: as reduce_scatter",
          "latency": 5.1e-5,
          "bandwidth": 3.5e11,
          "measured": )json" H200_NVLINK_BUS_BANDWIDTHS R"json(
        }
      }
    }
  }
})json";

// Four such nodes joined by one 400 Gb/s NDR InfiniBand adapter per GPU
// (the HGX H200 reference design). The inter-node constants are assumed
// from the link rate (50 GB/s a GPU, 80% reached), not measured.
constexpr const char *h200MultinodeJson = R"json({
  "name": "h200-multinode",
  "description": "4 nodes of 8 NVLink-connected NVIDIA H200, 8 x 400 Gb/s InfiniBand per node",
  "nodes": 4,
  "devices_per_node": 8,
  "device": {
    "name": "NVIDIA H200",
    "comment": "as the built-in h200",
    "memory_bytes": 150754820096,
    "memory_bandwidth": 4.8e12,
    "flops": {"bf16": 7.9e14, "fp16": 7.9e14, "fp32": 6.0e13},
    "peak_flops": {"bf16": 9.89e14, "fp16": 9.89e14, "fp32": 6.7e13},
    "vector_flops": 6.7e13
  },
  "links": {
    "intra_node": {
      "name": "NVLink 4 (NV18)",
      "comment": "as the built-in h200",
      "latency": 5.1e-5,
      "bandwidth": 3.5e11,
      "collectives": {
        "all_reduce": {
          "latency": 5.1e-5,
          "bandwidth": 3.5e11,
          "measured_group_size": 2,
          "measured": )json" H200_NVLINK_BUS_BANDWIDTHS R"json(
        },
        "reduce_scatter": {
          "comment": "assumed: all_reduce's bus bandwidths (NCCL's ring all-reduce is a reduce-scatter then an all-gather at one bus bandwidth)",
          "latency": 5.1e-5,
          "bandwidth": 3.5e11,
          "measured": )json" H200_NVLINK_BUS_BANDWIDTHS R"json(
        },
        "all_gather": {
          "comment": "assumed: as reduce_scatter",
          "latency": 5.1e-5,
          "bandwidth": 3.5e11,
          "measured": )json" H200_NVLINK_BUS_BANDWIDTHS R"json(
        }
      }
    },
    "inter_node": {
      "name": "InfiniBand NDR 400 Gb/s, one adapter per GPU",
      "comment": "assumed: 80% of 50 GB/s per GPU, 30 us latency; not measured",
      "latency": 3.0e-5,
      "bandwidth": 4.0e10
    }
  }
})json";

// Megatron-LM's GPT-3 175B run (Narayanan et al., SC'21): 128 DGX A100
// nodes, 8 x A100 80 GB on NVLink 3 / NVSwitch, 8 x 200 Gb/s HDR
// InfiniBand per node. Datasheet rates: 312 TFLOP/s bf16 dense, 2.039 TB/s
// HBM2e, 81,920 MiB. Link constants are typical NCCL figures for that
// system, not measured here.
constexpr const char *a100MegatronJson = R"json({
  "name": "a100-megatron",
  "description": "128 nodes of 8 NVIDIA A100 80GB (NVLink 3), 8 x 200 Gb/s HDR InfiniBand per node",
  "nodes": 128,
  "devices_per_node": 8,
  "device": {
    "name": "NVIDIA A100 80GB SXM",
    "comment": "datasheet: bf16/fp16 312 TFLOP/s dense, fp32 19.5 TFLOP/s (no TF32), HBM2e 2.039 TB/s",
    "memory_bytes": 85899345920,
    "memory_bandwidth": 2.039e12,
    "flops": {"bf16": 3.12e14, "fp16": 3.12e14, "fp32": 1.95e13},
    "peak_flops": {"bf16": 3.12e14, "fp16": 3.12e14, "fp32": 1.95e13},
    "vector_flops": 1.95e13
  },
  "links": {
    "intra_node": {
      "name": "NVLink 3 (NVSwitch)",
      "comment": "assumed: NCCL bus bandwidth about 230 GB/s on 8 GPUs of a DGX A100, 10 us latency",
      "latency": 1.0e-5,
      "bandwidth": 2.3e11
    },
    "inter_node": {
      "name": "InfiniBand HDR 200 Gb/s, one adapter per GPU",
      "comment": "assumed: 90% of 25 GB/s per GPU, 20 us latency",
      "latency": 2.0e-5,
      "bandwidth": 2.25e10
    }
  }
})json";

struct Builtin {
  llvm::StringRef name;
  const char *json;
};

const Builtin builtins[] = {
    {"h200", h200Json},
    {"h200-multinode", h200MultinodeJson},
    {"a100-megatron", a100MegatronJson},
};

} // namespace

llvm::ArrayRef<llvm::StringRef> builtinClusterNames() {
  static const llvm::StringRef names[] = {"h200", "h200-multinode",
                                          "a100-megatron"};
  return names;
}

std::optional<llvm::StringRef> builtinClusterJson(llvm::StringRef name) {
  for (const Builtin &builtin : builtins)
    if (builtin.name == name)
      return llvm::StringRef(builtin.json);
  return std::nullopt;
}

} // namespace tessera::cost
