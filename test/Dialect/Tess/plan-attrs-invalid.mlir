// RUN: tessera-opt %s -split-input-file -verify-diagnostics

// One case per numbered rule of TessPlanAttrs.td (#tess.layout,
// #tess.chunk, #tess.plan, #tess.planned), named after the rule it breaks.

module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>} {
  // expected-error@+1 {{C1: layout uses mesh axis 'dp' twice}}
  func.func @layout_c1_two_dims(%x: tensor<4x8xf32> {tess.layout = #tess.layout<[dp, dp]>}) {
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>} {
  // expected-error@+1 {{C1: layout uses mesh axis 'tp' twice}}
  func.func @layout_c1_dim_and_partial(%x: tensor<4x8xf32> {tess.layout = #tess.layout<[-, tp] partial(tp)>}) {
    return
  }
}

// -----

// expected-error@+1 {{C2: argument 0 is laid out as #tess.layout<[dp]> but the module has no tess.mesh}}
func.func @layout_c2_no_mesh(%x: tensor<4xf32> {tess.layout = #tess.layout<[dp]>}) {
  return
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  // expected-error@+1 {{C2: axis 'tp' of result 0's layout is not an axis of the mesh #tess.mesh<dp = 2>}}
  func.func @layout_c2_unknown_axis(%x: tensor<4xf32>) -> (tensor<4xf32> {tess.layout = #tess.layout<[-] partial(tp)>}) {
    return %x : tensor<4xf32>
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  // expected-error@+1 {{C3: layout #tess.layout<[dp, -]> has 2 dims, argument 0 is a 'tensor<4xf32>'}}
  func.func @layout_c3_argument(%x: tensor<4xf32> {tess.layout = #tess.layout<[dp, -]>}) {
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @layout_c3_op(%x: tensor<4x8xf32>) {
    // expected-error@+1 {{C3: layout #tess.layout<[dp]> has 1 dims, result 0 is a 'tensor<4x8xf32>'}}
    %y = tess.exp %x {tess.layouts = [#tess.layout<[dp]>]} : tensor<4x8xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  // expected-error@+1 {{C4: tess.layout of argument 0 must be a #tess.layout, got "[dp]"}}
  func.func @layout_c4_string(%x: tensor<4xf32> {tess.layout = "[dp]"}) {
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @layout_c4_count(%x: tensor<4xf32>) {
    // expected-error@+1 {{C4: tess.layouts must be an array of one #tess.layout per result (1), got []}}
    %y = tess.exp %x {tess.layouts = []} : tensor<4xf32>
    return
  }
}

// -----

// expected-error@+1 {{C1: a chunk's units must satisfy 0 <= first <= last, got 3 to 2}}
module attributes {tess.chunk = #tess.chunk<device = 0, units = 3 to 2>} {}

// -----

// expected-error@+1 {{C2: a chunk's device must be >= 0, got -1}}
module attributes {tess.chunk = #tess.chunk<device = -1, units = 0 to 2>} {}

// -----

// expected-error@+1 {{C3: a chunk's remat must be none, selective or full, got 'some'}}
module attributes {tess.chunk = #tess.chunk<device = 0, units = 0 to 2, remat = "some">} {}

// -----

// expected-error@+1 {{C1: zero must be 0 to 3 or mixed, got 4}}
module attributes {tess.plan = #tess.plan<zero = 4>} {}

// -----

// expected-error@+1 {{C2: remat must be none, selective or full, got 'some'}}
module attributes {tess.plan = #tess.plan<remat = "some">} {}

// -----

// expected-error@+1 {{C3: stages and microbatches must be >= 1, got 2 and 0}}
module attributes {tess.plan = #tess.plan<stages = 2, schedule = "1f1b", microbatches = 0>} {}

// -----

// expected-error@+1 {{C4: schedule must be gpipe, 1f1b or interleaved:V with V >= 2, got 'interleaved:1'}}
module attributes {tess.plan = #tess.plan<stages = 2, schedule = "interleaved:1">} {}

// -----

// expected-error@+1 {{C4: stages, microbatches and chunks need a schedule}}
module attributes {tess.plan = #tess.plan<stages = 2>} {}

// -----

// expected-error@+1 {{C5: 2 stages of schedule 1f1b run 2 chunks, got 1}}
module attributes {tess.plan = #tess.plan<stages = 2, schedule = "1f1b",
    chunks = [#tess.chunk<device = 0, units = 0 to 3>]>} {}

// -----

// expected-error@+1 {{C5: chunk 1 must run on device 1, got 0}}
module attributes {tess.plan = #tess.plan<stages = 2, schedule = "1f1b",
    chunks = [#tess.chunk<device = 0, units = 0 to 1>,
              #tess.chunk<device = 0, units = 2 to 3>]>} {}

// -----

// expected-error@+1 {{C5: chunk 1 must start at unit 2, got 3}}
module attributes {tess.plan = #tess.plan<stages = 2, schedule = "gpipe",
    chunks = [#tess.chunk<device = 0, units = 0 to 1>,
              #tess.chunk<device = 1, units = 3 to 4>]>} {}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  // expected-error@+1 {{C6: tess.plan must be a #tess.plan on a module}}
  func.func @plan_c6_on_function() attributes {tess.plan = #tess.plan<>} {
    return
  }
}

// -----

// expected-error@+1 {{C6: the plan's mesh #tess.mesh<dp = 4> is not the module's tess.mesh #tess.mesh<dp = 2>}}
module attributes {tess.mesh = #tess.mesh<dp = 2>, tess.plan = #tess.plan<mesh = #tess.mesh<dp = 4>>} {}

// -----

// expected-error@+1 {{C7: offload must be optimizer, got 'weights'}}
module attributes {tess.plan = #tess.plan<offload = "weights">} {}

// -----

// expected-error@+1 {{C7: an offloaded plan is one device's: no mesh, no schedule, zero 0}}
module attributes {tess.plan = #tess.plan<zero = 1, offload = "optimizer">} {}

// -----

// expected-error@+1 {{C7: an offloaded plan is one device's: no mesh, no schedule, zero 0}}
module attributes {tess.plan = #tess.plan<stages = 2, schedule = "1f1b", microbatches = 2, offload = "optimizer">} {}

// -----

// expected-error@+1 {{tess.plan: unknown field 'pipeline'}}
module attributes {tess.plan = #tess.plan<pipeline = 2>} {}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @planned_c1_zero() {
    // expected-error@+1 {{C1: a planned ZeRO stage must be 0 to 3, got 4}}
    %w = tess.parameter "w" trainable {tess.planned = #tess.planned<strategy = "[-] ZeRO-4", results = [#tess.layout<[-]>], state = #tess.layout<[dp]>, zero = 4, zero_axes = [dp]>} : tensor<4xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>} {
  func.func @planned_c2_axis_twice() {
    // expected-error@+1 {{C2: zero_axes name 'dp' twice}}
    %w = tess.parameter "w" trainable {tess.planned = #tess.planned<strategy = "[-] ZeRO-1", results = [#tess.layout<[-]>], state = #tess.layout<[dp]>, zero = 1, zero_axes = [dp, dp]>} : tensor<4xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @planned_c2_axes_without_stage() {
    // expected-error@+1 {{C2: zero_axes need a ZeRO stage > 0}}
    %w = tess.parameter "w" trainable {tess.planned = #tess.planned<strategy = "[-] ZeRO-0", results = [#tess.layout<[-]>], state = #tess.layout<[-]>, zero_axes = [dp]>} : tensor<4xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @planned_c3_zero_without_state(%x: tensor<4xf32>) {
    // expected-error@+1 {{C3: zero and zero_axes need a state layout (the parameter form)}}
    %y = tess.exp %x {tess.planned = #tess.planned<strategy = "dp", operands = [#tess.layout<[dp]>], results = [#tess.layout<[dp]>], zero = 1>} : tensor<4xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @planned_c4_dictionary(%x: tensor<4xf32>) {
    // expected-error@+1 {{C4: tess.planned of an op must be a #tess.planned, got {strategy = "dp"}}}
    %y = tess.exp %x {tess.planned = {strategy = "dp"}} : tensor<4xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  // expected-error@+1 {{C4: tess.planned of result 0 must be a #tess.layout, got "[dp]"}}
  func.func @planned_c4_result(%x: tensor<4xf32>) -> (tensor<4xf32> {tess.planned = "[dp]"}) {
    return %x : tensor<4xf32>
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @planned_c5_operands(%x: tensor<4xf32>) {
    // expected-error@+1 {{C5: tess.planned needs one layout per operand (1) and per result (1), got 0 and 1}}
    %y = tess.exp %x {tess.planned = #tess.planned<strategy = "dp", results = [#tess.layout<[dp]>]>} : tensor<4xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @planned_c5_results() {
    // expected-error@+1 {{C5: tess.planned needs one layout per operand (0) and per result (1), got 0 and 0}}
    %w = tess.parameter "w" trainable {tess.planned = #tess.planned<strategy = "[-] ZeRO-0", state = #tess.layout<[-]>>} : tensor<4xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @planned_c5_state_off_parameter(%x: tensor<4xf32>) {
    // expected-error@+1 {{C5: a tess.planned with a state layout must sit on a tess.parameter}}
    %y = tess.exp %x {tess.planned = #tess.planned<strategy = "dp", operands = [#tess.layout<[dp]>], results = [#tess.layout<[dp]>], state = #tess.layout<[dp]>>} : tensor<4xf32>
    return
  }
}

// -----

func.func @planned_c6_no_mesh(%x: tensor<4xf32>) {
  // expected-error@+1 {{C6: the planned operand 0 layout names axis 'dp' but the module has no tess.mesh}}
  %y = tess.exp %x {tess.planned = #tess.planned<strategy = "dp", operands = [#tess.layout<[dp]>], results = [#tess.layout<[dp]>]>} : tensor<4xf32>
  return
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @planned_c6_layout_axis(%x: tensor<4xf32>) {
    // expected-error@+1 {{C6: axis 'tp' of the planned result 0 layout is not an axis of the mesh #tess.mesh<dp = 2>}}
    %y = tess.exp %x {tess.planned = #tess.planned<strategy = "dp", operands = [#tess.layout<[dp]>], results = [#tess.layout<[-] partial(tp)>]>} : tensor<4xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @planned_c6_zero_axis() {
    // expected-error@+1 {{C6: axis 'tp' of the planned zero_axes is not an axis of the mesh #tess.mesh<dp = 2>}}
    %w = tess.parameter "w" trainable {tess.planned = #tess.planned<strategy = "[-] ZeRO-1", results = [#tess.layout<[-]>], state = #tess.layout<[-]>, zero = 1, zero_axes = [tp]>} : tensor<4xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  // expected-error@+1 {{C6: axis 'tp' of the planned result 0 layout is not an axis of the mesh #tess.mesh<dp = 2>}}
  func.func @planned_c6_result(%x: tensor<4xf32>) -> (tensor<4xf32> {tess.planned = #tess.layout<[tp]>}) {
    return %x : tensor<4xf32>
  }
}

// -----

// expected-error@+1 {{tess.planned: 'strategy' is required}}
module attributes {tess.x = #tess.planned<results = []>} {}

// -----

// expected-error@+1 {{tess.planned: unknown field 'stage'}}
module attributes {tess.x = #tess.planned<strategy = "dp", stage = 1>} {}

// -----

module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  // expected-error@+1 {{C5: tess.pieces of argument 0 must be an array of one piece count per dim of 'tensor<8x12xf32>', got array<i64: 3>}}
  func.func @layout_c5_count(%w: tensor<8x12xf32> {tess.layout = #tess.layout<[-, tp]>, tess.pieces = array<i64: 3>}) {
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  // expected-error@+1 {{C5: tess.pieces of argument 0: dim 0 is in 2 pieces but not split in its tess.layout}}
  func.func @layout_c5_unsplit(%w: tensor<8x12xf32> {tess.layout = #tess.layout<[-, tp]>, tess.pieces = array<i64: 2, 1>}) {
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  // expected-error@+1 {{C5: tess.pieces of result 0: dim 1 of size 12 is not 5 equal pieces}}
  func.func @layout_c5_unequal(%w: tensor<8x12xf32>) -> (tensor<8x12xf32> {tess.layout = #tess.layout<[-, tp]>, tess.pieces = array<i64: 1, 5>}) {
    return %w : tensor<8x12xf32>
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  // expected-error@+1 {{C5: tess.pieces of argument 0: dim 1 has 0 pieces}}
  func.func @layout_c5_zero(%w: tensor<8x12xf32> {tess.layout = #tess.layout<[-, tp]>, tess.pieces = array<i64: 1, 0>}) {
    return
  }
}
