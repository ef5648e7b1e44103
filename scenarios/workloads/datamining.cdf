# Data-mining flow sizes: the VL2 paper's measured distribution (Greenberg et al., "VL2",
# SIGCOMM 2009, Fig. 2), at the points the pFabric simulations tabulated it (Alizadeh et al.,
# SIGCOMM 2013, §5: "data mining"), there in 1460-byte packets, here in bytes (× 1460).
# Columns: flow size in payload bytes, cumulative probability. Mean about 7.4 MB: heavy-tailed,
# half the flows one packet.
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
