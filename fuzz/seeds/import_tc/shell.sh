#!/bin/sh
# A classic hand-written HTB script (the LARTC/tc-htb(8) style), shell form.
set -e
DEV=eth1
TC=/sbin/tc
$TC qdisc del dev $DEV root 2>/dev/null || true
$TC qdisc add dev $DEV root handle 1: htb default 30
$TC class add dev $DEV parent 1: classid 1:1 htb rate 6mbit burst 15k
$TC class add dev $DEV parent 1:1 classid 1:10 htb rate 2mbit burst 15k
$TC class add dev $DEV parent 1:1 classid 1:20 htb rate 3mbit ceil 6mbit burst 15k
$TC class add dev $DEV parent 1:1 classid 1:30 htb rate 1kbit ceil 6mbit burst 15k \
    prio 7 quantum 1514
$TC qdisc add dev $DEV parent 1:10 handle 10: sfq perturb 10
$TC qdisc add dev $DEV parent 1:20 handle 20: fq_codel limit 2000 target 5ms interval 100ms noecn
$TC qdisc add dev $DEV parent 1:30 handle 30: cake bandwidth 6mbit diffserv4
U32="$TC filter add dev $DEV protocol ip parent 1:0 prio 1 u32"
$U32 match ip dport 80 0xffff flowid 1:10
$U32 match ip sport 25 0xffff flowid 1:20
$TC filter add dev $DEV parent 1: protocol ip prio 2 u32 match ip tos 0x10 0xff match ip protocol 6 0xff flowid 1:10
$TC filter add dev $DEV parent 1: protocol ipv6 prio 3 flower ip_proto udp dst_ip 2001:db8::/32 dst_port 5000-5100 classid 1:20
ip link set $DEV up
