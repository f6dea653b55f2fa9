//===- Embedding.cpp - Row lookups (embedding, gather) and their grads ----===//
//
// Both ops copy whole slices, so the forward is a memcpy per index and works
// for any element type. An index comes from user data (token ids), so every
// one is range-checked and a bad one is reported with its value, its
// position in the index tensor and the valid range: the first thing someone
// with a broken tokenizer needs to see.
//
// The gradients scatter-add: several positions may hold the same id (the
// same token twice in a batch), so each row of dtable/dx sums every dy slice
// that read it. The sums are f32 in a scratch buffer, rounded once into
// the gradient's storage; the gradient is overwritten, not added to.
//
// gather views x as [outer, length, inner] around `axis`; index n of the
// flattened indices reads x[o, idx[n], :] into y[o, n, :].
//
//===----------------------------------------------------------------------===//

#include "DataTypes.h"
#include "Errors.h"
#include "TensorAccess.h"

#include <cstring>

using namespace tessera::cpu;

namespace {

/// The row of a table block holding rows [first, first + rows) of a table
/// of `total` that embedding position `position` reads, checked against
/// the whole table; -1 for an id of another block.
int64_t embeddingRow(const tessera_tensor &ids, int64_t position,
                     int64_t first, int64_t rows, int64_t total) {
  int64_t id = loadIndexValue(ids, position);
  if (id < 0 || id >= total)
    fail("token id " + std::to_string(id) + " at position " +
         formatPosition(shapeOf(ids), position) + " of ids " +
         formatShape(shapeOf(ids)) + " is outside the table's rows [0, " +
         std::to_string(total) + ")");
  return id >= first && id < first + rows ? id - first : -1;
}

/// Index `position` of `indices`, negative values counting back from
/// `length`, checked to lie in [-length, length).
int64_t gatherIndex(const tessera_tensor &indices, int64_t position,
                    int64_t length) {
  int64_t index = loadIndexValue(indices, position);
  if (index < -length || index >= length)
    fail("index " + std::to_string(index) + " at position " +
         formatPosition(shapeOf(indices), position) + " of indices " +
         formatShape(shapeOf(indices)) + " is outside [" +
         std::to_string(-length) + ", " + std::to_string(length) + ")");
  return index < 0 ? index + length : index;
}

struct GatherLayout {
  int64_t outer;
  int64_t length;
  int64_t inner;
  int64_t indexCount;
};

/// Checks y = x[..., indices, ...] at `axis` and returns the layout.
GatherLayout gatherLayout(const tessera_tensor &x,
                          const tessera_tensor &indices,
                          const tessera_tensor &y, int64_t axis,
                          const char *yName) {
  requireIndexType(indices, "indices");
  requireAxis(axis, x.rank, "axis");
  Shape xShape = shapeOf(x);
  Shape expected(xShape.begin(), xShape.begin() + axis);
  for (int32_t dim = 0; dim < indices.rank; ++dim)
    expected.push_back(indices.shape[dim]);
  expected.insert(expected.end(), xShape.begin() + axis + 1, xShape.end());
  requireShape(y, expected, yName);
  return {product(xShape, 0, static_cast<size_t>(axis)), xShape[axis],
          product(xShape, static_cast<size_t>(axis) + 1, xShape.size()),
          elementCount(indices)};
}

} // namespace

extern "C" int tessera_cpu_embedding(const tessera_tensor *table,
                                     const tessera_tensor *ids,
                                     tessera_tensor *y) {
  return tessera_cpu_embedding_rows(table, ids, y, 0,
                                    table ? table->shape[0] : 0);
}

extern "C" int tessera_cpu_embedding_rows(const tessera_tensor *table,
                                          const tessera_tensor *ids,
                                          tessera_tensor *y, int64_t first_row,
                                          int64_t total_rows) {
  return runKernel("tessera_cpu_embedding", [&] {
    const tessera_tensor &weights = requireTensor(table, "table");
    const tessera_tensor &tokens = requireTensor(ids, "ids");
    tessera_tensor &output = requireTensor(y, "y");
    requireIndexType(tokens, "ids");
    if (weights.rank != 2)
      fail("table must have rank 2, got " + formatShape(shapeOf(weights)));
    requireSameDtype(weights, "table", output, "y");
    int64_t rows = weights.shape[0], width = weights.shape[1];
    Shape expected = shapeOf(tokens);
    expected.push_back(width);
    requireShape(output, expected, "y");
    requireRowBlock(first_row, rows, total_rows);
    size_t rowBytes = static_cast<size_t>(width) * dtypeSize(weights.dtype);
    int64_t count = elementCount(tokens);
    for (int64_t position = 0; position < count; ++position) {
      int64_t row = embeddingRow(tokens, position, first_row, rows, total_rows);
      char *destination = static_cast<char *>(output.data) + position * rowBytes;
      if (row < 0)
        std::memset(destination, 0, rowBytes); // +0.0 in every float type
      else
        std::memcpy(destination,
                    static_cast<const char *>(weights.data) + row * rowBytes,
                    rowBytes);
    }
  });
}

extern "C" int tessera_cpu_embedding_grad(const tessera_tensor *ids,
                                          const tessera_tensor *dy,
                                          tessera_tensor *dtable) {
  return tessera_cpu_embedding_grad_rows(ids, dy, dtable, 0,
                                         dtable ? dtable->shape[0] : 0);
}

extern "C" int tessera_cpu_embedding_grad_rows(const tessera_tensor *ids,
                                               const tessera_tensor *dy,
                                               tessera_tensor *dtable,
                                               int64_t first_row,
                                               int64_t total_rows) {
  return runKernel("tessera_cpu_embedding_grad", [&] {
    const tessera_tensor &tokens = requireTensor(ids, "ids");
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &tableGradient = requireTensor(dtable, "dtable");
    requireIndexType(tokens, "ids");
    if (tableGradient.rank != 2)
      fail("dtable must have rank 2, got " +
           formatShape(shapeOf(tableGradient)));
    int64_t rows = tableGradient.shape[0], width = tableGradient.shape[1];
    Shape expected = shapeOf(tokens);
    expected.push_back(width);
    requireShape(upstream, expected, "dy");
    requireRowBlock(first_row, rows, total_rows);
    FloatInput upstreamValues(upstream, "dy");
    FloatOutput result(tableGradient, "dtable");
    result.fill(0.0f);
    int64_t count = elementCount(tokens);
    for (int64_t position = 0; position < count; ++position) {
      int64_t row = embeddingRow(tokens, position, first_row, rows, total_rows);
      if (row < 0)
        continue;
      const float *dyRow = upstreamValues.data() + position * width;
      float *dtableRow = result.data() + row * width;
      for (int64_t j = 0; j < width; ++j)
        dtableRow[j] += dyRow[j];
    }
    result.commit();
  });
}

extern "C" int tessera_cpu_gather(const tessera_tensor *x,
                                  const tessera_tensor *indices,
                                  tessera_tensor *y, int64_t axis) {
  return runKernel("tessera_cpu_gather", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    const tessera_tensor &positions = requireTensor(indices, "indices");
    tessera_tensor &output = requireTensor(y, "y");
    requireSameDtype(input, "x", output, "y");
    GatherLayout layout = gatherLayout(input, positions, output, axis, "y");
    size_t sliceBytes =
        static_cast<size_t>(layout.inner) * dtypeSize(input.dtype);
    for (int64_t n = 0; n < layout.indexCount; ++n) {
      int64_t index = gatherIndex(positions, n, layout.length);
      for (int64_t o = 0; o < layout.outer; ++o)
        std::memcpy(static_cast<char *>(output.data) +
                        (o * layout.indexCount + n) * sliceBytes,
                    static_cast<const char *>(input.data) +
                        (o * layout.length + index) * sliceBytes,
                    sliceBytes);
    }
  });
}

extern "C" int tessera_cpu_gather_grad(const tessera_tensor *indices,
                                       const tessera_tensor *dy,
                                       tessera_tensor *dx, int64_t axis) {
  return runKernel("tessera_cpu_gather_grad", [&] {
    const tessera_tensor &positions = requireTensor(indices, "indices");
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &inputGradient = requireTensor(dx, "dx");
    GatherLayout layout =
        gatherLayout(inputGradient, positions, upstream, axis, "dy");
    FloatInput upstreamValues(upstream, "dy");
    FloatOutput result(inputGradient, "dx");
    result.fill(0.0f);
    for (int64_t n = 0; n < layout.indexCount; ++n) {
      int64_t index = gatherIndex(positions, n, layout.length);
      for (int64_t o = 0; o < layout.outer; ++o) {
        const float *source =
            upstreamValues.data() + (o * layout.indexCount + n) * layout.inner;
        float *destination =
            result.data() + (o * layout.length + index) * layout.inner;
        for (int64_t i = 0; i < layout.inner; ++i)
          destination[i] += source[i];
      }
    }
    result.commit();
  });
}
