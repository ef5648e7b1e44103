# Web-search flow sizes: the DCTCP paper's measured distribution (Alizadeh et al., "Data Center
# TCP", SIGCOMM 2010, Fig. 4), at the points the pFabric simulations tabulated it (Alizadeh et
# al., SIGCOMM 2013, §5: "web search"), there in 1460-byte packets, here in bytes (× 1460).
# Columns: flow size in payload bytes, cumulative probability. Mean about 1.6 MB.
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
