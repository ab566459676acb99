"""Prints a function of N nested scf.if or scf.for (argv[1], argv[2]) on a
sharded tensor."""
import sys

kind, n = sys.argv[1], int(sys.argv[2])
out = ['"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2>, '
       'axis_names = ["a"]} : () -> ()',
       'func.func @f(%x: tensor<8xf32> {dtensor.layout = '
       '#dtensor.layout<@mesh, "[S0]">}, %c: i1) -> tensor<8xf32> {',
       '%c0 = arith.constant 0 : index', '%c1 = arith.constant 1 : index',
       '%c2 = arith.constant 2 : index']
for i in range(n):
    if kind == "if":
        out.append(f'%r{i} = scf.if %c -> (tensor<8xf32>) {{')
    else:
        init = "%x" if i == 0 else f"%a{i - 1}"
        out.append(f'%r{i} = scf.for %i{i} = %c0 to %c2 step %c1 '
                   f'iter_args(%a{i} = {init}) -> (tensor<8xf32>) {{')
for i in reversed(range(n)):
    inner = f"%r{i + 1}" if i < n - 1 else ("%x" if kind == "if" else f"%a{i}")
    out.append(f'scf.yield {inner} : tensor<8xf32>')
    if kind == "if":
        out += ['} else {', 'scf.yield %x : tensor<8xf32>']
    out.append('}')
out += ['return %r0 : tensor<8xf32>', '}']
print("\n".join(out))
