//===- TessPlanAttrs.cpp - the plan attributes and where they may sit -----===//
//
// Syntax and rules of TessPlanAttrs.td: `#tess.layout<[dp, -] partial(tp)>`,
// `#tess.chunk<...>`, `#tess.plan<...>`, `#tess.planned<...>`, and the
// dialect's checks of the discardable attributes that carry them (tess.plan
// on the module, tess.layout on function arguments and results, tess.layouts
// on ops, tess.planned on @forward's ops and results),
// which need the mesh and the laid-out value's type that the attributes
// alone do not know.
//
//===----------------------------------------------------------------------===//

#include "Tess/IR/TessOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringSet.h"

#include <functional>

using namespace mlir;
using namespace tessera::tess;

namespace {
constexpr StringLiteral kPlanAttrName = "tess.plan";
constexpr StringLiteral kLayoutAttrName = "tess.layout";
constexpr StringLiteral kPiecesAttrName = "tess.pieces";
constexpr StringLiteral kLayoutsAttrName = "tess.layouts";
constexpr StringLiteral kPlannedAttrName = "tess.planned";
} // namespace

//===----------------------------------------------------------------------===//
// #tess.layout
//===----------------------------------------------------------------------===//

namespace {

/// `dp, tp` up to the closing delimiter: axis names, or `-` (an unsplit
/// dim, the empty name) where `allowUnsplit`.
ParseResult parseAxisList(AsmParser &parser, AsmParser::Delimiter delimiter,
                          bool allowUnsplit, SmallVector<StringAttr> &axes) {
  return parser.parseCommaSeparatedList(delimiter, [&]() -> ParseResult {
    if (allowUnsplit && succeeded(parser.parseOptionalMinus())) {
      axes.push_back(StringAttr::get(parser.getContext(), ""));
      return success();
    }
    std::string name;
    if (parser.parseKeywordOrString(&name))
      return failure();
    axes.push_back(StringAttr::get(parser.getContext(), name));
    return success();
  });
}

/// `dp, tp`: the names of `axes`, the other half of parseAxisList.
void printAxisNames(AsmPrinter &printer, ArrayRef<StringAttr> axes) {
  llvm::interleaveComma(axes, printer, [&](StringAttr axis) {
    printer.printKeywordOrString(axis.getValue());
  });
}

/// `<key = value, ...>` or `<>`: each key at most once, its value read by
/// `parseValue(key, at)`; `attribute` names the attribute in messages.
ParseResult
parseFields(AsmParser &parser, StringRef attribute,
            function_ref<ParseResult(StringRef key, SMLoc at)> parseValue) {
  llvm::StringSet<> seen;
  auto parseField = [&]() -> ParseResult {
    std::string key;
    SMLoc at = parser.getCurrentLocation();
    if (parser.parseKeywordOrString(&key) || parser.parseEqual())
      return failure();
    if (!seen.insert(key).second)
      return parser.emitError(at)
             << attribute << ": '" << key << "' given twice";
    return parseValue(key, at);
  };
  if (parser.parseLess())
    return failure();
  if (succeeded(parser.parseOptionalGreater()))
    return success();
  return failure(parser.parseCommaSeparatedList(parseField) ||
                 parser.parseGreater());
}

/// `[#tess.x<...>, ...]`: a list of attributes of class `AttributeClass`.
template <typename AttributeClass>
ParseResult parseAttributeList(AsmParser &parser,
                               SmallVectorImpl<AttributeClass> &list) {
  return parser.parseCommaSeparatedList(
      AsmParser::Delimiter::Square, [&]() -> ParseResult {
        AttributeClass element;
        if (parser.parseAttribute(element))
          return failure();
        list.push_back(element);
        return success();
      });
}

} // namespace

Attribute LayoutAttr::parse(AsmParser &parser, Type) {
  SMLoc at = parser.getCurrentLocation();
  SmallVector<StringAttr> dims, partial;
  if (parser.parseLess() ||
      parseAxisList(parser, AsmParser::Delimiter::Square,
                    /*allowUnsplit=*/true, dims))
    return {};
  if (succeeded(parser.parseOptionalKeyword("partial")) &&
      parseAxisList(parser, AsmParser::Delimiter::Paren,
                    /*allowUnsplit=*/false, partial))
    return {};
  if (parser.parseGreater())
    return {};
  // The generated getChecked (ArrayRef parameters): the storage is defined
  // in TessDialect.cpp only.
  return LayoutAttr::getChecked([&] { return parser.emitError(at); },
                                parser.getContext(), ArrayRef(dims),
                                ArrayRef(partial));
}

void LayoutAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(getDims(), printer, [&](StringAttr axis) {
    if (axis.getValue().empty())
      printer << "-";
    else
      printer.printKeywordOrString(axis.getValue());
  });
  printer << "]";
  if (!getPartial().empty()) {
    printer << " partial(";
    printAxisNames(printer, getPartial());
    printer << ")";
  }
  printer << ">";
}

LogicalResult LayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<StringAttr> dims,
                                 ArrayRef<StringAttr> partial) {
  llvm::StringSet<> seen;
  for (StringAttr axis : llvm::concat<const StringAttr>(dims, partial)) {
    if (axis.getValue().empty())
      continue; // `-`; the parser allows no empty partial axis
    if (!seen.insert(axis.getValue()).second)
      return emitError() << "C1: layout uses mesh axis '" << axis.getValue()
                         << "' twice";
  }
  return success();
}

bool LayoutAttr::isReplicated() const {
  return getPartial().empty() &&
         llvm::all_of(getDims(),
                      [](StringAttr axis) { return axis.getValue().empty(); });
}

LogicalResult
LayoutAttr::verifyPlacement(function_ref<InFlightDiagnostic()> emitError,
                            Type type, MeshAttr mesh, StringRef what) const {
  for (StringAttr axis : llvm::concat<const StringAttr>(getDims(),
                                                        getPartial())) {
    if (axis.getValue().empty())
      continue;
    if (!mesh)
      return emitError() << "C2: " << what << " is laid out as " << *this
                         << " but the module has no tess.mesh";
    if (!mesh.axisIndex(axis.getValue()))
      return emitError() << "C2: axis '" << axis.getValue() << "' of " << what
                         << "'s layout is not an axis of the mesh " << mesh;
  }
  if (!type)
    return success(); // a region argument without a block to check against
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  int64_t rank = tensor ? tensor.getRank() : 0;
  if ((!tensor && !isReplicated()) || rank != getRank())
    return emitError() << "C3: layout " << *this << " has " << getRank()
                       << " dims, " << what << " is a " << type;
  return success();
}

//===----------------------------------------------------------------------===//
// #tess.chunk
//===----------------------------------------------------------------------===//

LogicalResult ChunkAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t device, int64_t first, int64_t last,
                                StringRef remat) {
  if (first < 0 || first > last)
    return emitError() << "C1: a chunk's units must satisfy 0 <= first <= "
                          "last, got "
                       << first << " to " << last;
  if (device < 0)
    return emitError() << "C2: a chunk's device must be >= 0, got " << device;
  if (!remat.empty() && remat != "none" && remat != "selective" &&
      remat != "full")
    return emitError() << "C3: a chunk's remat must be none, selective or "
                          "full, got '"
                       << remat << "'";
  return success();
}

//===----------------------------------------------------------------------===//
// #tess.plan
//===----------------------------------------------------------------------===//

namespace {

constexpr StringLiteral kNoRemat = "none";

/// The chunks per device `schedule` runs (1 but for interleaved:V), or
/// std::nullopt for a name that is no schedule. lib/Pipeline's
/// parseSchedule reads the same names for the flags; the dialect cannot
/// link it.
std::optional<int64_t> chunksPerDevice(StringRef schedule) {
  if (schedule == "gpipe" || schedule == "1f1b")
    return 1;
  int64_t chunks;
  if (schedule.consume_front("interleaved:") &&
      !schedule.getAsInteger(10, chunks) && chunks >= 2)
    return chunks;
  return std::nullopt;
}

} // namespace

PlanAttr PlanAttr::get(MLIRContext *context) {
  return get(context, MeshAttr(), /*zero=*/0, StringRef(kNoRemat),
             /*stages=*/1, /*schedule=*/StringRef(), /*microbatches=*/1,
             ArrayRef<ChunkAttr>(), /*offload=*/StringRef());
}

PlanAttr PlanAttr::withChunks(ArrayRef<ChunkAttr> chunks) const {
  return get(getContext(), getMesh(), getZero(), getRemat(), getStages(),
             getSchedule(), getMicrobatches(), chunks, getOffload());
}

PlanAttr PlanAttr::withMesh(MeshAttr mesh) const {
  return get(getContext(), mesh, getZero(), getRemat(), getStages(),
             getSchedule(), getMicrobatches(), getChunks(), getOffload());
}

int64_t PlanAttr::getVirtualStages() const {
  return chunksPerDevice(getSchedule()).value_or(1);
}

PlanAttr PlanAttr::lookup(Operation *op) {
  auto module = llvm::dyn_cast<ModuleOp>(op);
  if (!module)
    module = op->getParentOfType<ModuleOp>();
  return module ? module->getAttrOfType<PlanAttr>(kPlanAttrName) : PlanAttr();
}

Attribute PlanAttr::parse(AsmParser &parser, Type) {
  SMLoc start = parser.getCurrentLocation();
  MeshAttr mesh;
  int64_t zero = 0, stages = 1, microbatches = 1;
  std::string remat = kNoRemat.str(), schedule, offload;
  SmallVector<ChunkAttr> chunks;
  auto parseField = [&](StringRef key, SMLoc at) -> ParseResult {
    if (key == "mesh")
      return parser.parseAttribute(mesh);
    if (key == "zero") {
      if (succeeded(parser.parseOptionalKeyword("mixed"))) {
        zero = kMixedZero;
        return success();
      }
      return parser.parseInteger(zero);
    }
    if (key == "remat")
      return parser.parseString(&remat);
    if (key == "stages")
      return parser.parseInteger(stages);
    if (key == "schedule")
      return parser.parseString(&schedule);
    if (key == "microbatches")
      return parser.parseInteger(microbatches);
    if (key == "offload")
      return parser.parseString(&offload);
    if (key == "chunks")
      return parseAttributeList(parser, chunks);
    return parser.emitError(at)
           << "tess.plan: unknown field '" << key
           << "' (expected mesh, zero, remat, stages, schedule, "
              "microbatches, chunks or offload)";
  };
  if (parseFields(parser, "tess.plan", parseField))
    return {};
  return PlanAttr::getChecked([&] { return parser.emitError(start); },
                              parser.getContext(), mesh, zero, StringRef(remat),
                              stages, StringRef(schedule), microbatches,
                              ArrayRef(chunks), StringRef(offload));
}

void PlanAttr::print(AsmPrinter &printer) const {
  // Only what differs from one device's defaults.
  SmallVector<std::function<void()>> fields;
  if (getMesh())
    fields.push_back([&] { printer << "mesh = " << getMesh(); });
  if (getZero() == kMixedZero)
    fields.push_back([&] { printer << "zero = mixed"; });
  else if (getZero() != 0)
    fields.push_back([&] { printer << "zero = " << getZero(); });
  if (getRemat() != kNoRemat)
    fields.push_back([&] { printer << "remat = \"" << getRemat() << "\""; });
  if (getStages() != 1)
    fields.push_back([&] { printer << "stages = " << getStages(); });
  if (!getSchedule().empty())
    fields.push_back(
        [&] { printer << "schedule = \"" << getSchedule() << "\""; });
  if (getMicrobatches() != 1)
    fields.push_back(
        [&] { printer << "microbatches = " << getMicrobatches(); });
  if (!getChunks().empty())
    fields.push_back([&] {
      printer << "chunks = [";
      llvm::interleaveComma(getChunks(), printer,
                            [&](ChunkAttr chunk) { printer << chunk; });
      printer << "]";
    });
  if (isOffloaded())
    fields.push_back(
        [&] { printer << "offload = \"" << getOffload() << "\""; });
  printer << "<";
  llvm::interleaveComma(fields, printer,
                        [](const std::function<void()> &field) { field(); });
  printer << ">";
}

LogicalResult PlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               MeshAttr mesh, int64_t zero, StringRef remat,
                               int64_t stages, StringRef schedule,
                               int64_t microbatches,
                               ArrayRef<ChunkAttr> chunks, StringRef offload) {
  if (zero != kMixedZero && (zero < 0 || zero > 3))
    return emitError() << "C1: zero must be 0 to 3 or mixed, got " << zero;
  if (remat != "none" && remat != "selective" && remat != "full")
    return emitError() << "C2: remat must be none, selective or full, got '"
                       << remat << "'";
  if (stages < 1 || microbatches < 1)
    return emitError() << "C3: stages and microbatches must be >= 1, got "
                       << stages << " and " << microbatches;
  if (!offload.empty() && offload != "optimizer")
    return emitError() << "C7: offload must be optimizer, got '" << offload
                       << "'";
  if (!offload.empty() && (mesh || !schedule.empty() || zero != 0))
    return emitError() << "C7: an offloaded plan is one device's: no mesh, "
                          "no schedule, zero 0";
  std::optional<int64_t> virtualStages = 1;
  if (schedule.empty()) {
    if (stages != 1 || microbatches != 1 || !chunks.empty())
      return emitError() << "C4: stages, microbatches and chunks need a "
                            "schedule";
  } else if (!(virtualStages = chunksPerDevice(schedule))) {
    return emitError() << "C4: schedule must be gpipe, 1f1b or "
                          "interleaved:V with V >= 2, got '"
                       << schedule << "'";
  }
  if (chunks.empty())
    return success();
  if (static_cast<int64_t>(chunks.size()) != stages * *virtualStages)
    return emitError() << "C5: " << stages << " stages of schedule "
                       << schedule << " run " << stages * *virtualStages
                       << " chunks, got " << chunks.size();
  int64_t nextUnit = 0;
  for (auto [index, chunk] : llvm::enumerate(chunks)) {
    if (chunk.getDevice() != static_cast<int64_t>(index) % stages)
      return emitError() << "C5: chunk " << index << " must run on device "
                         << static_cast<int64_t>(index) % stages << ", got "
                         << chunk.getDevice();
    if (chunk.getFirst() != nextUnit)
      return emitError() << "C5: chunk " << index << " must start at unit "
                         << nextUnit << ", got " << chunk.getFirst();
    nextUnit = chunk.getLast() + 1;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// #tess.planned
//===----------------------------------------------------------------------===//

Attribute PlannedAttr::parse(AsmParser &parser, Type) {
  SMLoc start = parser.getCurrentLocation();
  std::optional<std::string> strategy;
  std::string layer;
  SmallVector<LayoutAttr> operands, results;
  LayoutAttr state;
  int64_t zero = 0;
  SmallVector<StringAttr> zeroAxes;
  auto parseField = [&](StringRef key, SMLoc at) -> ParseResult {
    if (key == "strategy")
      return parser.parseString(&strategy.emplace());
    if (key == "layer")
      return parser.parseString(&layer);
    if (key == "operands")
      return parseAttributeList(parser, operands);
    if (key == "results")
      return parseAttributeList(parser, results);
    if (key == "state")
      return parser.parseAttribute(state);
    if (key == "zero")
      return parser.parseInteger(zero);
    if (key == "zero_axes")
      return parseAxisList(parser, AsmParser::Delimiter::Square,
                           /*allowUnsplit=*/false, zeroAxes);
    return parser.emitError(at)
           << "tess.planned: unknown field '" << key
           << "' (expected strategy, layer, operands, results, state, zero "
              "or zero_axes)";
  };
  if (parseFields(parser, "tess.planned", parseField))
    return {};
  if (!strategy) {
    parser.emitError(start) << "tess.planned: 'strategy' is required";
    return {};
  }
  return PlannedAttr::getChecked([&] { return parser.emitError(start); },
                                 parser.getContext(), StringRef(*strategy),
                                 StringRef(layer), ArrayRef(operands),
                                 ArrayRef(results), state, zero,
                                 ArrayRef(zeroAxes));
}

void PlannedAttr::print(AsmPrinter &printer) const {
  auto printLayouts = [&](StringRef key, ArrayRef<LayoutAttr> layouts) {
    if (layouts.empty())
      return;
    printer << ", " << key << " = [";
    llvm::interleaveComma(layouts, printer,
                          [&](LayoutAttr layout) { printer << layout; });
    printer << "]";
  };
  printer << "<strategy = ";
  printer.printString(getStrategy());
  if (!getLayer().empty()) {
    printer << ", layer = ";
    printer.printString(getLayer());
  }
  printLayouts("operands", getOperands());
  printLayouts("results", getResults());
  if (isParameter())
    printer << ", state = " << getState() << ", zero = " << getZero();
  if (!getZeroAxes().empty()) {
    printer << ", zero_axes = [";
    printAxisNames(printer, getZeroAxes());
    printer << "]";
  }
  printer << ">";
}

LogicalResult
PlannedAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                    StringRef strategy, StringRef layer,
                    ArrayRef<LayoutAttr> operands, ArrayRef<LayoutAttr> results,
                    LayoutAttr state, int64_t zero,
                    ArrayRef<StringAttr> zeroAxes) {
  if (zero < 0 || zero > 3)
    return emitError() << "C1: a planned ZeRO stage must be 0 to 3, got "
                       << zero;
  llvm::StringSet<> seen;
  for (StringAttr axis : zeroAxes)
    if (!seen.insert(axis.getValue()).second)
      return emitError() << "C2: zero_axes name '" << axis.getValue()
                         << "' twice";
  if (zero == 0 && !zeroAxes.empty())
    return emitError() << "C2: zero_axes need a ZeRO stage > 0";
  if (!state && (zero != 0 || !zeroAxes.empty()))
    return emitError() << "C3: zero and zero_axes need a state layout (the "
                          "parameter form)";
  return success();
}

namespace {

/// C6 of #tess.planned: `axes`, named by `what` of `op`'s plan, are axes of
/// the module's mesh.
LogicalResult verifyPlannedAxes(Operation *op, ArrayRef<StringAttr> axes,
                                const Twine &what) {
  MeshAttr mesh = MeshAttr::lookup(op);
  for (StringAttr axis : axes) {
    if (axis.getValue().empty())
      continue; // `-`
    if (!mesh)
      return op->emitOpError("C6: the planned ")
             << what << " names axis '" << axis.getValue()
             << "' but the module has no tess.mesh";
    if (!mesh.axisIndex(axis.getValue()))
      return op->emitOpError("C6: axis '")
             << axis.getValue() << "' of the planned " << what
             << " is not an axis of the mesh " << mesh;
  }
  return success();
}

LogicalResult verifyPlannedLayout(Operation *op, LayoutAttr layout,
                                  const Twine &what) {
  if (failed(verifyPlannedAxes(op, layout.getDims(), what + " layout")))
    return failure();
  return verifyPlannedAxes(op, layout.getPartial(), what + " layout");
}

} // namespace

LogicalResult PlannedAttr::verifyPlacement(Operation *op) const {
  if (getOperands().size() != op->getNumOperands() ||
      getResults().size() != op->getNumResults())
    return op->emitOpError("C5: tess.planned needs one layout per operand (")
           << op->getNumOperands() << ") and per result ("
           << op->getNumResults() << "), got " << getOperands().size()
           << " and " << getResults().size();
  if (isParameter() && !llvm::isa<ParameterOp>(op))
    return op->emitOpError("C5: a tess.planned with a state layout must sit "
                           "on a tess.parameter");
  for (auto [index, layout] : llvm::enumerate(getOperands()))
    if (failed(verifyPlannedLayout(op, layout, "operand " + Twine(index))))
      return failure();
  for (auto [index, layout] : llvm::enumerate(getResults()))
    if (failed(verifyPlannedLayout(op, layout, "result " + Twine(index))))
      return failure();
  if (isParameter() && failed(verifyPlannedLayout(op, getState(), "state")))
    return failure();
  return verifyPlannedAxes(op, getZeroAxes(), "zero_axes");
}

//===----------------------------------------------------------------------===//
// Where the plan's attributes sit
//===----------------------------------------------------------------------===//

namespace {

/// C4 of #tess.layout: `attribute` is a layout; then C2 and C3 for a value
/// of `type`.
LogicalResult verifyLayoutOf(Operation *op, Attribute attribute, Type type,
                             StringRef what) {
  auto layout = llvm::dyn_cast<LayoutAttr>(attribute);
  if (!layout)
    return op->emitOpError("C4: tess.layout of ")
           << what << " must be a #tess.layout, got " << attribute;
  return layout.verifyPlacement([&] { return op->emitOpError(); }, type,
                                MeshAttr::lookup(op), what);
}

/// The type of argument (or result) `index` of region `region` of `op`:
/// a function's signature, else the region's entry block.
Type regionValueType(Operation *op, unsigned region, unsigned index,
                     bool result) {
  if (auto function = llvm::dyn_cast<FunctionOpInterface>(op))
    return result ? function.getResultTypes()[index]
                  : function.getArgumentTypes()[index];
  if (result || op->getRegion(region).empty())
    return {};
  return op->getRegion(region).getArgument(index).getType();
}

/// C5 of #tess.layout: tess.pieces of a function's argument or result.
LogicalResult verifyPiecesOf(Operation *op, Attribute attribute, Type type,
                             Attribute layoutAttribute, StringRef what) {
  auto pieces = llvm::dyn_cast<DenseI64ArrayAttr>(attribute);
  auto shaped = llvm::dyn_cast_or_null<RankedTensorType>(type);
  if (!pieces || !shaped || pieces.size() != shaped.getRank())
    return op->emitOpError("C5: tess.pieces of ")
           << what << " must be an array of one piece count per dim of "
           << type << ", got " << attribute;
  auto layout = llvm::dyn_cast_or_null<LayoutAttr>(layoutAttribute);
  for (auto [dim, count] : llvm::enumerate(pieces.asArrayRef())) {
    if (count < 1)
      return op->emitOpError("C5: tess.pieces of ")
             << what << ": dim " << dim << " has " << count << " pieces";
    if (count == 1)
      continue;
    if (!layout || dim >= layout.getRank() ||
        layout.getDims()[dim].getValue().empty())
      return op->emitOpError("C5: tess.pieces of ")
             << what << ": dim " << dim << " is in " << count
             << " pieces but not split in its tess.layout";
    if (shaped.getDimSize(dim) % count != 0)
      return op->emitOpError("C5: tess.pieces of ")
             << what << ": dim " << dim << " of size "
             << shaped.getDimSize(dim) << " is not " << count
             << " equal pieces";
  }
  return success();
}

} // namespace

LogicalResult TessDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attribute) {
  if (attribute.getName() == kPlanAttrName) {
    auto plan = llvm::dyn_cast<PlanAttr>(attribute.getValue());
    if (!plan || !llvm::isa<ModuleOp>(op))
      return op->emitOpError("C6: tess.plan must be a #tess.plan on a module");
    auto mesh = op->getAttrOfType<MeshAttr>("tess.mesh");
    if (mesh && plan.getMesh() && plan.getMesh() != mesh)
      return op->emitOpError("C6: the plan's mesh ")
             << plan.getMesh() << " is not the module's tess.mesh " << mesh;
    return success();
  }
  if (attribute.getName() == kPlannedAttrName) {
    auto planned = llvm::dyn_cast<PlannedAttr>(attribute.getValue());
    if (!planned)
      return op->emitOpError("C4: tess.planned of an op must be a "
                             "#tess.planned, got ")
             << attribute.getValue();
    return planned.verifyPlacement(op);
  }
  if (attribute.getName() != kLayoutsAttrName)
    return success();
  auto layouts = llvm::dyn_cast<ArrayAttr>(attribute.getValue());
  if (!layouts || layouts.size() != op->getNumResults())
    return op->emitOpError("C4: tess.layouts must be an array of one "
                           "#tess.layout per result (")
           << op->getNumResults() << "), got " << attribute.getValue();
  for (auto [index, layout] : llvm::enumerate(layouts))
    if (failed(verifyLayoutOf(op, layout, op->getResult(index).getType(),
                              "result " + std::to_string(index))))
      return failure();
  return success();
}

LogicalResult TessDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned region,
                                                    unsigned argument,
                                                    NamedAttribute attribute) {
  if (attribute.getName() == kPiecesAttrName) {
    auto function = llvm::dyn_cast<FunctionOpInterface>(op);
    return verifyPiecesOf(
        op, attribute.getValue(), regionValueType(op, region, argument, false),
        function ? function.getArgAttr(argument, kLayoutAttrName) : nullptr,
        "argument " + std::to_string(argument));
  }
  if (attribute.getName() != kLayoutAttrName)
    return success();
  return verifyLayoutOf(op, attribute.getValue(),
                        regionValueType(op, region, argument, false),
                        "argument " + std::to_string(argument));
}

LogicalResult TessDialect::verifyRegionResultAttribute(
    Operation *op, unsigned region, unsigned result, NamedAttribute attribute) {
  if (attribute.getName() == kPlannedAttrName) {
    auto layout = llvm::dyn_cast<LayoutAttr>(attribute.getValue());
    if (!layout)
      return op->emitOpError("C4: tess.planned of result ")
             << result << " must be a #tess.layout, got "
             << attribute.getValue();
    return verifyPlannedLayout(op, layout, "result " + Twine(result));
  }
  if (attribute.getName() == kPiecesAttrName) {
    auto function = llvm::dyn_cast<FunctionOpInterface>(op);
    return verifyPiecesOf(
        op, attribute.getValue(), regionValueType(op, region, result, true),
        function ? function.getResultAttr(result, kLayoutAttrName) : nullptr,
        "result " + std::to_string(result));
  }
  if (attribute.getName() != kLayoutAttrName)
    return success();
  return verifyLayoutOf(op, attribute.getValue(),
                        regionValueType(op, region, result, true),
                        "result " + std::to_string(result));
}
