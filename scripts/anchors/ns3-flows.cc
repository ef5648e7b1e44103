// ns3-flows: ns-3's wall time on flows that come and go, the peer of scenarios/fct-10k.toml.
//
//   flows10k  N short TCP flows (default 10,000; CUBIC, ns-3's SACK defaults) from one sender
//             through router R --100 Mbit/s, 4 ms--> sink, arriving as a Poisson process
//             (default 500 a second, so over 20 s), each a BulkSendApplication of an
//             exponentially distributed size (mean 12,500 bytes, at least one byte) started at
//             its arrival; a 1000-packet FIFO (FifoQueueDisc) on R's egress, a 1-packet device
//             queue so that the queue lives in the qdisc. Access link 1 Gbit/s, 1 ms: base RTT
//             10 ms, as linkshare-flows10k.toml (link delay 4 ms, extra_delay 1 ms).
//
// The arrival times and sizes come from ns-3's own seeded RNG (RngSeedManager seed 1, run 1):
// the same distribution as linkshare's, not the same draws. Output: one "RESULT key=value ..."
// line in the form of the shared anchors' ns3-bench (scripts/bench-ns3 reads run_wall_s and
// goodput_mbps): wall time of Simulator::Run() only, packets over the bottleneck, peak RSS.

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

using namespace ns3;

namespace
{

uint64_t g_fwd = 0;

void
CountFwd(Ptr<const Packet>)
{
    ++g_fwd;
}

long
PeakRssKiB()
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

} // namespace

int
main(int argc, char* argv[])
{
    uint32_t flows = 10000;
    double rate = 500.0;
    double meanBytes = 12500.0;
    double duration = 21.0;

    CommandLine cmd(__FILE__);
    cmd.AddValue("flows", "number of arriving flows", flows);
    cmd.AddValue("rate", "arrivals per second (Poisson)", rate);
    cmd.AddValue("meanBytes", "mean flow size, bytes (exponential)", meanBytes);
    cmd.AddValue("duration", "simulated seconds", duration);
    cmd.Parse(argc, argv);

    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpCubic::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));

    Ptr<Node> sender = CreateObject<Node>();
    Ptr<Node> router = CreateObject<Node>();
    Ptr<Node> sink = CreateObject<Node>();
    InternetStackHelper stack;
    stack.Install(sender);
    stack.Install(router);
    stack.Install(sink);

    PointToPointHelper access;
    access.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
    access.SetChannelAttribute("Delay", StringValue("1ms"));
    PointToPointHelper bottle;
    bottle.SetDeviceAttribute("DataRate", StringValue("100Mbps"));
    bottle.SetChannelAttribute("Delay", StringValue("4ms"));
    bottle.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1p"));

    Ipv4AddressHelper addr;
    NetDeviceContainer aDevs = access.Install(sender, router);
    addr.SetBase("10.1.1.0", "255.255.255.0");
    addr.Assign(aDevs);

    NetDeviceContainer bDevs = bottle.Install(router, sink);
    bDevs.Get(0)->TraceConnectWithoutContext("PhyTxEnd", MakeCallback(&CountFwd));
    TrafficControlHelper tch;
    tch.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize", StringValue("1000p"));
    QueueDiscContainer qds = tch.Install(bDevs.Get(0));
    addr.SetBase("10.9.0.0", "255.255.255.0");
    Ipv4InterfaceContainer bIf = addr.Assign(bDevs);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    const uint16_t port = 9000;
    PacketSinkHelper sinkHelper("ns3::TcpSocketFactory",
                                InetSocketAddress(Ipv4Address::GetAny(), port));
    ApplicationContainer sinkApps = sinkHelper.Install(sink);
    sinkApps.Start(Seconds(0.0));

    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(1);
    Ptr<ExponentialRandomVariable> gap = CreateObject<ExponentialRandomVariable>();
    gap->SetAttribute("Mean", DoubleValue(1.0 / rate));
    Ptr<ExponentialRandomVariable> size = CreateObject<ExponentialRandomVariable>();
    size->SetAttribute("Mean", DoubleValue(meanBytes));

    BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(bIf.GetAddress(1), port));
    bulk.SetAttribute("SendSize", UintegerValue(1448));
    double t = 0.0;
    uint64_t offered = 0;
    for (uint32_t i = 0; i < flows; ++i)
    {
        t += gap->GetValue();
        uint64_t bytes = std::max<uint64_t>(1, static_cast<uint64_t>(size->GetValue() + 0.5));
        offered += bytes;
        bulk.SetAttribute("MaxBytes", UintegerValue(bytes));
        ApplicationContainer a = bulk.Install(sender);
        a.Start(Seconds(t));
    }

    Simulator::Stop(Seconds(duration));
    auto t0 = std::chrono::steady_clock::now();
    Simulator::Run();
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    uint64_t rx = DynamicCast<PacketSink>(sinkApps.Get(0))->GetTotalRx();
    QueueDisc::Stats st = qds.Get(0)->GetStats();
    std::printf("RESULT scenario=flows10k flows=%u last_arrival_s=%.2f offered_bytes=%lu "
                "sink_rx_bytes=%lu bottleneck_pkts=%lu events=%lu qdisc_drop=%u "
                "goodput_mbps=%.3f run_wall_s=%.4f peak_rss_kib=%ld\n",
                flows,
                t,
                (unsigned long)offered,
                (unsigned long)rx,
                (unsigned long)g_fwd,
                (unsigned long)Simulator::GetEventCount(),
                st.nTotalDroppedPackets,
                rx * 8.0 / duration / 1e6,
                wall,
                PeakRssKiB());
    Simulator::Destroy();
    return 0;
}
