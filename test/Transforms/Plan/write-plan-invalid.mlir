// RUN: not tessera-opt %s --tess-write-plan='plan={#tess.layout<[dp]>}' 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: not tessera-opt %s --tess-write-plan='plan={#tess.plan<remat = "most">}' 2>&1 | FileCheck %s --check-prefix=RULE
// RUN: not tessera-opt %s --tess-write-plan='plan=plan' 2>&1 | FileCheck %s --check-prefix=TEXT

// Tests that a text which is no #tess.plan is an error naming the option,
// after the parser's own reason (a broken rule of #tess.plan included).
// OTHER: tess-write-plan: plan '#tess.layout<[dp]>' is not a #tess.plan<...>
// RULE: C2: remat must be none, selective or full, got 'most'
// RULE: tess-write-plan: plan '#tess.plan<remat = "most">' is not a #tess.plan<...>
// TEXT: tess-write-plan: plan 'plan' is not a #tess.plan<...>
module {
}
