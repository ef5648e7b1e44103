#!/usr/bin/env python3
"""Write subscribers.csv for the ISP what-if: N subscribers (default 10,000) of plan `basic`
under `access`, subscriber k (0-based) at 100.64.0.1 + k, the addresses the scenario's
`dst = "100.64.0.1"`, `dst_hosts = N` draws from."""
import ipaddress, sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
first = ipaddress.IPv4Address("100.64.0.1")
with open("subscribers.csv", "w") as f:
    f.write("name,parent,plan,addresses\n")
    for k in range(n):
        f.write(f"s{k + 1},access,basic,{first + k}\n")
