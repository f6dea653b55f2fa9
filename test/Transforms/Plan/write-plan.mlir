// RUN: tessera-opt %s -split-input-file --tess-write-plan='plan={#tess.plan<remat = "full", zero = 3>}' | FileCheck %s
// RUN: tessera-opt %s -split-input-file --tess-write-plan | FileCheck %s --check-prefix=DEFAULT

// Tests that the plan's text becomes the module's tess.plan (printed in
// its own field order), replacing the one there.
// CHECK: module attributes {tess.plan = #tess.plan<zero = 3, remat = "full">}
// DEFAULT: module attributes {tess.plan = #tess.plan<>}
module attributes {tess.plan = #tess.plan<remat = "selective">} {
}

// -----

// Tests that a module without a plan gets one.
// CHECK: module attributes {tess.plan = #tess.plan<zero = 3, remat = "full">}
// DEFAULT: module attributes {tess.plan = #tess.plan<>}
module {
}
