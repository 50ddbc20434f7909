#!/usr/bin/env bash
# Twenty-second session, call 4: the final code (bundle/: the 9x9 Gaussian
# blends on 3 channels at 80 registers) against base (63cb9e5's cbi-bench,
# bundle-extra/base-bin.tar.xz) on the blends, in turn, twice; every
# stream8 kernel's registers in both builds; the issue's pipelines with
# their floors; the GPU suites and sanitizers.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/call4; mkdir -p $d
tar -C /tmp -xJf bundle-extra/base-bin.tar.xz
mkdir -p /tmp/new/bin && cp $u/bin/cbi-bench /tmp/new/bin/
for b in base new; do
  cuobjdump -res-usage /tmp/$b/bin/cbi-bench 2>&1 | awk '/Function/ {n=$2} /REG:/ {match($0,/REG:[0-9]+/); r=substr($0,RSTART,RLENGTH); match($0,/STACK:[0-9]+/); print r, substr($0,RSTART,RLENGTH), n}' \
    | grep stream8_stencil | sort -k3 > $d/regs-$b.txt
done
echo "stream8 kernels: $(wc -l < $d/regs-base.txt) base, $(wc -l < $d/regs-new.txt) new; registers that differ (the capped entries renamed):"
diff <(sed 's/_capped//' $d/regs-base.txt) <(sed 's/_capped//' $d/regs-new.txt) | c++filt | sed -E 's/cbi::(AnyBorderSource|GaussianOp|BoxOp|BlendedStencils)//g' | cut -c1-220
grep -c _capped $d/regs-new.txt | sed 's/^/capped entries: /'
VARIANTS=default blends_in_turn $d 200 base new
issue_pipes $d
checks "Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*:Fusion.DefaultStreamSchedules*:Fusion.Blends*" test_fusion test_defaults test_filters_cuda
tar -C $d -cJf $OUT/call4.tar.xz .
