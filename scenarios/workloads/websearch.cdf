# Web-search flow sizes: the DCTCP paper's measured distribution (Alizadeh et al., "Data Center
# TCP", SIGCOMM 2010, Fig. 4: background flows of a web-search cluster), as the pFabric
# simulations tabulated it (Alizadeh et al., "pFabric", SIGCOMM 2013, §5.1, "web search") in
# 1460-byte packets; here in payload bytes (packets × 1460).
# Checked point by point (2026-11) against the public ns-2 table the pFabric and PIAS
# simulations ship, `CDF_dctcp.tcl` (HKUST-SING/PIAS-NS2, scripts/; rows `packets 1 cdf`:
# 6 0, 6 0.15, 13 0.2, 19 0.3, 33 0.4, 53 0.53, 133 0.6, 667 0.7, 1333 0.8, 3333 0.9,
# 6667 0.97, 20000 1), whose scripts give its mean as 1138 packets. Interpolated linearly
# (ns-2's EmpiricalRandomVariable), the mean here is 1141 packets = 1.666 MB.
# Columns: flow size in payload bytes, cumulative probability.
# Used with size_dist = "websearch", or size_dist = "cdf" and size_cdf = this file.
8760 0
8760 0.15
18980 0.2
27740 0.3
48180 0.4
77380 0.53
194180 0.6
973820 0.7
1946180 0.8
4866180 0.9
9733820 0.97
29200000 1
