//===- IndexingHandlers.cpp - GatherND, GatherElements, ScatterND -> tess -===//
//
// Exported Transformers index tensors in ways that tess has no op for:
// Falcon splits its fused query/key/value with `qkv[..., [-2]]` (GatherND
// after a Transpose), RoBERTa looks its token types up at run-time position
// ids (GatherElements), OPT and BLOOM write masks with in-place slice
// assignments (ScatterND). Rather than a run-time op per ONNX indexing op,
// each is rewritten here into the row gather every backend already has, its
// VJP (a scatter-add) included:
//
//   the data is reshaped so that the dims the indices address become one
//   dim of rows, the index of each row is computed (on the host when the
//   indices are known, else by a few integer ops), and one `tess.gather`
//   (or a `tess.slice`, when the rows are consecutive) picks them.
//
// ScatterND is the same gather over the updates' rows placed before the
// data's: row n of the result is the last update written to it, or the
// data's own row n.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

using namespace mlir;
using namespace tessera::onnx_import;
namespace tess = tessera::tess;

namespace {

int64_t product(ArrayRef<int64_t> dims) {
  int64_t result = 1;
  for (int64_t dim : dims)
    result *= dim;
  return result;
}

/// A `tess.constant` of int64 `values` shaped `shape`.
llvm::Expected<Value> indexConstant(GraphImporter &importer,
                                    ArrayRef<int64_t> shape,
                                    ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get(shape, importer.builder().getI64Type());
  auto op = importer.create<tess::ConstantOp>(
      {}, {importer.builder().getNamedAttr(
              "value", DenseElementsAttr::get(type, values))});
  if (!op)
    return op.takeError();
  return op->getResult();
}

/// Rows `rows` (each an index into dim 0) of `table`, shaped
/// `indexShape + table.shape[1:]`: a slice when they are consecutive and
/// `indexShape` is one dim (Falcon's single key row), else a gather.
llvm::Expected<Value> selectRows(GraphImporter &importer, Value table,
                                 ArrayRef<int64_t> indexShape,
                                 ArrayRef<int64_t> rows) {
  ArrayRef<int64_t> tableShape = tensorType(table).getShape();
  bool consecutive = indexShape.size() == 1 && !rows.empty();
  for (size_t i = 1; consecutive && i < rows.size(); ++i)
    consecutive = rows[i] == rows[0] + static_cast<int64_t>(i);
  auto &builder = importer.builder();
  if (consecutive) {
    int64_t rank = tableShape.size();
    SmallVector<int64_t> starts(rank, 0), limits(tableShape), strides(rank, 1);
    starts[0] = rows.front();
    limits[0] = rows.back() + 1;
    auto op = importer.create<tess::SliceOp>(
        {table}, {builder.getNamedAttr("starts", builder.getDenseI64ArrayAttr(starts)),
                  builder.getNamedAttr("limits", builder.getDenseI64ArrayAttr(limits)),
                  builder.getNamedAttr("strides",
                                       builder.getDenseI64ArrayAttr(strides))});
    if (!op)
      return op.takeError();
    return op->getResult();
  }
  llvm::Expected<Value> indices = indexConstant(importer, indexShape, rows);
  if (!indices)
    return indices.takeError();
  auto op = importer.create<tess::GatherOp>(
      {table, *indices},
      {builder.getNamedAttr("axis", builder.getI64IntegerAttr(0))});
  if (!op)
    return op.takeError();
  return op->getResult();
}

/// The row of `data` reshaped to [prod(shape[:batchDims + k]), ...] that
/// each index tuple of `indices` ([..., k], known) addresses, in the order of
/// the tuples. The first `batchDims` dims of the indices are those of the
/// data, and tuple t of batch b reads within batch b.
llvm::Expected<std::vector<int64_t>>
rowsOfIndexTuples(GraphImporter &importer, ArrayRef<int64_t> dataShape,
                  const HostTensor &indices, int64_t batchDims) {
  ArrayRef<int64_t> indicesShape = indices.getShape();
  int64_t dataRank = dataShape.size(), indicesRank = indicesShape.size();
  if (dataRank < 1 || indicesRank < 1)
    return importer.nodeError("data and indices must have rank at least 1");
  if (batchDims < 0 || batchDims >= std::min(dataRank, indicesRank))
    return importer.nodeError("batch_dims " + std::to_string(batchDims) +
                              " must be less than the ranks of data and "
                              "indices");
  for (int64_t d = 0; d < batchDims; ++d)
    if (dataShape[d] != indicesShape[d])
      return importer.nodeError("batch dim " + std::to_string(d) +
                                " differs between data and indices");
  int64_t tupleSize = indicesShape.back();
  if (tupleSize < 1 || tupleSize > dataRank - batchDims)
    return importer.nodeError("the indices' last dim " +
                              std::to_string(tupleSize) + " must be from 1 to " +
                              std::to_string(dataRank - batchDims));
  int64_t tupleCount = product(indicesShape.drop_back());
  int64_t batchCount = product(indicesShape.take_front(batchDims));
  int64_t tuplesPerBatch = batchCount == 0 ? 0 : tupleCount / batchCount;
  int64_t rowsPerBatch =
      product(dataShape.slice(batchDims, tupleSize));
  std::vector<int64_t> rows;
  rows.reserve(tupleCount);
  for (int64_t tuple = 0; tuple < tupleCount; ++tuple) {
    int64_t row = 0;
    for (int64_t k = 0; k < tupleSize; ++k) {
      int64_t size = dataShape[batchDims + k];
      int64_t index = indices.getInt(tuple * tupleSize + k);
      if (index < -size || index >= size)
        return importer.nodeError(
            "index " + std::to_string(index) + " is out of range for dim " +
            std::to_string(batchDims + k) + " of size " + std::to_string(size) +
            " of input '" + importer.node().input(0) + "'");
      row = row * size + (index < 0 ? index + size : index);
    }
    rows.push_back((tuple / tuplesPerBatch) * rowsPerBatch + row);
  }
  return rows;
}

/// The indices input of GatherND and ScatterND: only indices known at
/// compile time are rewritten (every export seen computes them from
/// constants and shapes).
llvm::Expected<const HostTensor *> knownIndices(GraphImporter &importer) {
  if (const HostTensor *indices = importer.constantInput(1))
    return indices;
  return importer.nodeError(
      "indices computed at run time are not supported: Tessera rewrites " +
      importer.node().op_type() +
      " into a gather of rows, which needs its indices known at compile "
      "time");
}

/// The data of a GatherND or ScatterND as a table of rows, and the row that
/// each of its (known) index tuples addresses.
struct IndexedRows {
  Value data;
  /// `data` reshaped to [prod(shape[:addressed])] + rowShape.
  Value table;
  const HostTensor *indices;
  std::vector<int64_t> rows;
  SmallVector<int64_t> rowShape;
};

llvm::Expected<IndexedRows> indexedRows(GraphImporter &importer,
                                        int64_t batchDims) {
  llvm::Expected<Value> data = importer.tensorInput(0);
  if (!data)
    return data.takeError();
  llvm::Expected<const HostTensor *> indices = knownIndices(importer);
  if (!indices)
    return indices.takeError();
  ArrayRef<int64_t> dataShape = tensorType(*data).getShape();
  llvm::Expected<std::vector<int64_t>> rows =
      rowsOfIndexTuples(importer, dataShape, **indices, batchDims);
  if (!rows)
    return rows.takeError();
  int64_t addressed = batchDims + (*indices)->getShape().back();
  SmallVector<int64_t> rowShape(dataShape.drop_front(addressed));
  SmallVector<int64_t> tableShape = {product(dataShape.take_front(addressed))};
  llvm::append_range(tableShape, rowShape);
  llvm::Expected<Value> table = reshapeTo(importer, *data, tableShape);
  if (!table)
    return table.takeError();
  return IndexedRows{*data, *table, *indices, std::move(*rows),
                     std::move(rowShape)};
}

llvm::Error importGatherND(GraphImporter &importer) {
  llvm::Expected<IndexedRows> indexed =
      indexedRows(importer, importer.intAttr("batch_dims", 0));
  if (!indexed)
    return indexed.takeError();
  ArrayRef<int64_t> tupleShape = indexed->indices->getShape().drop_back();
  llvm::Expected<Value> picked =
      selectRows(importer, indexed->table, tupleShape, indexed->rows);
  if (!picked)
    return picked.takeError();
  SmallVector<int64_t> outputShape(tupleShape);
  llvm::append_range(outputShape, indexed->rowShape);
  return setReshaped(importer, *picked, outputShape);
}

llvm::Error importScatterND(GraphImporter &importer) {
  std::string reduction = importer.stringAttr("reduction", "none");
  if (reduction != "none")
    return importer.nodeError("reduction '" + reduction +
                              "' is not supported (only 'none', a plain "
                              "write, is)");
  llvm::Expected<IndexedRows> indexed = indexedRows(importer, 0);
  if (!indexed)
    return indexed.takeError();
  llvm::Expected<Value> updates = importer.tensorInput(2);
  if (!updates)
    return updates.takeError();
  SmallVector<int64_t> updatesTableShape = {
      static_cast<int64_t>(indexed->rows.size())};
  llvm::append_range(updatesTableShape, indexed->rowShape);
  SmallVector<int64_t> updatesShape(indexed->indices->getShape().drop_back());
  llvm::append_range(updatesShape, indexed->rowShape);
  if (tensorType(*updates).getShape() != ArrayRef<int64_t>(updatesShape) ||
      tensorType(*updates).getElementType() !=
          tensorType(indexed->data).getElementType())
    return importer.nodeError(
        "updates must have the data's element type and the shape "
        "indices.shape[:-1] + data.shape[indices.shape[-1]:]");
  llvm::Expected<Value> updatesTable =
      reshapeTo(importer, *updates, updatesTableShape);
  if (!updatesTable)
    return updatesTable.takeError();

  // Rows [0, M) of the combined table are the updates, [M, M + N) the data.
  int64_t updateRows = indexed->rows.size();
  int64_t dataRows = tensorType(indexed->table).getDimSize(0);
  std::vector<int64_t> source(dataRows);
  for (int64_t row = 0; row < dataRows; ++row)
    source[row] = updateRows + row;
  // ONNX leaves repeated indices undefined; the last write wins, as in
  // onnxruntime.
  for (auto [update, row] : llvm::enumerate(indexed->rows))
    source[row] = update;
  auto table = importer.create<tess::ConcatOp>(
      {*updatesTable, indexed->table},
      {importer.builder().getNamedAttr("axis",
                                       importer.builder().getI64IntegerAttr(0))});
  if (!table)
    return table.takeError();
  llvm::Expected<Value> picked =
      selectRows(importer, table->getResult(), {dataRows}, source);
  if (!picked)
    return picked.takeError();
  return setReshaped(importer, *picked,
                     tensorType(indexed->data).getShape());
}

/// GatherElements: the data flattened, and each index turned into a flat
/// position by `index * stride(axis)` plus the (known) offset of its
/// position along the other dims.
llvm::Error importGatherElements(GraphImporter &importer) {
  llvm::Expected<Value> data = importer.tensorInput(0);
  if (!data)
    return data.takeError();
  llvm::Expected<Value> indices = importer.tensorInput(1);
  if (!indices)
    return indices.takeError();
  ArrayRef<int64_t> dataShape = tensorType(*data).getShape();
  ArrayRef<int64_t> indicesShape = tensorType(*indices).getShape();
  int64_t rank = dataShape.size();
  if (rank == 0 || static_cast<int64_t>(indicesShape.size()) != rank)
    return importer.nodeError(
        "data and indices must have the same non-zero rank");
  auto axis = tess::normalizeAxis(importer.intAttr("axis", 0), rank);
  if (!axis)
    return importer.nodeError("axis out of range");
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis && indicesShape[d] > dataShape[d])
      return importer.nodeError("indices are larger than the data outside "
                                "the gather axis");
  SmallVector<int64_t> strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * dataShape[d + 1];
  int64_t count = product(indicesShape), extent = dataShape[*axis];
  // The flat offset of each index position along the dims other than axis.
  std::vector<int64_t> offsets(count);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, offset = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (d != *axis)
        offset += (rest % indicesShape[d]) * strides[d];
      rest /= indicesShape[d];
    }
    offsets[i] = offset;
  }
  llvm::Expected<Value> table = reshapeTo(importer, *data, {product(dataShape)});
  if (!table)
    return table.takeError();
  // position = offset + (index + extent * (index < 0)) * stride; known
  // indices make these ops constants, which the import cleanup folds.
  auto &builder = importer.builder();
  Type indexType = builder.getI64Type();
  Value index = *indices;
  if (tensorType(index).getElementType() != indexType) {
    auto cast = importer.create<tess::CastOp>(
        {index}, {}, {RankedTensorType::get(indicesShape, indexType)});
    if (!cast)
      return cast.takeError();
    index = cast->getResult();
  }
  llvm::Expected<Value> zero = indexConstant(importer, {}, {0});
  llvm::Expected<Value> wrapped = indexConstant(importer, {}, {extent});
  llvm::Expected<Value> stride =
      indexConstant(importer, {}, {strides[*axis]});
  llvm::Expected<Value> offset = indexConstant(importer, indicesShape, offsets);
  for (llvm::Expected<Value> *constant : {&zero, &wrapped, &stride, &offset})
    if (!*constant)
      return constant->takeError();
  auto negative = importer.create<tess::CompareOp>(
      {index, *zero},
      {builder.getNamedAttr("predicate",
                            tess::ComparisonPredicateAttr::get(
                                importer.context(),
                                tess::ComparisonPredicate::lt))});
  if (!negative)
    return negative.takeError();
  auto fromEnd = importer.create<tess::AddOp>({index, *wrapped});
  if (!fromEnd)
    return fromEnd.takeError();
  auto normalized = importer.create<tess::WhereOp>(
      {negative->getResult(), fromEnd->getResult(), index});
  if (!normalized)
    return normalized.takeError();
  auto scaled = importer.create<tess::MulOp>({normalized->getResult(), *stride});
  if (!scaled)
    return scaled.takeError();
  auto positions = importer.create<tess::AddOp>({scaled->getResult(), *offset});
  if (!positions)
    return positions.takeError();
  return importer.createResult<tess::GatherOp>(
      {*table, positions->getResult()},
      {builder.getNamedAttr("axis", builder.getI64IntegerAttr(0))});
}

} // namespace

void tessera::onnx_import::registerIndexingHandlers(HandlerTable &table) {
  table["GatherND"] = importGatherND;
  table["GatherElements"] = importGatherElements;
  table["ScatterND"] = importScatterND;
}
