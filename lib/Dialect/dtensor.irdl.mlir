// The dtensor dialect: the one definition, embedded into libdtensor by CMake
// and loaded at context set-up (dtensorContextRegisterDialect). IRDL checks
// the structure below; lib/Dialect/Verify.c checks the rest (spec syntax,
// mesh symbols, ranks, local shapes, optional attributes).
irdl.dialect @dtensor {
  // #dtensor.layout<@mesh, "[S0, R] Psum(1)">: a mesh symbol and a spec.
  irdl.attribute @layout {
    %mesh = irdl.base "#builtin.symbol_ref"
    %spec = irdl.base "#builtin.string"
    irdl.parameters(mesh: %mesh, spec: %spec)
  }

  // A device mesh, a module-level symbol.
  irdl.operation @mesh {
    %name = irdl.base "#builtin.string"
    %arr = irdl.base "#builtin.dense_array"
    %list = irdl.base "#builtin.array"
    irdl.attributes {"sym_name" = %name, "shape" = %arr, "axis_names" = %list}
  }

  // Note: one constraint value used at two places requires the two to be
  // equal, so ops whose result type may differ use a second one.

  // A sharding constraint on a value (global shapes).
  irdl.operation @annotate {
    %t = irdl.base "!builtin.tensor"
    %l = irdl.base @dtensor::@layout
    irdl.operands(input: %t)
    irdl.results(output: %t)
    irdl.attributes {"layout" = %l}
  }

  // An explicit conversion from one layout to another.
  irdl.operation @redistribute {
    %t = irdl.base "!builtin.tensor"
    %u = irdl.base "!builtin.tensor"
    %l = irdl.base @dtensor::@layout
    %k = irdl.base @dtensor::@layout
    irdl.operands(input: %t)
    irdl.results(output: %u)
    irdl.attributes {"src" = %l, "dst" = %k}
  }

  irdl.operation @all_gather {
    %t = irdl.base "!builtin.tensor"
    %u = irdl.base "!builtin.tensor"
    %m = irdl.base "#builtin.symbol_ref"
    %a = irdl.base "#builtin.dense_array"
    %i = irdl.base "#builtin.integer"
    irdl.operands(input: %t)
    irdl.results(output: %u)
    irdl.attributes {"mesh" = %m, "mesh_axes" = %a, "gather_dim" = %i}
  }

  irdl.operation @all_reduce {
    %t = irdl.base "!builtin.tensor"
    %m = irdl.base "#builtin.symbol_ref"
    %a = irdl.base "#builtin.dense_array"
    %s = irdl.base "#builtin.string"
    irdl.operands(input: %t)
    irdl.results(output: %t)
    irdl.attributes {"mesh" = %m, "mesh_axes" = %a, "reduce" = %s}
  }

  irdl.operation @reduce_scatter {
    %t = irdl.base "!builtin.tensor"
    %u = irdl.base "!builtin.tensor"
    %m = irdl.base "#builtin.symbol_ref"
    %a = irdl.base "#builtin.dense_array"
    %i = irdl.base "#builtin.integer"
    %s = irdl.base "#builtin.string"
    irdl.operands(input: %t)
    irdl.results(output: %u)
    irdl.attributes {"mesh" = %m, "mesh_axes" = %a, "shard_dim" = %i,
                     "reduce" = %s}
  }

  irdl.operation @all_to_all {
    %t = irdl.base "!builtin.tensor"
    %u = irdl.base "!builtin.tensor"
    %m = irdl.base "#builtin.symbol_ref"
    %a = irdl.base "#builtin.dense_array"
    %i = irdl.base "#builtin.integer"
    %j = irdl.base "#builtin.integer"
    irdl.operands(input: %t)
    irdl.results(output: %u)
    irdl.attributes {"mesh" = %m, "mesh_axes" = %a, "gather_dim" = %i,
                     "shard_dim" = %j}
  }

  irdl.operation @local_split {
    %t = irdl.base "!builtin.tensor"
    %u = irdl.base "!builtin.tensor"
    %m = irdl.base "#builtin.symbol_ref"
    %a = irdl.base "#builtin.dense_array"
    %i = irdl.base "#builtin.integer"
    irdl.operands(input: %t)
    irdl.results(output: %u)
    irdl.attributes {"mesh" = %m, "mesh_axes" = %a, "shard_dim" = %i}
  }

  irdl.operation @broadcast {
    %t = irdl.base "!builtin.tensor"
    %m = irdl.base "#builtin.symbol_ref"
    %a = irdl.base "#builtin.dense_array"
    %i = irdl.base "#builtin.integer"
    irdl.operands(input: %t)
    irdl.results(output: %t)
    irdl.attributes {"mesh" = %m, "mesh_axes" = %a, "root" = %i}
  }

  irdl.operation @permute {
    %t = irdl.base "!builtin.tensor"
    %m = irdl.base "#builtin.symbol_ref"
    %a = irdl.base "#builtin.dense_array"
    %p = irdl.base "#builtin.dense_array"
    irdl.operands(input: %t)
    irdl.results(output: %t)
    irdl.attributes {"mesh" = %m, "mesh_axes" = %a, "pairs" = %p}
  }

  // `mesh_axes` (array<i64>, optional: all axes when absent) is not listed
  // here because IRDL (MLIR 22) has no optional attributes and requires
  // every listed one; Verify.c checks it when present, as it checks the
  // collectives' (docs/dialect.md).
  irdl.operation @mesh_index {
    %m = irdl.base "#builtin.symbol_ref"
    %idx = irdl.is index
    irdl.results(index: variadic %idx)
    irdl.attributes {"mesh" = %m}
  }

  // A lookup by computed indices (docs/gather.md): `dims` is an
  // einsum-like spec "vd,bt->btd" naming the table's dims, each index
  // tensor's and the result's; a table letter missing from the result is
  // selected by the next index tensor. An index outside the table reads
  // zero. Operands: the table, then the index tensors (all of one type).
  irdl.operation @gather {
    %t = irdl.base "!builtin.tensor"
    %i = irdl.base "!builtin.tensor"
    %r = irdl.base "!builtin.tensor"
    %s = irdl.base "#builtin.string"
    irdl.operands(table: %t, indices: variadic %i)
    irdl.results(output: %r)
    irdl.attributes {"dims" = %s}
  }

  // A gather's adjoint: `dims` "vd,bt,btd->vd" names the destination's
  // dims, each index tensor's and the updates'; each update is added to
  // the destination element its indices select, and one whose index falls
  // outside is dropped. Operands: destination, index tensors (all of one
  // type), updates.
  irdl.operation @scatter_add {
    %t = irdl.base "!builtin.tensor"
    %i = irdl.base "!builtin.tensor"
    %u = irdl.base "!builtin.tensor"
    %s = irdl.base "#builtin.string"
    irdl.operands(dest: %t, indices: variadic %i, updates: %u)
    irdl.results(output: %t)
    irdl.attributes {"dims" = %s}
  }
}
