//===- LigerKernelAttrs.td - the kernel contract's attributes -*- tablegen -*-===//
//
// The two attributes that carry a fusion group's kernel through the
// compiler (docs/Design/Kernel-ABI.md, "Where the record lives"):
//
// - `#liger.kernel_config` on a `liger.fusion` group: the kernel template
//   chosen for it, once, by liger-select-kernel-config, and that template's
//   tunables; the lowering reads it.
// - `#liger.kernel_info` on each `gpu.func` the lowering builds: the kernel
//   ABI's record of the kernel (`KernelSpec` less its name and function),
//   which the bundle writer turns into the manifest's entry.
//
// The kernel ABI's enumerations (parameter roles, kinds, dtypes, templates,
// swizzles) are parameters of their ABI type, spelt by the ABI's one table
// (LigerKernelAbi.h): this file names no enumerator of theirs.
//
//===----------------------------------------------------------------------===//

#ifndef LIGER_DIALECT_LIGER_IR_LIGERKERNELATTRS_TD
#define LIGER_DIALECT_LIGER_IR_LIGERKERNELATTRS_TD

include "liger/Dialect/Liger/IR/LigerDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Kernel configuration
//===----------------------------------------------------------------------===//

def Liger_KernelTemplate : I32EnumAttr<"KernelTemplate",
    "the kernel template a fusion group is built with", [
      I32EnumAttrCase<"rowwise", 0>,
      I32EnumAttrCase<"rope", 1>,
      I32EnumAttrCase<"cross_entropy", 2>,
      I32EnumAttrCase<"matmul_wgmma", 3>,
      I32EnumAttrCase<"matmul_mma_sync", 4>,
      I32EnumAttrCase<"attention", 5>]> {
  let cppNamespace = "::mlir::liger";
  let genSpecializedAttr = 0;
}

def Liger_MatmulSchedule : I32EnumAttr<"MatmulSchedule",
    "how a matmul_wgmma kernel's CTAs take their output tiles", [
      I32EnumAttrCase<"data_parallel", 0>,
      I32EnumAttrCase<"pingpong", 1>,
      I32EnumAttrCase<"persistent", 2>]> {
  let cppNamespace = "::mlir::liger";
  let genSpecializedAttr = 0;
}

// A flag that prints as `true` or `false` (an optional integer's printer
// would print 1 or 0).
def Liger_OptionalBool : OptionalParameter<"std::optional<bool>"> {
  let printer = [{ $_printer << (*$_self ? "true" : "false") }];
}

def Liger_KernelConfigAttr : AttrDef<Liger_Dialect, "KernelConfig"> {
  let mnemonic = "kernel_config";
  let summary = "the kernel template of a fusion group and its tunables";
  let description = [{
    Written on a `liger.fusion` group by `liger-select-kernel-config` (or
    pinned by hand) and read by `liger-lower-to-gpu`. The template is chosen
    once, here; each template takes its own tunables and no other:

    | template | tunables |
    |---|---|
    | `rowwise` | `threads`, `vector_width` (both required), `reuse_loads`, `ctas_per_sm`, `cluster` |
    | `cross_entropy` | `threads`, `vector_width` (both required), `reuse_loads`, `ctas_per_sm` |
    | `rope` | none |
    | `matmul_wgmma` | `tile_m`, `tile_n`, `tile_k`, `stages` (all required), `threads` (checked against the tile), `schedule`, `cluster` |
    | `matmul_mma_sync` | `tile_m`, `tile_n`, `tile_k`, `stages` (all required), `threads` (checked against the tile) |
    | `attention` | `tile_n` (the key/value block), `stages` (both required) |

    `threads` is a multiple of 32 in [32, 1024] and `ctas_per_sm` is in
    [1, 64]. `schedule` is `data_parallel` (the default: one CTA per output
    tile), `pingpong` (one CTA per SM looping over tiles, two consumer
    warpgroup sets taking turns, one's epilogue under the other's main
    loop) or `persistent` (one CTA per SM looping over tiles, one set of
    consumer warpgroups, the producer filling the next tile's stages
    during the epilogue; docs/Design/GPU-Lowering.md). A matmul's `cluster`
    is 1 (the default) or 2: the CTAs of a thread-block cluster that share
    each weight tile, every one of them loading its part for all with a TMA
    multicast. A row program's `cluster` is 1 (the default), 2, 4 or 8: the
    CTAs of a cluster that split each row, every one keeping its part on
    chip and their reductions combined through distributed shared memory
    (the loop form only). What depends on the group or the target (a vector width its row
    allows, tile shapes, shared memory) is checked by the passes.

    ```mlir
    liger.fusion rowwise(%x, %w) attributes {
        liger.kernel_config = #liger.kernel_config<kernel_template = rowwise, threads = 256, vector_width = 8>} ...
    liger.fusion matmul(%x, %w) attributes {
        liger.kernel_config = #liger.kernel_config<kernel_template = matmul_wgmma, threads = 384, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>} ...
    ```
  }];
  let parameters = (ins
    EnumParameter<Liger_KernelTemplate>:$kernel_template,
    OptionalParameter<"std::optional<int64_t>">:$threads,
    OptionalParameter<"std::optional<int64_t>">:$vector_width,
    Liger_OptionalBool:$reuse_loads,
    OptionalParameter<"std::optional<int64_t>">:$ctas_per_sm,
    OptionalParameter<"std::optional<int64_t>">:$tile_m,
    OptionalParameter<"std::optional<int64_t>">:$tile_n,
    OptionalParameter<"std::optional<int64_t>">:$tile_k,
    OptionalParameter<"std::optional<int64_t>">:$stages,
    OptionalParameter<"std::optional<::mlir::liger::MatmulSchedule>">:$schedule,
    OptionalParameter<"std::optional<int64_t>">:$cluster
  );
  // A struct: the tunables a template takes are any subset, in any order.
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The discardable attribute of a fusion group that holds it.
    static StringRef getAttrName() { return "liger.kernel_config"; }
    /// Whether the template is one of the matmul family.
    bool isMatmul() const {
      return getKernelTemplate() == KernelTemplate::matmul_wgmma ||
             getKernelTemplate() == KernelTemplate::matmul_mma_sync;
    }
  }];
}

//===----------------------------------------------------------------------===//
// Kernel info: the kernel ABI's record of a built kernel
//===----------------------------------------------------------------------===//

class Liger_AbiParameter<string abiType, string desc>
    : AttrParameter<"::liger::runtime::" # abiType, desc>;

// A list printed and parsed in square brackets (`[]` when empty), so that
// it sits in a struct() format among other fields.
class Liger_BracketedList<string elementType, string desc>
    : ArrayRefParameter<elementType, desc> {
  let parser = "::mlir::liger::parseBracketedList<" # elementType # ">($_parser)";
  let printer = "::mlir::liger::printBracketedList($_printer, $_self)";
}
class Liger_OptionalBracketedList<string elementType, string desc>
    : OptionalArrayRefParameter<elementType, desc> {
  let parser = "::mlir::liger::parseBracketedList<" # elementType # ">($_parser)";
  let printer = "::mlir::liger::printBracketedList($_printer, $_self)";
}

def Liger_KernelParamAttr : AttrDef<Liger_Dialect, "KernelParam"> {
  let mnemonic = "kernel_param";
  let summary = "a kernel parameter (the kernel ABI's KernelParam)";
  let description = [{
    One memref parameter of a kernel, in launch order. `length` and `outer`
    are the static sizes of its kind's shape (docs/Design/Kernel-ABI.md);
    each is omitted when 0.

    ```mlir
    #liger.kernel_param<name = "input0", role = input, kind = rows, dtype = bf16, length = 4096>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the parameter's name">:$name,
    Liger_AbiParameter<"ParamRole", "input, output or workspace">:$role,
    Liger_AbiParameter<"ParamKind", "the shape pattern">:$kind,
    Liger_AbiParameter<"DType", "the element type">:$dtype,
    DefaultValuedParameter<"int64_t", "0">:$length,
    DefaultValuedParameter<"int64_t", "0">:$outer
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// The kernel ABI's record.
    ::liger::runtime::KernelParam toAbi() const;
  }];
}

def Liger_TensorMapAttr : AttrDef<Liger_Dialect, "TensorMap"> {
  let mnemonic = "tensor_map";
  let summary = "a TMA descriptor of a parameter (the kernel ABI's KernelTensorMap)";
  let description = [{
    A TMA descriptor the launcher encodes from parameter #`param` and passes
    after the parameters: `box_rows` x `box_cols` elements per copy, the swizzle span in
    bytes (32, 64 or 128), out-of-bounds elements zero unless `zero_fill =
    false`.

    ```mlir
    #liger.tensor_map<param = 0, box_rows = 128, box_cols = 64, swizzle = 128>
    ```
  }];
  let parameters = (ins
    "int64_t":$param,
    "int64_t":$box_rows,
    "int64_t":$box_cols,
    Liger_AbiParameter<"TensorMapSwizzle", "the swizzle span">:$swizzle,
    DefaultValuedParameter<"bool", "true">:$zero_fill
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def Liger_SideKernelAttr : AttrDef<Liger_Dialect, "SideKernel"> {
  let mnemonic = "side_kernel";
  let summary = "a kernel launched beside a kernel (the kernel ABI's SideKernelSpec)";
  let description = [{
    A kernel launched with the kernel's arguments on `grid` x 1 x 1 CTAs of
    `threads`: before it (a kernel_info's `prepare`: what the kernel reads
    from its workspaces, computed once) or after it (`finish`: a group
    that reduces across rows finishes there).

    ```mlir
    #liger.side_kernel<name = "f_rowwise_0_finish", grid = 128, threads = 256, shared_memory_bytes = 1024>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the side kernel's name">:$name,
    "int64_t":$grid,
    "int64_t":$threads,
    "int64_t":$shared_memory_bytes
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def Liger_NarrowKernelAttr : AttrDef<Liger_Dialect, "NarrowKernel"> {
  let mnemonic = "narrow_kernel";
  let summary = "a matmul kernel's narrow-tile variant (the kernel ABI's LaunchShape)";
  let description = [{
    A kernel of the same parameters with a narrower tile (64 rows), which
    the launcher runs instead of its kernel where its grid fills the GPU
    better (docs/Design/Kernel-ABI.md, "Narrow variants"): its name, grid,
    `threads`, dynamic shared memory and tensor maps (those of its kernel,
    boxes aside).

    ```mlir
    #liger.narrow_kernel<name = "f_dx_matmul_0_narrow", grid = [16, "rows/64", 1], threads = 256, shared_memory_bytes = 164864,
      tensor_maps = [#liger.tensor_map<param = 0, box_rows = 64, box_cols = 64, swizzle = 128>]>
    ```
  }];
  let parameters = (ins
    StringRefParameter<"the variant's name">:$name,
    Liger_BracketedList<"::liger::runtime::GridDim", "the grid">:$grid,
    "int64_t":$threads,
    "int64_t":$shared_memory_bytes,
    Liger_OptionalBracketedList<"TensorMapAttr", "the tensor maps">:$tensor_maps
  );
  let assemblyFormat = "`<` struct(params) `>`";
}

def Liger_KernelInfoAttr : AttrDef<Liger_Dialect, "KernelInfo"> {
  let mnemonic = "kernel_info";
  let summary = "the kernel ABI's record of a kernel the lowering built";
  let description = [{
    Set by `liger-lower-to-gpu` on each kernel it builds (a `gpu.func`), and
    read by the bundle writer alone, which adds the kernel's name and
    function and writes it into the manifest. Its fields are the manifest's
    (docs/Design/Kernel-ABI.md): the ABI template, the ops, the grid (3
    entries: an integer, or `"rows"`, `"tokens"`, `"ctas"`, `"rows/N"`),
    the block's `threads`, the dynamic shared memory, the vector width, the
    parameters, and optionally the tensor maps, the preparing and finishing
    kernels and the CTAs per SM its workspaces are sized for, and a matmul
    kernel's narrow-tile variant. Its verifier is the runtime's
    own check of a manifest's kernel (`verifyKernel`), so a kernel the
    runtime would refuse is refused where it is made.

    ```mlir
    #liger.kernel_info<kernel_template = rowwise, ops = "liger.silu", grid = ["rows", 1, 1],
      threads = 256, shared_memory_bytes = 0, vector_width = 8,
      params = [#liger.kernel_param<name = "input0", role = input, kind = rows, dtype = bf16, length = 4096>,
                #liger.kernel_param<name = "output0", role = output, kind = rows, dtype = bf16, length = 4096>]>
    ```
  }];
  let parameters = (ins
    Liger_AbiParameter<"KernelTemplate", "the ABI's kernel template">:$kernel_template,
    StringRefParameter<"the liger ops it came from">:$ops,
    Liger_BracketedList<"::liger::runtime::GridDim", "the grid">:$grid,
    "int64_t":$threads,
    "int64_t":$shared_memory_bytes,
    "int64_t":$vector_width,
    Liger_BracketedList<"KernelParamAttr", "the parameters">:$params,
    Liger_OptionalBracketedList<"TensorMapAttr", "the tensor maps">:$tensor_maps,
    OptionalParameter<"SideKernelAttr">:$prepare,
    OptionalParameter<"SideKernelAttr">:$finish,
    DefaultValuedParameter<"int64_t", "0">:$ctas_per_sm,
    OptionalParameter<"NarrowKernelAttr">:$narrow
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "const ::liger::runtime::KernelSpec &":$spec)>
  ];
  let extraClassDeclaration = [{
    /// The discardable attribute of a kernel that holds it.
    static StringRef getAttrName() { return "liger.kernel_info"; }
    /// The kernel ABI's spec of kernel `name`, which implements a fusion
    /// group of `function`.
    ::liger::runtime::KernelSpec toKernelSpec(StringRef name,
                                              StringRef function) const;
  }];
}

#endif // LIGER_DIALECT_LIGER_IR_LIGERKERNELATTRS_TD
