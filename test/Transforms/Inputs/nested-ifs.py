"""Prints a function of N nested scf.if on a sharded tensor (argv[1])."""
import sys

n = int(sys.argv[1])
out = ['"dtensor.mesh"() {sym_name = "mesh", shape = array<i64: 2>, '
       'axis_names = ["a"]} : () -> ()',
       'func.func @f(%x: tensor<8xf32> {dtensor.layout = '
       '#dtensor.layout<@mesh, "[S0]">}, %c: i1) -> tensor<8xf32> {']
for i in range(n):
    out.append(f'%r{i} = scf.if %c -> (tensor<8xf32>) {{')
for i in reversed(range(n)):
    out.append(f'scf.yield {"%x" if i == n - 1 else f"%r{i + 1}"} : tensor<8xf32>')
    out.append('} else {')
    out.append('scf.yield %x : tensor<8xf32>')
    out.append('}')
out += ['return %r0 : tensor<8xf32>', '}']
print("\n".join(out))
