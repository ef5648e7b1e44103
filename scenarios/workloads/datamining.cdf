# Data-mining flow sizes: the VL2 paper's measured distribution (Greenberg et al., "VL2",
# SIGCOMM 2009, Fig. 2), as the pFabric simulations tabulated it (Alizadeh et al., "pFabric",
# SIGCOMM 2013, §5.1, "data mining") in 1460-byte packets; here in payload bytes (× 1460).
# Checked point by point (2026-11) against the public ns-2 table the pFabric and PIAS
# simulations ship, `CDF_vl2.tcl` (HKUST-SING/PIAS-NS2, scripts/; rows `packets 1 cdf`:
# 1 0, 1 0.5, 2 0.6, 3 0.7, 7 0.8, 267 0.9, 2107 0.95, 66667 0.99, 666667 1), whose scripts give
# its mean as 5117 packets. Interpolated linearly, the mean here is 5116.6 packets = 7.470 MB:
# heavy-tailed, half the flows one packet.
# Columns: flow size in payload bytes, cumulative probability.
# Used with size_dist = "datamining", or size_dist = "cdf" and size_cdf = this file.
1460 0
1460 0.5
2920 0.6
4380 0.7
10220 0.8
389820 0.9
3076220 0.95
97333820 0.99
973333820 1
