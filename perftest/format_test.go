package perftest

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Lines printed by Debian 12's ib_*_bw/_lat over siw in the lab; the rows
// here must come out the same byte for byte.
func TestRowsAsPerftestPrintsThem(t *testing.T) {
	var b strings.Builder
	writeBWRow(&b, &BWReport{Size: 4096, Iters: 200, BWPeak: 0, BWAvg: 7.37, MsgRate: 0.001887}, false)
	assert.Equal(t, " 4096       200              0.00               7.37   \t\t   0.001887\n", b.String())
	b.Reset()
	writeBWRow(&b, &BWReport{Size: 4, Iters: 20, BWPeak: 0.000565, BWAvg: 0.000066, MsgRate: 0.002053}, true)
	assert.Equal(t, " 4          20           0.000565            0.000066            0.002053\n", b.String(), "Gb/s below 0.1 with six decimals")
	b.Reset()
	writeBWRow(&b, &BWReport{Size: 2048, Iters: 20, BWPeak: 0.20, BWAvg: 0.15, MsgRate: 0.009266}, true)
	assert.Equal(t, " 2048       20               0.20               0.15   \t\t   0.009266\n", b.String())
	b.Reset()
	writeLatRow(&b, &LatReport{Size: 64, Iters: 100, TMin: 475.49, TMax: 7889.68, TTypical: 4001.46, TAvg: 4012.40,
		TStdev: 1223.59, P99: 7889.68, P999: 7889.68})
	assert.Equal(t, " 64      100          475.49         7889.68      4001.46  \t       4012.40     \t1223.59\t\t7889.68 \t\t7889.68\n", b.String())
	b.Reset()
	inf := math.Inf(1)
	writeLatRow(&b, &LatReport{Size: 64, Iters: 500, TMin: inf, TMax: inf, TTypical: inf, TAvg: inf,
		TStdev: math.Copysign(math.NaN(), -1), P99: inf, P999: inf})
	assert.Equal(t, " 64      500          inf            inf          inf      \t       inf         \t-nan   \t\tinf     \t\tinf    \n", b.String(),
		"what perftest prints when its clock calibration failed")
	b.Reset()
	writeDest(&b, "local", &Dest{QPN: 3, PSN: 0xd54fa9})
	assert.Equal(t, " local address: LID 0000 QPN 0x0003 PSN 0xd54fa9\n", b.String())
}

func TestCHex(t *testing.T) {
	assert.Equal(t, "0000", cHex(0, 4), "C prints %#04x of 0 without 0x")
	assert.Equal(t, "0x03", cHex(3, 4))
	assert.Equal(t, "0x12345", cHex(0x12345, 4), "wider than the field")
	assert.Equal(t, "0x00012a", cHex(0x12a, 8))
}

// TestInfoBlock: the test information block follows perftest's layout
// (compare the lab's ib_send_bw server, whose device is siw0).
func TestInfoBlock(t *testing.T) {
	var b strings.Builder
	writeInfo(&b, &header{test: SendBW, role: Server, qps: 1, txDepth: 128, rxDepth: 200, cqMod: 100, mtu: 1024})
	want := resultLine +
		"                    Send BW Test\n" +
		" Dual-port       : OFF\t\tDevice         : iwarp-go\n" +
		" Number of qps   : 1\t\tTransport type : IW\n" +
		" Connection type : RC\t\tUsing SRQ      : OFF\n" +
		" PCIe relax order: Unsupported\n" +
		" ibv_wr* API     : OFF\n" +
		" RX depth        : 200\n" +
		" CQ Moderation   : 100\n" +
		" Mtu             : 1024[B]\n" +
		" Link type       : Ethernet\n" +
		" Max inline data : 0[B]\n" +
		" rdma_cm QPs\t : ON\n" +
		" Data ex. method : rdma_cm\n" + resultLine +
		" Waiting for client rdma_cm QP to connect\n" +
		" Please run the same command with the IB/RoCE interface IP\n" + resultLine
	assert.Equal(t, want, b.String())
	b.Reset()
	writeInfo(&b, &header{test: ReadLat, role: Client, qps: 1, txDepth: 1, mtu: 1024, outReads: 128})
	assert.Contains(t, b.String(), "                    RDMA_Read Latency Test\n")
	assert.Contains(t, b.String(), " TX depth        : 1\n Mtu ")
	assert.Contains(t, b.String(), " Outstand reads  : 128\n")
	assert.NotContains(t, b.String(), "CQ Moderation")
	assert.NotContains(t, b.String(), "Waiting")
}
